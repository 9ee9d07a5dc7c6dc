import CachePolicy
import CLMDB
import Glibc
import Locking
import Synchronization
import Timekeeping

/// One change to the disk cache, applied in order by the writer thread.
public enum WriteOp: Sendable {
    /// A piece of a body being stored; invisible until its entry is committed.
    case chunk(id: UInt64, index: Int, bytes: [UInt8])
    /// Makes an entry visible (replacing the variant under the same key, and every variant of the
    /// URL when its Vary fields changed).
    case commit(EntryCommit)
    /// Drops the chunks of a body that will never be committed (truncated, too large, uncacheable).
    case discard(id: UInt64, chunks: Int)
    /// Freshened head and facts for an entry (RFC 9111 §3.2).
    case replaceHead(HeadReplacement)
    /// The entry was served at `time` (LRU order).
    case touch(key: EntryKey, time: Int64)
    /// Removes every variant of a URL. `done`, when given, learns whether it was committed.
    case invalidate(primary: KeyDigest, done: RemovalOutcome? = nil)
    case purgeAll(done: RemovalOutcome? = nil)
    /// Removes entries stored at or after `time` (removeCachedResponses(since:)).
    case purgeSince(time: Int64, done: RemovalOutcome? = nil)
    /// Runs `done` once everything queued before it is committed.
    case barrier(@Sendable () -> Void)
    /// The first `bytes` of a body being stored are in chunks queued before this: told to
    /// `progress` once they are committed (or that the body was lost).
    case progress(BodyProgress, bytes: Int)

    var byteCount: Int {
        switch self {
        case .chunk(_, _, let b): return b.count
        case .commit(let c): return c.record.head.count
        case .replaceHead(let r): return r.head.count
        default: return 0
        }
    }

    /// Whether this removes entries (kept when its batch is dropped: tried again on its own).
    var isRemoval: Bool {
        switch self {
        case .invalidate, .purgeAll, .purgeSince: return true
        default: return false
        }
    }

    var removalOutcome: RemovalOutcome? {
        switch self {
        case .invalidate(_, let done), .purgeAll(let done), .purgeSince(_, let done): return done
        default: return nil
        }
    }
}

/// A `WriteOp.commit`'s entry, by reference: an operation is copied on its way to the writer and
/// within it, and a record's fields would each be retained on every copy.
public final class EntryCommit: Sendable {
    let key: EntryKey
    let spec: VariantSpec
    let record: EntryRecord

    init(key: EntryKey, spec: VariantSpec, record: EntryRecord) {
        self.key = key; self.spec = spec; self.record = record
    }
}

/// A `WriteOp.replaceHead`'s new head and facts for the entry stored under `key` with body `bodyID`.
public final class HeadReplacement: Sendable {
    let key: EntryKey
    let bodyID: UInt64
    let facts: EntryFacts
    let head: [UInt8]

    init(key: EntryKey, bodyID: UInt64, facts: EntryFacts, head: [UInt8]) {
        self.key = key; self.bodyID = bodyID; self.facts = facts; self.head = head
    }
}

/// Whether a removal (purge, invalidation) was committed, for a caller that must not say it was
/// done when it was not.
public final class RemovalOutcome: Sendable {
    private let done = Semaphore()
    private let committed = Atomic<Bool>(false)
    /// The verdict once given, or who waits for it (`whenFinished`).
    private let state = Locked<(verdict: Bool?, waiter: (@Sendable (Bool) -> Void)?)>((nil, nil))

    public init() {}

    func finish(committed ok: Bool) {
        committed.store(ok, ordering: .releasing)
        done.signal()
        let waiter = state.withLock { s -> (@Sendable (Bool) -> Void)? in
            s.verdict = ok
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?(ok)
    }

    /// Calls `body` with the verdict (true: committed) once the writer gives it, on the writer's
    /// thread, or at once on the caller's if it already has: for a caller that must not block.
    public func whenFinished(_ body: @escaping @Sendable (Bool) -> Void) {
        let verdict = state.withLock { s -> Bool? in
            if s.verdict == nil { s.waiter = body }
            return s.verdict
        }
        if let verdict { body(verdict) }
    }

    public enum Result: Sendable, Equatable {
        case committed, failed, timedOut
    }

    /// Waits up to `seconds` for the writer's verdict.
    public func wait(seconds: Double) -> Result {
        guard done.wait(seconds: seconds) else { return .timedOut }
        return committed.load(ordering: .acquiring) ? .committed : .failed
    }
}

/// One log line per interval for a failure that repeats (a full disk fails every batch), with
/// how many times it happened since the last.
struct RateLimitedReport {
    var unreported = 0
    var reportedAt = -Double.infinity
    let interval: Double

    /// Counts one failure; true when it should be logged now (then `unreported` says how many).
    mutating func count(now: Double) -> Bool {
        unreported += 1
        guard now - reportedAt >= interval else { return false }
        reportedAt = now
        return true
    }

    mutating func reported() { unreported = 0 }
}

/// The single writer: takes queued operations in batches and applies each batch in one LMDB
/// transaction (group commit), then evicts down to capacity.
final class DiskWriter: @unchecked Sendable {
    struct Databases {
        var variants, entries, chunks, access, info: MDB_dbi
    }

    private let env: OpaquePointer
    private let db: Databases
    private let settings: DiskStoreSettings
    private let log: @Sendable (String) -> Void
    /// The cache's clock: sync intervals, failure-report intervals, the eviction stamp.
    private let clock: any ProxyClock
    private let queue = Locked<[WriteOp]>([])
    private let wake = Semaphore()
    private let stopped = Atomic<Bool>(false)
    private var thread = pthread_t()
    private var running = false
    private var lastSync: Double = 0
    /// Bodies with a chunk in a failed batch: their entries must never be committed (they would
    /// point at missing chunks), so their later chunks and their commit are skipped.
    private var brokenBodies: Set<UInt64> = []
    /// Failed batches and failed evictions are logged once per interval with a count, not one
    /// line each (a full disk fails every batch).
    private var batchFailures = RateLimitedReport(interval: DiskWriter.failureLogInterval)
    private var evictionFailures = RateLimitedReport(interval: DiskWriter.failureLogInterval)
    static let failureLogInterval = 10.0
    /// How full the map may get (`MapBudget`).
    let budget: MapBudget

    let bytes: Atomic<Int>
    let entryCount: Atomic<Int>
    let pendingBytes = Atomic<Int>(0)
    /// Who waits for `pendingBytes` to fall to a mark (`whenPending(atMost:)`), told by the writer
    /// after each batch instead of polling it.
    private let drainWaiters = Locked<[(mark: Int, done: @Sendable () -> Void)]>([])

    /// Calls `done` once at most `mark` bytes are queued: at once on the caller's thread if that is
    /// so now, else on the writer's thread after the batch that brings it there (a caller on an
    /// event loop posts it to its loop). Never called if the writer stops first.
    func whenPending(atMost mark: Int, _ done: @escaping @Sendable () -> Void) {
        // Checked under the waiters' lock: the writer lowers the count before it takes the lock to
        // call the waiters, so a waiter added after a stale check is still called.
        let already = drainWaiters.withLock { waiters -> Bool in
            if pendingBytes.load(ordering: .relaxed) <= mark { return true }
            waiters.append((mark, done))
            return false
        }
        if already { done() }
    }

    /// After a batch lowered `pendingBytes`: calls the waiters whose mark it reached.
    private func callDrainWaiters() {
        let due = drainWaiters.withLock { waiters -> [@Sendable () -> Void] in
            guard !waiters.isEmpty else { return [] }
            let pending = pendingBytes.load(ordering: .relaxed)
            var due: [@Sendable () -> Void] = []
            waiters.removeAll { w in
                guard pending <= w.mark else { return false }
                due.append(w.done)
                return true
            }
            return due
        }
        for done in due { done() }
    }

    private let pins: BodyPins
    /// Bodies the current write transaction deletes, and those it leaves to their readers: told
    /// to `pins` when it commits or aborts.
    private var deletedInTransaction: [UInt64] = []
    private var postponedInTransaction: [UInt64] = []
    private var purgesAllInTransaction = false

    private func beginDeletions() {
        deletedInTransaction.removeAll(keepingCapacity: true)
        postponedInTransaction.removeAll(keepingCapacity: true)
        purgesAllInTransaction = false
    }

    /// Tells `pins` how the transaction that decided the deletions ended.
    private func endDeletions(committed: Bool) {
        pins.transactionEnded(deleted: deletedInTransaction, postponed: postponedInTransaction, committed: committed,
                              endsDeletingAll: purgesAllInTransaction)
    }

    /// Deletes a stored body's chunks, or leaves them to the responses still reading them.
    private func deleteBody(_ txn: borrowing WriteTransaction, id: UInt64, chunks: Int) throws(LMDBError) {
        if pins.postponeDeletion(of: id, chunks: chunks) {
            postponedInTransaction.append(id)
            return
        }
        deletedInTransaction.append(id)
        for i in 0..<chunks { try txn.delete(db.chunks, DiskStore.chunkKey(id, i)) }
    }

    /// The URLs the store may hold (`StoredURLFilter`), set for each commit as it is queued.
    let storedURLs: StoredURLFilter

    init(env: OpaquePointer, dbs: Databases, settings: DiskStoreSettings, pageSize: Int, bytes: Int, entryCount: Int,
         pins: BodyPins, storedURLs: StoredURLFilter, clock: any ProxyClock = SystemClock.shared,
         log: @escaping @Sendable (String) -> Void) {
        self.storedURLs = storedURLs
        self.env = env
        self.clock = clock
        budget = MapBudget(mapBytes: settings.mapSize, batchBytes: settings.batchBytes, pageSize: pageSize)
        self.pins = pins
        self.db = dbs
        self.settings = settings
        self.log = log
        self.bytes = Atomic(bytes)
        self.entryCount = Atomic(entryCount)
    }

    func start() {
        let ctx = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { arg in
            let me = Unmanaged<DiskWriter>.fromOpaque(arg!).takeRetainedValue()
            me.run()
            return nil
        }, ctx)
        precondition(rc == 0, "pthread_create failed for the cache writer")
        running = true
    }

    func stop() {
        guard running else { return }
        running = false
        stopped.store(true, ordering: .releasing)
        wake.signal()
        pthread_join(thread, nil)
    }

    /// Operations waiting for the writer (tests).
    var queuedCount: Int { queue.withLock { $0.count } }

    /// Every operation that makes an entry comes through here: its URL goes into `storedURLs` first.
    func enqueue(_ op: WriteOp) {
        if case .commit(let c) = op { storedURLs.insert(c.key.primary) }
        pendingBytes.add(op.byteCount, ordering: .relaxed)
        queue.withLock { $0.append(op) }
        wake.signal()
    }

    private func run() {
        while true {
            _ = wake.wait(seconds: settings.syncInterval)
            gatherBriefly()
            // At most a few MiB per transaction: uncommitted pages live in memory until the commit.
            let batch = queue.withLock { q -> [WriteOp] in
                var bytes = 0
                var n = 0
                while n < q.count, bytes < settings.batchBytes {
                    bytes += q[n].byteCount
                    n += 1
                }
                let b = Array(q[..<n])
                q.removeFirst(n)
                return b
            }
            if !batch.isEmpty { apply(batch) }
            syncIfDue(force: false)
            if !queue.withLock({ $0.isEmpty }) { wake.signal() }  // more than one batch was waiting
            if stopped.load(ordering: .acquiring) && queue.withLock({ $0.isEmpty }) {
                syncIfDue(force: true)
                return
            }
        }
    }

    /// Operations fewer than this wait `gatherMicroseconds` for company before they are committed.
    static let gatherBelow = 16
    static let gatherMicroseconds: UInt32 = 1_000

    /// A transaction per operation or two costs a commit (its meta page, its free-list pages, a
    /// `pwrite` each) for every stored response; under a stream of misses, a millisecond's wait
    /// lets the next ones share the commit (measured: a miss storm at 64 connections, 14,300 →
    /// 15,400 requests/s with one core for everything). What waits on a barrier (a flush, a
    /// purge's reply) goes at once; a request waiting for a body's commit to read it waits up
    /// to a millisecond more.
    private func gatherBriefly() {
        // An empty queue has nothing to gather for (a wake-up left over from an earlier batch).
        let wait = queue.withLock { q -> Bool in
            !q.isEmpty && q.count < DiskWriter.gatherBelow
                && !q.contains { if case .barrier = $0 { true } else { false } }
        }
        if wait, !stopped.load(ordering: .acquiring) { usleep(DiskWriter.gatherMicroseconds) }
    }

    private func syncIfDue(force: Bool) {
        guard settings.durability == .fast else { return }
        let now = clock.monotonic
        if force || now - lastSync >= settings.syncInterval {
            mdb_env_sync(env, 1)
            lastSync = now
        }
    }

    private func apply(_ batch: [WriteOp]) {
        var barriers: [@Sendable () -> Void] = []
        let batchBytes = batch.reduce(0) { $0 + $1.byteCount }
        defer {
            pendingBytes.subtract(batchBytes, ordering: .relaxed)
            callDrainWaiters()
            for b in barriers { b() }
        }
        for op in batch { if case .barrier(let b) = op { barriers.append(b) } }
        var committed = false
        do {
            try applyInTransaction(batch)
            committed = true
        } catch let error where error.isMapFull {
            // The map is full all the same (a batch dearer than foreseen, a map filled by an
            // earlier version): evict in small transactions, which fit in the reserve the budget
            // keeps, then try the batch once more; it is dropped if it still does not fit.
            do {
                try makeRoom(for: batchBytes)
                try applyInTransaction(batch)
                committed = true
            } catch {
                batchFailed(batch, error)
            }
        } catch {
            batchFailed(batch, error)
        }
        // A dropped batch's removals are tried on their own: a purge must happen, or say it did not.
        for op in batch where op.isRemoval {
            let ok = committed || applyRemovalAlone(op)
            op.removalOutcome?.finish(committed: ok)
        }
        for op in batch {
            guard case .progress(let progress, let n) = op else { continue }
            if committed, !brokenBodies.contains(progress.bodyID) { progress.advance(to: n) } else { progress.lose() }
        }
        // A body's life ends with its commit or discard: nothing more will come for it.
        if !brokenBodies.isEmpty {
            for op in batch {
                switch op {
                case .commit(let c): brokenBodies.remove(c.record.bodyID)
                case .discard(let id, _): brokenBodies.remove(id)
                default: break
                }
            }
        }
        if let target = evictionTarget() {
            do { try evict(target: target, perTransaction: DiskWriter.evictionsPerTransaction) } catch {
                evictionFailed(error)
            }
        }
    }

    /// Entries one eviction transaction removes: its pages (copies of the trees' paths, the free
    /// list's record) must fit in the budget's reserve; after a full map, fewer.
    static let evictionsPerTransaction = 128
    static let evictionsPerTransactionWhenFull = 16

    /// After `MDB_MAP_FULL`: evicts until `room` more map bytes than the budget's mark are free,
    /// in transactions small enough for what is left.
    private func makeRoom(for room: Int) throws(LMDBError) {
        let stored = bytes.load(ordering: .relaxed)
        let inUse = DiskStore.bytesInUse(env) ?? budget.mapBytes
        let target = MapBudget.target(inUse: inUse, stored: stored, capacity: settings.capacity, budget: budget,
                                      room: budget.batchCost(room)) ?? stored * 3 / 4
        try evict(target: target, perTransaction: DiskWriter.evictionsPerTransactionWhenFull)
    }

    /// A removal whose batch was dropped, in a transaction of its own; a purge of everything that
    /// still meets a full map deletes entry by entry in small transactions first (then the drop
    /// of what is left needs next to nothing). Whether it was committed.
    private func applyRemovalAlone(_ op: WriteOp) -> Bool {
        do {
            try applyInTransaction([op])
            return true
        } catch let error where error.isMapFull {
            do {
                if case .purgeAll = op {
                    try evict(target: 0, perTransaction: DiskWriter.evictionsPerTransactionWhenFull)
                } else {
                    try makeRoom(for: 0)
                }
                try applyInTransaction([op])
                return true
            } catch {
                log("cache removal failed (\(error)): nothing was removed")
                return false
            }
        } catch {
            log("cache removal failed (\(error)): nothing was removed")
            return false
        }
    }

    /// A map already over its budget when the cache opens (made under a larger `disk_capacity`,
    /// or filled by an earlier version, which could wedge it): evicted down before anything else
    /// runs, while the map is still open with the recovery margin (`DiskStoreSettings`), then
    /// set to its run-time size. Only before the writer and any reader start: a resize moves the
    /// map. Returns a note for the log when it evicted or could not.
    func recoverAtStart() -> String? {
        defer { mdb_env_set_mapsize(env, settings.mapSize) }   // never below the pages in use: LMDB rounds up
        let before = bytes.load(ordering: .relaxed)
        let count = entryCount.load(ordering: .relaxed)
        var inUse = DiskStore.bytesInUse(env) ?? 0
        guard inUse > budget.evictAbove || before > settings.capacity else { return nil }
        let inUseBefore = inUse
        do {
            // The ratio of pages to stored bytes is an estimate: measured again, a few rounds at most.
            for _ in 0..<4 {
                guard let target = MapBudget.target(inUse: inUse, stored: bytes.load(ordering: .relaxed),
                                                    capacity: settings.capacity, budget: budget) else { break }
                try evict(target: target, perTransaction: DiskWriter.evictionsPerTransactionWhenFull)
                inUse = DiskStore.bytesInUse(env) ?? 0
            }
        } catch {
            return "cache map over its budget at start (\(inUseBefore) bytes of pages in use, budget \(budget.evictAbove)) "
                + "and eviction failed: \(error)"
        }
        return "cache map over its budget at start (\(inUseBefore) bytes of pages in use, budget \(budget.evictAbove)): "
            + "evicted \(count - entryCount.load(ordering: .relaxed)) entries, \(before - bytes.load(ordering: .relaxed)) "
            + "bytes; \(inUse) bytes of pages in use now"
    }

    /// A commit that changes nothing of the cache (it records when it ran), so that the pages
    /// freed by the commit before it become reusable by the next one.
    private func commitPassage() throws(LMDBError) {
        let txn = try WriteTransaction(env: env)
        var stamp: [UInt8] = []
        stamp.appendInt64(clock.wallSeconds)
        try txn.put(db.info, Array("evicted-at".utf8), stamp)
        try txn.commit()
    }

    /// Stored bytes to evict down to, if over: past `capacity`, or when the map's pages in use
    /// (stored bytes with LMDB's overhead, and bodies still being written) pass the budget's mark
    /// (`MapBudget`). The free list is read only when the pages up to the last one used pass it.
    private func evictionTarget() -> Int? {
        let inUse = DiskStore.bytesInUse(env, onlyAbove: budget.evictAbove) ?? 0
        return MapBudget.target(inUse: inUse, stored: bytes.load(ordering: .relaxed), capacity: settings.capacity,
                                budget: budget)
    }

    private func evictionFailed(_ error: LMDBError) {
        guard evictionFailures.count(now: clock.monotonic) else { return }
        log("cache eviction failing (\(error)): \(evictionFailures.unreported) time(s) since the last report")
        evictionFailures.reported()
    }

    /// A batch that could not be written (disk full, I/O error): its entries are lost, the proxy
    /// carries on without storing them.
    private func batchFailed(_ batch: [WriteOp], _ error: LMDBError) {
        if batchFailures.count(now: clock.monotonic) {
            var fs = statvfs()
            let free = statvfs(settings.directory, &fs) == 0 ? "; \(Int(fs.f_bavail) * Int(fs.f_frsize)) bytes free on its file system" : ""
            log("cache writes failing (\(error)\(free)): \(batchFailures.unreported) batch(es) dropped since the last report; "
                + "responses are served but not stored until writes succeed again")
            batchFailures.reported()
        }
        for op in batch { if case .chunk(let id, _, _) = op { brokenBodies.insert(id) } }
        dropChunks(of: batch)
    }

    /// The chunks of entries that failed to be stored: those of this batch, and the earlier chunks
    /// of every body it held, must not linger.
    private func dropChunks(of batch: [WriteOp]) {
        var chunkCounts: [UInt64: Int] = [:]
        for op in batch {
            switch op {
            case .chunk(let id, let index, _): chunkCounts[id] = max(chunkCounts[id] ?? 0, index + 1)
            case .commit(let c): chunkCounts[c.record.bodyID] = max(chunkCounts[c.record.bodyID] ?? 0, c.record.chunkCount)
            default: break
            }
        }
        guard !chunkCounts.isEmpty, let txn = try? WriteTransaction(env: env) else { return }
        for (id, count) in chunkCounts {
            for i in 0..<count { try? txn.delete(db.chunks, DiskStore.chunkKey(id, i)) }
        }
        try? txn.commit()
    }

    private func applyInTransaction(_ batch: [WriteOp]) throws(LMDBError) {
        let txn = try WriteTransaction(env: env)
        beginDeletions()
        var committed = false
        defer { endDeletions(committed: committed) }
        var byteDelta = 0
        var countDelta = 0
        var touches: [EntryKey: Int64] = [:]
        for op in batch {
            switch op {
            case .chunk(let id, let index, let b):
                if brokenBodies.contains(id) { continue }
                let key = DiskStore.chunkKey(id, index)
                // Body ids grow, and a body's chunks come in order: most land after every other.
                try txn.put(db.chunks, key, reserving: BodyChunk.storedSize(payloadCount: b.count), appending: true) { out in
                    b.withUnsafeBytes { BodyChunk.encode($0, key: key, into: out) }
                }
            case .commit(let c):
                let (key, spec, record) = (c.key, c.spec, c.record)
                // Part of this body was lost: drop what did land instead of committing a hole. A
                // piece (206) whose variant holds a whole response by now is dropped the same way.
                if brokenBodies.contains(record.bodyID)
                    || (record.facts.status == 206 && txn.record(db.entries, key.bytes).map { $0.facts.status != 206 } == true) {
                    for i in 0..<record.chunkCount { try txn.delete(db.chunks, DiskStore.chunkKey(record.bodyID, i)) }
                    continue
                }
                try commit(txn, key: key, spec: spec, record: record, bytes: &byteDelta, count: &countDelta)
            case .discard(let id, let count):
                // A doomed body's last reader ended (or a store failed). Through the pins all the
                // same: should this batch have been tried before and aborted, the body was
                // readable again meanwhile, and a response may be sending its chunks from the map.
                try deleteBody(txn, id: id, chunks: count)
            case .replaceHead(let replacement):
                let k = replacement.key.bytes
                guard let old = txn.record(db.entries, k),
                      old.bodyID == replacement.bodyID else { continue }
                var r = old
                r.facts = replacement.facts
                r.head = replacement.head
                byteDelta += r.footprint - old.footprint
                try putEntry(txn, k, r)
            case .touch(let key, let time):
                touches[key] = max(touches[key] ?? 0, time)
            case .invalidate(let primary, _):
                try removeVariants(txn, primary: primary, bytes: &byteDelta, count: &countDelta)
            case .purgeAll:
                let noReaders = purgesAllInTransaction || pins.beginDeletingAll()
                if noReaders { purgesAllInTransaction = true }
                if !noReaders {
                    // Bodies being sent keep their chunks: delete entry by entry, empty the rest.
                    var bodies: [(UInt64, Int)] = []
                    try txn.scan(db.entries, from: nil) { _, v in
                        if let r = RecordCodec.entry(v) { bodies.append((r.bodyID, r.chunkCount)) }
                        return true
                    }
                    for (id, chunks) in bodies { try deleteBody(txn, id: id, chunks: chunks) }
                    for dbi in [db.variants, db.entries, db.access] { try check(mdb_drop(txn.txn, dbi, 0), "mdb_drop") }
                } else {
                    for dbi in [db.variants, db.entries, db.chunks, db.access] {
                        try check(mdb_drop(txn.txn, dbi, 0), "mdb_drop")
                    }
                }
                byteDelta = -bytes.load(ordering: .relaxed)
                countDelta = -entryCount.load(ordering: .relaxed)
            case .purgeSince(let time, _):
                var doomed: [(EntryKey, EntryRecord)] = []
                try txn.scan(db.entries, from: nil) { k, v in
                    if let key = EntryKey(bytes: k), let r = RecordCodec.entry(v), r.storedAt >= time {
                        doomed.append((key, r))
                    }
                    return true
                }
                for (key, r) in doomed { try remove(txn, key: key, record: r, bytes: &byteDelta, count: &countDelta) }
            case .barrier, .progress:
                break
            }
        }
        for (key, time) in touches { try touch(txn, key: key, time: time) }
        try txn.commit()
        committed = true
        bytes.add(byteDelta, ordering: .relaxed)
        entryCount.add(countDelta, ordering: .relaxed)
    }

    private func commit(_ txn: borrowing WriteTransaction, key: EntryKey, spec: VariantSpec, record: EntryRecord,
                        bytes: inout Int, count: inout Int) throws(LMDBError) {
        let specKey = key.primary.bytes
        // The URL's other entries stay only when the new response's Vary can still select them:
        // not under another Vary (or another URL with the same digest), not under a damaged spec,
        // and a response stored without Vary not once one with Vary arrives. `removeVariants`
        // takes the spec record with them.
        let old = txn.spec(db.variants, specKey)
        let othersStay: Bool
        switch old {
        case .found(let s): othersStay = s == spec
        case .damaged: othersStay = false
        case .absent: othersStay = spec.varyFields.isEmpty
        }
        if !othersStay { try removeVariants(txn, primary: key.primary, bytes: &bytes, count: &count) }
        let specStays: Bool
        if case .found = old { specStays = othersStay } else { specStays = false }
        if spec.varyFields.isEmpty {
            // No spec for a response without Vary: one random-page write fewer per stored
            // response. One an earlier Larder kept (it wrote a spec for every URL) goes.
            if specStays { try txn.delete(db.variants, specKey) }
        } else if !specStays {
            try txn.put(db.variants, specKey, RecordCodec.encode(spec))
        }
        let k = key.bytes
        if let old = txn.record(db.entries, k) {
            try remove(txn, key: key, record: old, bytes: &bytes, count: &count, keepSpec: true)
        }
        assert(storedURLs.mayContain(key.primary), "an entry made without its URL in the filter: lookups would miss it")
        try putEntry(txn, k, record)
        try txn.put(db.access, DiskStore.accessKey(record.lastAccess, key), [])
        bytes += record.footprint
        count += 1
    }

    /// An entry record, encoded straight into the space LMDB reserves for it.
    private func putEntry(_ txn: borrowing WriteTransaction, _ key: [UInt8], _ record: EntryRecord) throws(LMDBError) {
        try txn.put(db.entries, key, reserving: RecordCodec.encodedSize(record)) { RecordCodec.encode(record, into: $0) }
    }

    private func remove(_ txn: borrowing WriteTransaction, key: EntryKey, record: EntryRecord,
                        bytes: inout Int, count: inout Int, keepSpec: Bool = false) throws(LMDBError) {
        // A body a response is still sending keeps its chunks until that response ends (`BodyPin`).
        try deleteBody(txn, id: record.bodyID, chunks: record.chunkCount)
        try txn.delete(db.access, DiskStore.accessKey(record.lastAccess, key))
        try txn.delete(db.entries, key.bytes)
        bytes -= record.footprint
        count -= 1
        if !keepSpec {
            // Drop the URL's spec once its last variant is gone.
            let prefix = key.primary.bytes
            var another = false
            try txn.scan(db.entries, from: prefix) { k, _ in
                another = k.count == 32 && k.starts(with: prefix)
                return false
            }
            if !another { try txn.delete(db.variants, prefix) }
        }
    }

    private func removeVariants(_ txn: borrowing WriteTransaction, primary: KeyDigest,
                                bytes: inout Int, count: inout Int) throws(LMDBError) {
        let prefix = primary.bytes
        var doomed: [(EntryKey, EntryRecord)] = []
        var unreadable: [[UInt8]] = []
        try txn.scan(db.entries, from: prefix) { k, v in
            guard k.starts(with: prefix) else { return false }
            if let key = EntryKey(bytes: k), let r = RecordCodec.entry(v) {
                doomed.append((key, r))
            } else {
                unreadable.append(Array(k))
            }
            return true
        }
        for (key, r) in doomed { try remove(txn, key: key, record: r, bytes: &bytes, count: &count, keepSpec: true) }
        for k in unreadable { try txn.delete(db.entries, k) }
        try txn.delete(db.variants, prefix)
    }

    private func touch(_ txn: borrowing WriteTransaction, key: EntryKey, time: Int64) throws(LMDBError) {
        let k = key.bytes
        guard var r = txn.record(db.entries, k),
              time > r.lastAccess else { return }
        try txn.delete(db.access, DiskStore.accessKey(r.lastAccess, key))
        r.lastAccess = time
        try putEntry(txn, k, r)
        try txn.put(db.access, DiskStore.accessKey(time, key), [])
    }

    /// Removes least recently used entries until at most `target` bytes are stored, at most
    /// `perTransaction` in each transaction: a deletion needs free pages itself, and a small
    /// transaction's fit in the reserve where one removing thousands would not. A small commit
    /// follows, so the next batch can reuse the pages the last eviction freed (LMDB reuses a
    /// transaction's freed pages only two commits later).
    private func evict(target: Int, perTransaction: Int) throws(LMDBError) {
        var evictedAny = false
        while bytes.load(ordering: .relaxed) > target {
            guard try evictStep(target: target, limit: perTransaction) else { break }
            evictedAny = true
        }
        if evictedAny { try commitPassage() }
    }

    /// One eviction transaction; false when it found nothing more to remove.
    private func evictStep(target: Int, limit: Int) throws(LMDBError) -> Bool {
        let txn = try WriteTransaction(env: env)
        beginDeletions()
        var committed = false
        defer { endDeletions(committed: committed) }
        var byteDelta = 0
        var countDelta = 0
        var current = bytes.load(ordering: .relaxed)
        var evicted = 0
        var progressed = false
        while current > target, evicted < limit {
            // The oldest few hundred access rows, then their records (a cursor cannot outlive deletes).
            var victims: [EntryKey] = []
            var stale: [[UInt8]] = []
            try txn.scan(db.access, from: nil) { k, _ in
                if k.count == 40, let key = EntryKey(bytes: UnsafeRawBufferPointer(rebasing: k[8...])) {
                    victims.append(key)
                } else {
                    stale.append(Array(k))
                }
                return victims.count + stale.count < min(256, limit)
            }
            for k in stale { try txn.delete(db.access, k) }
            if !stale.isEmpty { progressed = true }
            if victims.isEmpty { break }
            for key in victims where current > target && evicted < limit {
                progressed = true
                guard let r = txn.record(db.entries, key.bytes)
                else {
                    // An access row without its entry: drop every row for that key.
                    try dropAccessRows(txn, for: key)
                    continue
                }
                try remove(txn, key: key, record: r, bytes: &byteDelta, count: &countDelta)
                current -= r.footprint
                evicted += 1
            }
        }
        try txn.commit()
        committed = true
        bytes.add(byteDelta, ordering: .relaxed)
        entryCount.add(countDelta, ordering: .relaxed)
        if evicted > 0 { evictions.add(evicted, ordering: .relaxed) }
        return progressed
    }

    private func dropAccessRows(_ txn: borrowing WriteTransaction, for key: EntryKey) throws(LMDBError) {
        var rows: [[UInt8]] = []
        let suffix = key.bytes
        try txn.scan(db.access, from: nil) { k, _ in
            if k.count == 40, k[8...].elementsEqual(suffix) { rows.append(Array(k)) }
            return true
        }
        for k in rows { try txn.delete(db.access, k) }
    }

    let evictions = Atomic<Int>(0)
}
