import CachePolicy
import Glibc
import HTTPWire
import Synchronization
import Timekeeping

public struct CacheSettings: Sendable, Equatable {
    public var disk: DiskStoreSettings
    /// Bytes the memory tier may hold.
    public var memoryCapacity: Int
    /// Entries up to this size are also kept in memory, ready to send.
    public var memoryObjectLimit: Int
    /// Larger responses are passed through, not stored.
    public var maxObjectSize: Int

    /// The largest body stored: `maxObjectSize`, but never more than a quarter of the disk
    /// capacity. A body is written before its entry commits and cannot be evicted meanwhile, so a
    /// larger one would fill LMDB's map with chunks nothing can free.
    public var storableObjectSize: Int { min(maxObjectSize, disk.capacity / 4) }
    /// Bytes queued for the disk writer beyond which origin reads that feed stores pause (see
    /// `EntryWriter.isBehind`); at four times this a store gives up and passes through.
    public var maxPendingWriteBytes: Int
    /// The memory tier only (`cache.ephemeral`): no LMDB, `disk.directory` never touched; responses
    /// up to `memoryObjectLimit` are kept.
    public var ephemeral: Bool

    public init(disk: DiskStoreSettings, memoryCapacity: Int = 64 << 20, memoryObjectLimit: Int = 1 << 20,
                maxObjectSize: Int = 256 << 20, maxPendingWriteBytes: Int = 16 << 20, ephemeral: Bool = false) {
        self.disk = disk; self.memoryCapacity = memoryCapacity; self.memoryObjectLimit = memoryObjectLimit
        self.maxObjectSize = maxObjectSize; self.maxPendingWriteBytes = maxPendingWriteBytes
        self.ephemeral = ephemeral
    }

    /// The largest body kept in `tier`.
    func storableSize(in tier: StoragePolicy) -> Int {
        if ephemeral { return memoryObjectLimit }
        return tier == .allowedInMemoryOnly ? memoryCapacity / 2 : storableObjectSize
    }
}

/// The composite cache NSURLCache describes: a memory tier in front of the LMDB disk store, with
/// NSURLCache's purge primitives. Shared by all workers; each worker reads through its own
/// `CacheReader`. An ephemeral cache has the memory tier alone.
public final class Cache: Sendable {
    public let settings: CacheSettings
    /// nil for an ephemeral cache.
    public let disk: DiskStore?
    let memory: MemoryTier
    let pendingRemovals = PendingRemovals()
    let pendingCommits = PendingCommits()
    let damage: DamageReports
    /// The process's clock, which the store and its writer read (`ProxyClock`).
    public let clock: any ProxyClock
    private let log: @Sendable (String) -> Void

    /// A stand-in for a cache that could not be opened: nothing is looked up in it or stored
    /// (`standIn`).
    public let isDisabled: Bool

    public init(settings: CacheSettings, clock: any ProxyClock = SystemClock.shared,
                log: @escaping @Sendable (String) -> Void) throws(LMDBError) {
        self.settings = settings
        self.clock = clock
        disk = settings.ephemeral ? nil : try DiskStore(settings: settings.disk, clock: clock, log: log)
        memory = MemoryTier(capacity: settings.memoryCapacity)
        damage = DamageReports(log: log, clock: clock)
        self.log = log
        isDisabled = false
    }

    private init(disabledWith store: DiskStore, settings: CacheSettings, clock: any ProxyClock,
                 log: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.clock = clock
        disk = store
        memory = MemoryTier(capacity: 0)
        damage = DamageReports(log: log, clock: clock)
        self.log = log
        isDisabled = true
    }

    /// A cache that stores nothing, for serving as a plain proxy when the cache directory cannot be
    /// used: the workers' code paths stay the same, with an empty store in a private temporary
    /// directory behind them (removed by `close`).
    public static func standIn(settings: CacheSettings, clock: any ProxyClock = SystemClock.shared,
                               log: @escaping @Sendable (String) -> Void) throws(LMDBError) -> Cache {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        let pattern = base + "/larder-uncached-XXXXXX"
        var template = Array(pattern.utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw LMDBError(code: errno, operation: "mkdtemp \(pattern)")
        }
        var s = settings.disk
        s.directory = String(cString: made)
        s.capacity = 1 << 20
        let store = try DiskStore(settings: s, clock: clock, log: log)
        return Cache(disabledWith: store, settings: settings, clock: clock, log: log)
    }

    public func close() {
        guard let disk else { return }
        disk.close()
        guard isDisabled else { return }
        for failure in DiskStore.removeDirectory(disk.settings.directory) { log("stand-in cache: \(failure)") }
    }

    /// Whether this cache keeps nothing on disk (`cache.ephemeral`).
    public var isEphemeral: Bool { disk == nil && !isDisabled }

    public func makeReader() -> CacheReader { CacheReader(cache: self) }

    /// Starts storing a response whose head and facts are known; feed the body, then `finish`.
    public func beginStore(primaryKey: [UInt8], secondaryKey: [UInt8], facts: EntryFacts, head: [UInt8],
                           tier: StoragePolicy, expectedLength: Int?, now: Int64) -> EntryWriter? {
        guard tier != .notAllowed else { return nil }
        // Without a disk every stored response is a memory-only one.
        let tier: StoragePolicy = disk == nil ? .allowedInMemoryOnly : tier
        if let n = expectedLength, n > settings.storableSize(in: tier) { return nil }
        let key = EntryKey(primary: KeyDigest(primaryKey), secondary: KeyDigest(secondaryKey))
        let record = EntryRecord(bodyID: tier == .allowed ? disk?.allocateBodyID() ?? 0 : 0, bodyLength: 0,
                                 chunkSize: settings.disk.chunkSize, storedAt: now, lastAccess: now,
                                 primaryKey: primaryKey, secondaryKey: secondaryKey, facts: facts, head: head)
        return EntryWriter(cache: self, key: key, record: record, tier: tier, expectedLength: expectedLength)
    }

    /// Installs a freshened head (after a 304 or an unchanged HEAD) on the stored variant: in the
    /// memory tier at once, on disk when the memory tier does not hold it or its disk copy is due
    /// (`MemoryTier.headPersistInterval`).
    /// `parsedHead`: `head` parsed, kept with a memory-tier copy for the next revalidation.
    public func freshen(_ entry: StoredResponse, facts: EntryFacts, head: [UInt8], parsedHead: ResponseHead?,
                        now: Int64) {
        let (held, persist) = memory.replaceHead(entry.key, freshening: entry.body, facts: facts, head: head,
                                                 parsedHead: parsedHead, now: now)
        guard entry.tier == .allowed, persist, let disk else { return }
        disk.enqueue(.replaceHead(HeadReplacement(key: entry.key, bodyID: entry.record.bodyID, facts: facts, head: head)))
        if !held {
            // Only the disk will have the new head: until it is written, lookups would find the old
            // one (and a lookup would promote it into the memory tier), so it counts as a pending
            // commit, as a new entry does (`isCommitPending`).
            let primary = entry.record.primaryKey
            pendingCommits.add(primary)
            disk.enqueue(.barrier({ [pendingCommits] in pendingCommits.remove(primary) }))
        }
    }

    /// removeCachedResponse(for:): every variant of one URL. The outcome says when the writer
    /// committed it (or could not): an operator's purge is answered by it.
    @discardableResult
    public func invalidate(primaryKey: [UInt8]) -> RemovalOutcome {
        let digest = KeyDigest(primaryKey)
        memory.removeVariants(digest)
        return removeFromDisk({ .invalidate(primary: digest, done: $0) }, hiding: .url(digest))
    }

    /// How long a purge asked for by an operator (admin DELETE /cache, PURGE) waits for the
    /// writer to commit it before it answers that it could not confirm it.
    public static let purgeConfirmSeconds = 5.0

    /// An entry whose stored bytes failed their checksum: every variant of its URL is dropped (as an
    /// invalidation does), and the damage counted and logged.
    func dropDamaged(_ key: EntryKey, url: [UInt8], what: String) {
        memory.removeVariants(key.primary)
        removeFromDisk({ .invalidate(primary: key.primary, done: $0) }, hiding: .url(key.primary))
        damage.report("cache entry \(String(decoding: url, as: UTF8.self)) failed its checksum (\(what)): dropped")
    }

    /// removeAllCachedResponses (its outcome as `invalidate`'s).
    @discardableResult
    public func purgeAll() -> RemovalOutcome {
        memory.removeAll()
        return removeFromDisk({ .purgeAll(done: $0) }, hiding: .all)
    }

    /// removeCachedResponses(since:) (its outcome as `invalidate`'s).
    @discardableResult
    public func purge(storedSince time: Int64) -> RemovalOutcome {
        memory.removeStored(since: time)
        return removeFromDisk({ .purgeSince(time: time, done: $0) }, hiding: .storedSince(time))
    }

    /// Queues a removal for the writer, hiding what it removes from lookups until it is committed.
    @discardableResult
    private func removeFromDisk(_ op: (RemovalOutcome) -> WriteOp, hiding removal: PendingRemovals.Removal) -> RemovalOutcome {
        let outcome = RemovalOutcome()
        guard let disk else {
            outcome.finish(committed: true)
            return outcome
        }
        let pending = pendingRemovals
        pending.add(removal)
        disk.enqueue(op(outcome))
        disk.enqueue(.barrier({ pending.remove(removal) }))
        return outcome
    }

    /// Whether an entry of `primaryKey` is complete but not committed yet (see `PendingCommits`).
    public func isCommitPending(primaryKey: [UInt8]) -> Bool {
        pendingCommits.contains(primaryKey)
    }

    /// Calls `done` once no entry of `primaryKey` waits for its commit: at once on the caller's
    /// thread if none does now, else on the disk writer's thread right after the commit (post it
    /// to your loop). Not called if the cache closes first.
    public func whenCommitted(primaryKey: [UInt8], _ done: @escaping @Sendable () -> Void) {
        pendingCommits.whenNonePending(primaryKey, done)
    }

    /// Records that an entry was served (LRU order on disk; memory order is updated on lookup).
    public func touch(_ entry: StoredResponse, now: Int64) {
        // One write per entry per minute is plenty for eviction order.
        guard entry.tier == .allowed else { return }
        if case .memory(let object) = entry.body {
            // A memory copy's record is never rewritten: the object remembers its last touch, and
            // of concurrent hits on several workers only one enqueues it.
            let last = object.lastTouched.load(ordering: .relaxed)
            guard now - last >= 60,
                  object.lastTouched.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else {
                return
            }
        } else if now - entry.record.lastAccess < 60 {
            return
        }
        disk?.enqueue(.touch(key: entry.key, time: now))
    }

    /// Waits until queued writes are committed.
    public func flush() { disk?.flush() }

    public struct Statistics: Sendable, Equatable {
        public var diskBytes: Int
        public var diskEntries: Int
        public var diskEvictions: Int
        public var memoryBytes: Int
        public var memoryEntries: Int
        public var memoryEvictions: Int
        public var pendingWriteBytes: Int
        /// Entries found damaged when read (a body chunk or record failed its checksum).
        public var checksumFailures: Int
    }

    public var statistics: Statistics {
        Statistics(diskBytes: disk?.storedBytes ?? 0, diskEntries: disk?.entryCount ?? 0,
                   diskEvictions: disk?.writer.evictions.load(ordering: .relaxed) ?? 0,
                   memoryBytes: memory.bytes, memoryEntries: memory.count,
                   memoryEvictions: memory.evictions.load(ordering: .relaxed),
                   pendingWriteBytes: disk?.pendingBytes ?? 0, checksumFailures: damage.count.load(ordering: .relaxed))
    }
}

/// A variant found for a request.
/// A class so that passing a found entry around (lookup, exchange, writer) costs one reference count,
/// not a copy of every field of its record.
public final class StoredResponse: Sendable {
    public enum Body: Sendable {
        /// Whole in memory.
        case memory(CachedObject)
        /// In LMDB chunks: read them one at a time with `CacheReader.withChunk`.
        case disk(id: UInt64, length: Int, chunkSize: Int)
    }

    public let key: EntryKey
    public let record: EntryRecord
    public let body: Body
    public let tier: StoragePolicy
    /// `record.head` parsed, when the memory tier kept it from an earlier revalidation.
    public let parsedHead: ResponseHead?

    public init(key: EntryKey, record: EntryRecord, body: Body, tier: StoragePolicy, parsedHead: ResponseHead? = nil) {
        self.key = key
        self.record = record
        self.body = body
        self.tier = tier
        self.parsedHead = parsedHead
    }

    public var facts: EntryFacts { record.facts }
    public var head: [UInt8] { record.head }
    public var bodyLength: Int { record.bodyLength }
}

public enum CacheLookup: Sendable {
    /// Nothing stored for the URL.
    case uriMiss
    /// Something stored for the URL, but no variant for this request's Vary-selected fields.
    case varyMiss
    case found(StoredResponse)
}

/// One worker's view of the cache: memory first, then LMDB. Not thread-safe: one per loop.
public final class CacheReader {
    let cache: Cache
    /// nil for an ephemeral cache.
    let disk: DiskReader?

    init(cache: Cache) {
        self.cache = cache
        disk = cache.disk?.makeReader()
    }

    /// The variant of `primaryKey` that `request`'s headers select; for a URL that varies on
    /// `Accept-Language` alone, when the request's own variant is missing, the one stored for a
    /// language it ranks highest (`LanguageVariant`).
    public func lookup(primaryKey: [UInt8], request: HeaderBlock) -> CacheLookup {
        var byLanguage = false
        let own = lookup(primaryKey: primaryKey) { spec in
            // Asked of the memory tier's spec and then of the disk's, which may not be written yet.
            if LanguageVariant.applies(to: spec.varyFields) { byLanguage = true }
            return CacheKey.secondary(varyFields: spec.varyFields, request: request)
        }
        guard case .varyMiss = own, byLanguage else { return own }
        return lookupLanguageVariant(primaryKey: primaryKey, request: request).map { .found($0) } ?? own
    }

    /// Whether a lookup for `request` still finds `entry` as it was: not replaced, freshened or
    /// removed since, and no newer response waiting for its commit. A stale entry's background
    /// refresh is claimed after its lookup; another worker's refresh may have ended in between.
    public func stillFinds(_ entry: StoredResponse, request: HeaderBlock) -> Bool {
        let primaryKey = entry.record.primaryKey
        guard !cache.pendingCommits.contains(primaryKey),
              case .found(let current) = lookup(primaryKey: primaryKey, request: request) else { return false }
        if case .memory(let now) = current.body, case .memory(let then) = entry.body, now.storeID != then.storeID {
            return false  // memory-only entries share body id 0, and two may be stored in one second
        }
        return current.record.storedAt == entry.record.storedAt && current.record.bodyID == entry.record.bodyID
            && current.facts.responseTime == entry.facts.responseTime && current.facts.requestTime == entry.facts.requestTime
    }

    /// The variant stored for a language `request` ranks highest, for a URL that varies on
    /// `Accept-Language` alone; nil when there is none.
    private func lookupLanguageVariant(primaryKey: [UInt8], request: HeaderBlock) -> StoredResponse? {
        var keys: [[UInt8]]?
        var index = 0
        repeat {
            let found = lookup(primaryKey: primaryKey) { spec -> [UInt8] in
                // Asked of the memory tier's spec and then of the disk's, which may not be written yet.
                guard LanguageVariant.applies(to: spec.varyFields) else { return [] }
                if keys == nil { keys = LanguageVariant.lookupKeys(request: request) }
                return index < keys!.count ? keys![index] : []
            }
            if case .found(let entry) = found, !entry.record.secondaryKey.isEmpty { return entry }
            index += 1
        } while index < (keys?.count ?? 0)
        return nil
    }

    @inline(__always)
    private func lookup(primaryKey: [UInt8], secondaryKey: (VariantSpec) -> [UInt8]) -> CacheLookup {
        let primary = KeyDigest(primaryKey)
        let inMemory: Bool
        switch cache.memory.find(primary, primaryKey: primaryKey, secondary: secondaryKey) {
        case .response(let held): return .found(held)
        case .spec: inMemory = true
        case .nothing: inMemory = false
        }
        guard let disk, cache.disk?.storedURLs.mayContain(primary) != false else {
            return inMemory ? .varyMiss : .uriMiss
        }
        let removalsBefore = cache.pendingRemovals.snapshot()
        var secondary: [UInt8] = []
        guard let (spec, key, stored) = disk.specAndRecord(primary, primaryKey: primaryKey, entryKey: { spec in
            secondary = secondaryKey(spec)
            return EntryKey(primary: primary, secondary: KeyDigest(secondary))
        }), sameBytes(spec.primaryKey, primaryKey) else {
            // Not on disk (yet): a variant in memory still says the URL is stored.
            return inMemory ? .varyMiss : .uriMiss
        }
        let record: EntryRecord
        switch stored {
        case .absent:
            return .varyMiss
        case .damaged:
            cache.dropDamaged(key, url: primaryKey, what: "record")
            return .uriMiss
        case .found(let r):
            guard r.primaryKey == primaryKey, r.secondaryKey == secondary else { return .varyMiss }
            record = r
        }
        if cache.pendingRemovals.hides(primary: primary, storedAt: record.storedAt)
            || removalsBefore.map({ PendingRemovals.hides($0, primary: primary, storedAt: record.storedAt) }) == true {
            return .uriMiss
        }
        let found = StoredResponse(key: key, record: record,
                                   body: .disk(id: record.bodyID, length: record.bodyLength, chunkSize: record.chunkSize),
                                   tier: .allowed)
        if promote(found, spec: spec) == .damaged { return .uriMiss }
        return .found(found)
    }

    /// Small disk entries found on a lookup are copied into the memory tier for the next hits,
    /// checked on the way: the memory tier serves them without checking again.
    private func promote(_ entry: StoredResponse, spec: VariantSpec) -> ChunkRead {
        guard entry.bodyLength <= cache.settings.memoryObjectLimit,
              !cache.pendingCommits.contains(entry.record.primaryKey) else { return .delivered }
        var body: [UInt8] = []
        let read = readBody(of: entry, into: &body)
        guard read == .delivered else { return read }
        cache.memory.insert(CachedObject(key: entry.key, record: entry.record, body: body, tier: .allowed), spec: spec)
        return .delivered
    }

    /// `entry`'s whole disk body into `body`, every chunk checked: `.delivered` only when all of it
    /// is there (a chunk gone is `.missing`; one that fails its checksum, `.damaged`, is dropped).
    public func readBody(of entry: StoredResponse, into body: inout [UInt8]) -> ChunkRead {
        body.reserveCapacity(entry.bodyLength)
        for i in 0..<entry.record.chunkCount {
            let read = withChunk(of: entry, index: i, verify: true) { body.append(contentsOf: $0) }
            guard read == .delivered else { return read }
        }
        return body.count == entry.bodyLength ? .delivered : .missing
    }

    /// Keeps `entry`'s disk body readable until the returned pin is let go, even if the entry is
    /// evicted, replaced or purged meanwhile; nil for a body that is not on disk, or that is being
    /// deleted (the entry is gone: answer from the origin).
    public func pinBody(of entry: StoredResponse) -> BodyPin? {
        guard case .disk = entry.body, let store = cache.disk else { return nil }
        return BodyPin(store: store, id: entry.record.bodyID)
    }

    /// Whether chunk `index` of `entry`'s disk body stays where `withChunk` finds it in the map for
    /// as long as the body is pinned, so that it may be sent by reference instead of copied. True
    /// for chunks that fill overflow pages of their own (`DiskStore.pageSize`); small ones share a
    /// page that later writes copy and reuse.
    public func chunkStaysMapped(of entry: StoredResponse, index: Int) -> Bool {
        guard let disk = cache.disk else { return false }
        return BodyChunk.storedSize(payloadCount: entry.record.chunkLength(at: index)) >= disk.pageSize
    }

    /// Calls `body` with chunk `index` of `entry`'s disk body. With `verify`, its checksum is
    /// checked first; a damaged chunk is never passed to `body`, and its entry is dropped and
    /// reported. Each chunk needs checking once per response: stored chunks never change.
    public func withChunk(of entry: StoredResponse, index: Int, verify: Bool,
                          _ body: (UnsafeRawBufferPointer) -> Void) -> ChunkRead {
        guard let disk else { return .missing }
        let read = disk.withChunk(id: entry.record.bodyID, index: index, expectedCount: entry.record.chunkLength(at: index),
                                  verify: verify, body)
        if read == .damaged {
            cache.dropDamaged(entry.key, url: entry.record.primaryKey,
                              what: "body chunk \(index + 1) of \(entry.record.chunkCount)")
        }
        return read
    }

    /// Calls `body` with chunk `index` of a body still being stored, once `progress` says it is
    /// committed; its checksum is checked first. `.missing` for a chunk not committed (yet).
    public func withCommittedChunk(of progress: BodyProgress, index: Int,
                                   _ body: (UnsafeRawBufferPointer) -> Void) -> ChunkRead {
        guard let disk, let length = progress.committedLength(ofChunk: index) else { return .missing }
        return disk.withChunk(id: progress.bodyID, index: index, expectedCount: length, verify: true, body)
    }

    /// Every stored variant of one URL, with its tier (admin; copies).
    public func variants(primaryKey: [UInt8]) -> [(record: EntryRecord, tier: StoragePolicy)] {
        let digest = KeyDigest(primaryKey)
        var out: [(record: EntryRecord, tier: StoragePolicy)] = []
        var seen: Set<EntryKey> = []
        for (k, r) in disk?.variants(of: digest) ?? []
        where r.primaryKey == primaryKey && !cache.pendingRemovals.hides(primary: digest, storedAt: r.storedAt) {
            seen.insert(k)
            out.append((r, .allowed))
        }
        for o in cache.memory.allObjects() where o.key.primary == digest && !seen.contains(o.key)
            && o.record.primaryKey == primaryKey {
            out.append((o.record, o.tier))
        }
        return out
    }

    /// Every stored variant (admin and tests; copies).
    public func allRecords() -> [EntryRecord] {
        var seen: Set<EntryKey> = []
        var out: [EntryRecord] = []
        for (k, r) in disk?.allRecords() ?? [] { seen.insert(k); out.append(r) }
        for o in cache.memory.allObjects() where !seen.contains(o.key) { out.append(o.record) }
        return out
    }
}

/// Streams one response body into the cache as it is forwarded. Nothing becomes visible before
/// `finish` checks the length; `abandon` (or any failure) leaves no trace but orphan chunks the
/// writer deletes.
public final class EntryWriter {
    let cache: Cache
    let key: EntryKey
    var record: EntryRecord
    let tier: StoragePolicy
    let expectedLength: Int?
    private var pending: [UInt8] = []
    private var whole: [UInt8]? = []
    private var chunksWritten = 0
    private var bytesQueued = 0
    private var length = 0
    /// How much of the body is committed to disk, for requests that join its download late; nil
    /// until `followProgress` asks for it.
    public private(set) var progress: BodyProgress?
    public private(set) var isAbandoned = false
    private var finished = false

    init(cache: Cache, key: EntryKey, record: EntryRecord, tier: StoragePolicy, expectedLength: Int?) {
        self.cache = cache
        self.key = key
        self.record = record
        self.tier = tier
        self.expectedLength = expectedLength
        if tier == .allowed { pending.reserveCapacity(min(record.chunkSize, expectedLength ?? record.chunkSize)) }
    }

    deinit { if !finished { abandon() } }

    /// Adds body bytes; false once the store was given up (too large, writer too far behind).
    @discardableResult
    public func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !isAbandoned else { return false }
        length += bytes.count
        let limit = cache.settings.storableSize(in: tier)
        if length > limit || (expectedLength.map { length > $0 } ?? false) {
            abandon()
            return false
        }
        if whole != nil {
            if length <= cache.settings.memoryObjectLimit || tier == .allowedInMemoryOnly {
                whole!.append(contentsOf: bytes)
            } else {
                whole = nil
            }
        }
        guard tier == .allowed else { return true }
        var rest = bytes
        while !rest.isEmpty {
            let take = min(rest.count, record.chunkSize - pending.count)
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<take]))
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            if pending.count == record.chunkSize { flushChunk() }
        }
        if (cache.disk?.pendingBytes ?? 0) > 4 * cache.settings.maxPendingWriteBytes {
            abandon()
            return false
        }
        return true
    }

    /// The disk writer has more queued than it should: the caller should stop reading the origin
    /// until this turns false, so stores keep up instead of being given up.
    public var isBehind: Bool {
        tier == .allowed && !isAbandoned && (cache.disk?.pendingBytes ?? 0) > cache.settings.maxPendingWriteBytes
    }

    /// Calls `done` once the writer is no longer behind (`isBehind` false): at once on the caller's
    /// thread if it is not behind now, else on the writer's thread when a batch brings its queue
    /// down (post it to your loop). Not called if the cache closes first.
    public func whenCaughtUp(_ done: @escaping @Sendable () -> Void) {
        guard isBehind, let disk = cache.disk else { return done() }
        disk.writer.whenPending(atMost: cache.settings.maxPendingWriteBytes, done)
    }

    private func flushChunk() {
        cache.disk?.enqueue(.chunk(id: record.bodyID, index: chunksWritten, bytes: pending))
        chunksWritten += 1
        bytesQueued += pending.count
        if let progress { cache.disk?.enqueue(.progress(progress, bytes: bytesQueued)) }
        pending.removeAll(keepingCapacity: true)
    }

    /// Body bytes taken so far.
    public var bodyLength: Int { length }

    /// Commits the entry when the body is complete (its length equals the expected one), with the
    /// head and facts computed now that the length is known; returns whether it was stored.
    @discardableResult
    public func finish(head: [UInt8], facts: EntryFacts) -> Bool {
        guard !isAbandoned, !finished else { return false }
        // A piece of a representation (a 206) never takes the place of a whole response stored
        // meanwhile for the same variant: here for the memory tier, in the disk writer's commit
        // for the disk, where a piece goes alone so that both say the same.
        let isPiece = facts.status == 206
        if expectedLength.map({ $0 != length }) == true || (isPiece && cache.memory.holdsWhole(key)) {
            abandon()
            return false
        }
        finished = true
        record.bodyLength = length
        record.head = head
        record.facts = facts
        let spec = VariantSpec(primaryKey: record.primaryKey, varyFields: record.facts.varyFields)
        var inMemory = false
        if let body = whole, body.count == length, !(isPiece && tier == .allowed && cache.disk != nil) {
            cache.memory.insert(CachedObject(key: key, record: record, body: body, tier: tier), spec: spec)
            inMemory = true
        }
        if tier == .allowed, let disk = cache.disk {
            if !pending.isEmpty { flushChunk() }
            disk.enqueue(.commit(EntryCommit(key: key, spec: spec, record: record)))
            if !inMemory {
                // Not in the memory tier: lookups find it once committed; until then a request for
                // it waits (`isCommitPending`) rather than fetching it again, and a memory copy of
                // an older response goes now (no lookup promotes the disk's older copy back in
                // while the commit is pending).
                let commits = cache.pendingCommits
                let primary = record.primaryKey
                commits.add(primary)
                cache.memory.supersede(key, spec: spec)
                disk.enqueue(.barrier({ commits.remove(primary) }))
            }
        }
        return true
    }

    /// Starts telling how much of the body the disk writer has committed (`BodyProgress`), for
    /// requests that join the download late, with a pin that keeps those chunks readable until it
    /// is let go, even if the store is given up meanwhile. Nil when the body is not stored on disk.
    /// Asked for only when needed: every progress report is one more operation for the writer.
    public func followProgress() -> (BodyProgress, BodyPin)? {
        // Without a pin (a purge of everything is being committed) the chunks could go under a reader.
        guard tier == .allowed, !isAbandoned, let disk = cache.disk,
              let pin = BodyPin(store: disk, id: record.bodyID) else { return nil }
        let p = progress ?? BodyProgress(bodyID: record.bodyID, chunkSize: record.chunkSize)
        if progress == nil, bytesQueued > 0 { disk.enqueue(.progress(p, bytes: bytesQueued)) }
        progress = p
        return (p, pin)
    }

    /// Gives up: nothing of this body will be visible.
    public func abandon() {
        guard !isAbandoned, !finished else { return }
        isAbandoned = true
        finished = true
        if tier == .allowed && chunksWritten > 0 {
            cache.disk?.enqueue(.discard(id: record.bodyID, chunks: chunksWritten))
        }
        pending = []
        whole = nil
    }
}
