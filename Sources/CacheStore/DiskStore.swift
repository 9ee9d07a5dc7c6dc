import CachePolicy
import CLMDB
import CSignals
import Glibc
import Locking
import Synchronization
import Timekeeping

/// How commits reach the disk.
public enum Durability: String, Sendable, Equatable {
    /// No fsync per commit; the writer syncs every `syncInterval`. A process crash loses nothing
    /// committed; a power loss may lose the last interval's entries but never half an entry.
    case fast
    /// fsync on every group commit: nothing acknowledged is lost, at ~0.3 ms per commit.
    case safe
}

public struct DiskStoreSettings: Sendable, Equatable {
    public var directory: String
    /// Stored bytes (bodies + heads) are kept under this by evicting least recently used entries.
    public var capacity: Int
    public var durability: Durability
    public var syncInterval: Double
    /// Body chunk size in LMDB; large objects stream in and out this many bytes at a time.
    public var chunkSize: Int

    public init(directory: String, capacity: Int = 1 << 30, durability: Durability = .fast,
                syncInterval: Double = 1, chunkSize: Int = 256 * 1024) {
        self.directory = directory; self.capacity = capacity; self.durability = durability
        self.syncInterval = syncInterval; self.chunkSize = chunkSize
    }
}

extension DiskStoreSettings {
    /// What the cache directory may hold beyond `capacity`: LMDB's page headers and branch pages,
    /// free pages not yet reused, and the batch being written.
    public var sizeMargin: Int { max(capacity / 10, 4 << 20) }

    /// The most the LMDB map may ever be, which data.mdb can never outgrow: the directory stays
    /// within `capacity + sizeMargin`, the lock files included. (An environment already larger
    /// keeps its size: LMDB never shrinks a file.)
    var mapBound: Int { capacity + sizeMargin - (256 << 10) }

    /// Held back from the map at run time, for recovering a map that is full anyway: at start the
    /// map is opened this much larger (within `mapBound`; past the pages in use of a directory
    /// already larger than that), so that the sweep and the eviction of a full map have pages to
    /// copy into. An eighth of the margin, 512 KiB at least.
    var recoveryMargin: Int { max(sizeMargin / 8, 512 << 10) }

    /// The map at run time.
    var mapSize: Int { mapBound - recoveryMargin }

    /// Bytes the writer commits in one transaction: at most 8 MiB, and a quarter of the margin,
    /// so a small cache's batch fits beside a full cache.
    var batchBytes: Int { min(8 << 20, sizeMargin / 4) }
}

/// The LMDB half of the cache: one environment per process shared by every worker; reads through
/// per-worker `DiskReader`s, all writes through one writer thread that commits in groups.
///
/// Databases: `variants` (URL digest → VariantSpec, only for URLs whose response named Vary
/// fields: any other URL has at most one entry, under the empty Vary), `entries` (EntryKey →
/// EntryRecord), `chunks` (body id + index → bytes), `access` (last access + EntryKey → nothing,
/// the LRU order), `info` (format marker). An entry's chunks are written before its record, so a
/// crash leaves at worst orphan chunks, which the start-up sweep deletes: only whole entries are
/// ever visible.
///
/// Two versions apply: the format marker names this set of databases, their keys and the chunk
/// layout (`BodyChunk`); entry records and variant specs carry their own version (`RecordCodec`).
public final class DiskStore: @unchecked Sendable {
    public static let formatMarker: [UInt8] = Array("larder-cache-format-1".utf8)

    let env: OpaquePointer
    let variants: MDB_dbi
    let entries: MDB_dbi
    let chunks: MDB_dbi
    let access: MDB_dbi
    let info: MDB_dbi
    public let settings: DiskStoreSettings
    /// Things worth an operator's attention found while opening (moved-aside directories, sweeps).
    public private(set) var startupNotes: [String] = []

    let writer: DiskWriter
    /// Bodies being read by responses: their chunks outlive their entries until the reading ends.
    let pins = BodyPins()
    /// The URLs this store may hold (`StoredURLFilter`): filled from the entries found at start, and by
    /// the writer as each commit is queued (`DiskWriter.enqueue`).
    let storedURLs: StoredURLFilter
    /// Held while the environment is open; released with it.
    private let lock: DirectoryLock
    private let nextBodyID: Atomic<UInt64>
    /// LMDB's page size. A value of a page or more never fits inside a page (LMDB's limit is about
    /// half of one): it lives in overflow pages of its own, which stay where they are, unchanged,
    /// until the record is deleted. A pinned body's large chunks can therefore be sent straight
    /// from the map.
    let pageSize: Int

    /// Opens the cache in `settings.directory`, refusing one another process uses. A directory
    /// proven damaged (truncated, corrupt) or holding another format is renamed aside (noted in
    /// `startupNotes`) and replaced by an empty cache; any other error is thrown.
    public init(settings: DiskStoreSettings, clock: any ProxyClock = SystemClock.shared,
                log: @escaping @Sendable (String) -> Void) throws(LMDBError) {
        self.settings = settings
        DiskStore.asideClock.withLock { $0 = clock }
        var notes: [String] = []
        try DiskStore.makeDirectory(settings.directory)
        var lock = try DirectoryLock.acquire(settings.directory)
        let urls = StoredURLFilter(diskCapacity: settings.capacity)
        let (o, sweep) = try DiskStore.openAndSweep(settings, clock: clock, lock: &lock, notes: &notes, urls: urls)
        storedURLs = urls
        self.lock = lock
        env = o.env
        variants = o.variants; entries = o.entries; chunks = o.chunks; access = o.access; info = o.info
        if sweep.orphanChunks > 0 || sweep.damagedRecords > 0 || sweep.earlierFormatRecords > 0 {
            notes.append("cache sweep: removed \(sweep.orphanChunks) orphan body chunks, \(sweep.damagedRecords) damaged "
                         + "records and \(sweep.earlierFormatRecords) records of an earlier format")
        }
        startupNotes = notes
        nextBodyID = Atomic(sweep.maxBodyID &+ 1)
        var stat = MDB_stat()
        pageSize = mdb_env_stat(env, &stat) == 0 ? Int(stat.ms_psize) : Int.max
        writer = DiskWriter(env: env, dbs: DiskWriter.Databases(variants: variants, entries: entries, chunks: chunks,
                                                                access: access, info: info),
                            settings: settings, pageSize: pageSize == Int.max ? 4_096 : pageSize,
                            bytes: sweep.bytes, entryCount: sweep.entryCount, pins: pins, storedURLs: urls,
                            clock: clock, log: log)
        // Before any reader or the writer runs: the map may still be resized.
        if let note = writer.recoverAtStart() { startupNotes.append(note) }
        writer.start()
    }

    deinit {
        writer.stop()
        mdb_env_close(env)
    }

    /// Stops the writer after it applied everything queued (and synced).
    public func close() { writer.stop() }

    /// Removes a directory of plain files (a stand-in store's, an old broken copy): its files, then
    /// itself. Returns what could not be removed, for the caller to log.
    static func removeDirectory(_ path: String) -> [String] {
        var failures: [String] = []
        for name in entryNames(of: path) where unlink(path + "/" + name) != 0 {
            let code = errno
            failures.append("cannot remove \(path)/\(name): \(String(cString: strerror(code)))")
        }
        if rmdir(path) != 0 {
            let code = errno
            failures.append("cannot remove \(path): \(String(cString: strerror(code)))")
        }
        return failures
    }

    /// The names in a directory, without `.` and `..`; empty when it cannot be read.
    private static func entryNames(of directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var out: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { out.append(name) }
        }
        return out
    }

    public func allocateBodyID() -> UInt64 { nextBodyID.wrappingAdd(1, ordering: .relaxed).oldValue }

    public var storedBytes: Int { writer.bytes.load(ordering: .relaxed) }
    public var entryCount: Int { writer.entryCount.load(ordering: .relaxed) }

    /// Queues a write; it becomes visible to readers after the writer's next group commit.
    public func enqueue(_ op: WriteOp) { writer.enqueue(op) }

    /// Bytes queued for the writer and not yet committed (back-pressure for streaming stores).
    public var pendingBytes: Int { writer.pendingBytes.load(ordering: .relaxed) }

    /// Bytes of the LMDB map in use (up to the last page written) and the map's size.
    public var mapUsage: (used: Int, size: Int) {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        guard mdb_env_info(env, &info) == 0, mdb_env_stat(env, &stat) == 0 else { return (0, 0) }
        return ((Int(info.me_last_pgno) + 1) * Int(stat.ms_psize), Int(info.me_mapsize))
    }

    /// Bytes of the map's pages holding data now: pages up to the last one used, less those on
    /// LMDB's free list (which new writes reuse). Nil when the environment cannot be read.
    /// With `onlyAbove`, pages up to the last one used are returned uncounted when they come to
    /// no more than that: the free list is read (a transaction and a scan) only when it matters.
    static func bytesInUse(_ env: OpaquePointer, onlyAbove threshold: Int? = nil) -> Int? {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        guard mdb_env_info(env, &info) == 0, mdb_env_stat(env, &stat) == 0 else { return nil }
        let highWater = (Int(info.me_last_pgno) + 1) * Int(stat.ms_psize)
        if let threshold, highWater <= threshold { return highWater }
        var txn: OpaquePointer?
        guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0 else { return nil }
        defer { mdb_txn_abort(txn) }
        var freePages = 0
        // The free list (database 0): each record is a page-number list whose first word is its length.
        do {
            try scanCursor(txn!, 0, from: nil) { _, v in
                if v.count >= MemoryLayout<Int>.size { freePages += v.loadUnaligned(as: Int.self) }
                return true
            }
        } catch {
            return nil
        }
        return (Int(info.me_last_pgno) + 1 - freePages) * Int(stat.ms_psize)
    }

    /// Blocks until everything queued so far is committed (tests, purge replies, shutdown).
    public func flush() {
        let done = Semaphore()
        writer.enqueue(.barrier({ done.signal() }))
        done.wait()
    }

    /// A reader for one thread.
    public func makeReader() -> DiskReader { DiskReader(store: self) }

    // MARK: opening

    struct Opened {
        var env: OpaquePointer
        var variants, entries, chunks, access, info: MDB_dbi
    }

    static func makeDirectory(_ directory: String) throws(LMDBError) {
        if mkdir(directory, 0o755) != 0, errno != EEXIST {
            throw LMDBError(code: errno, operation: "mkdir \(directory)")
        }
    }

    /// Opens and sweeps the environment. One proven damaged or of another format is moved aside
    /// (the reason logged) and replaced by an empty one, with the lock taken again in the new
    /// directory; any other error is thrown, the files left as they are.
    private static func openAndSweep(_ s: DiskStoreSettings, clock: any ProxyClock, lock: inout DirectoryLock,
                                     notes: inout [String], urls: StoredURLFilter) throws(LMDBError) -> (Opened, SweepResult) {
        do throws(LMDBError) {
            return try openSwept(s, urls: urls)
        } catch where error.provesDamage {
            let aside = try moveAside(s.directory, clock: clock)
            notes.append("cache in \(s.directory) is damaged or from another version (\(error)); moved to \(aside.to), starting empty")
            notes += aside.leftovers
            if aside.directoryReplaced {
                try makeDirectory(s.directory)
                lock = try DirectoryLock.acquire(s.directory)
            }
            return try openSwept(s, urls: urls)
        }
    }

    private static func openSwept(_ s: DiskStoreSettings, urls: StoredURLFilter) throws(LMDBError) -> (Opened, SweepResult) {
        let o = try openEnvironment(s)
        do throws(LMDBError) {
            return (o, try sweep(env: o.env, entries: o.entries, chunks: o.chunks, access: o.access, variants: o.variants,
                                 urls: urls))
        } catch {
            mdb_env_close(o.env)
            throw error
        }
    }

    private static func openEnvironment(_ s: DiskStoreSettings) throws(LMDBError) -> Opened {
        var e: OpaquePointer?
        try check(mdb_env_create(&e), "mdb_env_create")
        let env = e!
        // The recovery margin too until the start-up recovery is done (`DiskWriter.recoverAtStart`).
        mdb_env_set_mapsize(env, s.mapBound)
        mdb_env_set_maxreaders(env, 1_024)
        mdb_env_set_maxdbs(env, 8)
        var flags = UInt32(MDB_NOTLS)
        if s.durability == .fast { flags |= UInt32(MDB_NOSYNC) }
        mdb_env_set_assert(env, assertionMovesCacheAside)
        let rc = mdb_env_open(env, s.directory, flags, 0o644)
        guard rc == 0 else {
            mdb_env_close(env)
            throw LMDBError(code: rc, operation: "mdb_env_open \(s.directory)")
        }
        // A damaged page LMDB's checks let through faults instead of failing an assertion: the
        // cache is moved aside then too (`CSignals`), so the next start does not meet it again.
        _ = larder_move_cache_aside_on_lmdb_fault(s.directory)
        do throws(LMDBError) {
            // Before any page is read: a page past the end of the file is a SIGBUS, not an error.
            try checkDataFileHoldsUsedPages(env, directory: s.directory)
            // A map already as large as its pages in use (made under a larger capacity, or filled
            // up) gets the recovery margin beyond them, so the sweep and the start-up recovery
            // can write; the file grows by at most that margin.
            var info = MDB_envinfo()
            var stat = MDB_stat()
            if mdb_env_info(env, &info) == 0, mdb_env_stat(env, &stat) == 0 {
                let highWater = (Int(info.me_last_pgno) + 1) * Int(stat.ms_psize)
                if highWater + s.recoveryMargin > s.mapBound { mdb_env_set_mapsize(env, highWater + s.recoveryMargin) }
            }
            let txn = try WriteTransaction(env: env)
            let handle = txn.txn
            func open(_ name: String) throws(LMDBError) -> MDB_dbi {
                var dbi: MDB_dbi = 0
                try check(mdb_dbi_open(handle, name, UInt32(MDB_CREATE), &dbi), "mdb_dbi_open \(name)")
                return dbi
            }
            let o = Opened(env: env, variants: try open("variants"), entries: try open("entries"),
                           chunks: try open("chunks"), access: try open("access"), info: try open("info"))
            let markerKey = Array("format".utf8)
            if let marker = txn.get(o.info, markerKey) {
                guard marker == formatMarker else {
                    txn.abort()
                    mdb_env_close(env)
                    throw LMDBError(code: MDB_VERSION_MISMATCH, operation: "cache format \(String(decoding: marker, as: UTF8.self))")
                }
            } else {
                var stat = MDB_stat()
                mdb_stat(txn.txn, o.entries, &stat)
                if stat.ms_entries > 0 {
                    txn.abort()
                    mdb_env_close(env)
                    throw LMDBError(code: MDB_VERSION_MISMATCH, operation: "cache without a format marker")
                }
                try txn.put(o.info, markerKey, formatMarker)
            }
            try txn.commit()
            return o
        } catch {
            mdb_env_close(env)
            throw error
        }
    }

    /// Throws (as corruption) when data.mdb is shorter than the pages its newest meta page says
    /// are in use: a truncated file, whose missing pages the map would fault on.
    static func checkDataFileHoldsUsedPages(_ env: OpaquePointer, directory: String) throws(LMDBError) {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        var fd: Int32 = -1
        try check(mdb_env_info(env, &info), "mdb_env_info")
        try check(mdb_env_stat(env, &stat), "mdb_env_stat")
        try check(mdb_env_get_fd(env, &fd), "mdb_env_get_fd")
        var st = Glibc.stat()
        guard fstat(fd, &st) == 0 else { throw LMDBError(code: errno, operation: "fstat \(directory)/data.mdb") }
        let needed = (Int(info.me_last_pgno) + 1) * Int(stat.ms_psize)
        if Int(st.st_size) < needed {
            throw LMDBError(code: MDB_CORRUPTED, operation: "\(directory)/data.mdb",
                            reason: "data.mdb holds \(st.st_size) bytes but its pages in use end at \(needed): truncated")
        }
    }

    /// The clock that dates a damaged cache's copy: the last store opened's (the process has one),
    /// kept here for LMDB's assertion callback, which has no context to carry it.
    static let asideClock = Locked<any ProxyClock>(SystemClock.shared)

    /// Where a damaged cache went, whether `directory` itself is a new, empty one, and what of an
    /// older broken copy could not be removed on the way.
    struct MovedAside {
        var to: String
        var directoryReplaced: Bool
        var leftovers: [String] = []
    }

    /// Renames the directory to `<directory>.broken-<time>`. When the directory cannot be renamed
    /// (a mount point, as a container volume is, or a parent Larder may not write), its LMDB files
    /// are moved into `<directory>/broken-<time>/` instead, the one such copy kept.
    static func moveAside(_ directory: String, clock: any ProxyClock) throws(LMDBError) -> MovedAside {
        let now = clock.wallSeconds
        var aside = "\(directory).broken-\(now)"
        var n = 1
        while Glibc.access(aside, F_OK) == 0 { aside = "\(directory).broken-\(now)-\(n)"; n += 1 }
        if rename(directory, aside) == 0 { return MovedAside(to: aside, directoryReplaced: true) }
        let renameError = errno
        guard renameError == EBUSY || renameError == EACCES || renameError == EPERM || renameError == EXDEV else {
            throw LMDBError(code: renameError, operation: "moving the damaged cache \(directory) aside to \(aside)")
        }
        var leftovers: [String] = []
        let inside = try moveFilesAside(directory, now: now, leftovers: &leftovers)
        return MovedAside(to: inside, directoryReplaced: false, leftovers: leftovers)
    }

    /// Moves `data.mdb` and `lock.mdb` into a fresh `broken-<time>` subdirectory (same file system,
    /// so a rename), after removing an older one; what of that could not be removed is added to
    /// `leftovers` (it costs disk, not the move).
    private static func moveFilesAside(_ directory: String, now: Int64, leftovers: inout [String]) throws(LMDBError) -> String {
        for old in entryNames(of: directory) where old.hasPrefix("broken-") {
            leftovers += removeDirectory(directory + "/" + old)
        }
        let inside = "\(directory)/broken-\(now)"
        guard mkdir(inside, 0o700) == 0 || errno == EEXIST else {
            throw LMDBError(code: errno, operation: "making \(inside) for the damaged cache")
        }
        for file in ["data.mdb", "lock.mdb"] where Glibc.access(directory + "/" + file, F_OK) == 0 {
            guard rename(directory + "/" + file, inside + "/" + file) == 0 else {
                throw LMDBError(code: errno, operation: "moving the damaged \(directory)/\(file) to \(inside)")
            }
        }
        return inside
    }

    struct SweepResult {
        var maxBodyID: UInt64 = 0
        var bytes = 0
        var entryCount = 0
        var orphanChunks = 0
        var damagedRecords = 0
        var earlierFormatRecords = 0
    }

    /// Deletes damaged records, records of an earlier format and body chunks no entry owns (left
    /// by a crash mid-store), and totals what is stored. A record of a later format means a newer
    /// Larder wrote the cache: thrown as a version mismatch before anything is deleted, so the
    /// cache is moved aside whole rather than emptied record by record.
    private static func sweep(env: OpaquePointer, entries: MDB_dbi, chunks: MDB_dbi, access: MDB_dbi,
                              variants: MDB_dbi, urls: StoredURLFilter) throws(LMDBError) -> SweepResult {
        var result = SweepResult()
        let txn = try WriteTransaction(env: env)
        var live: Set<UInt64> = []
        var doomed: [[UInt8]] = []
        var laterVersion: UInt8?
        try txn.scan(entries, from: nil) { k, v in
            switch RecordCodec.decodeEntry(v) {
            case .success(let r) where k.count == 32:
                if let key = EntryKey(bytes: k) { urls.insert(key.primary) }
                live.insert(r.bodyID)
                result.maxBodyID = max(result.maxBodyID, r.bodyID)
                result.bytes += r.footprint
                result.entryCount += 1
            case .failure(.laterVersion(let version)):
                laterVersion = version
                return false
            case .failure(.earlierVersion):
                result.earlierFormatRecords += 1
                doomed.append(Array(k))
            case .success, .failure(.damaged):
                result.damagedRecords += 1
                doomed.append(Array(k))
            }
            return true
        }
        if let laterVersion {
            throw LMDBError(code: MDB_VERSION_MISMATCH, operation: "entries",
                            reason: "entry records of format version \(laterVersion), newer than this Larder's "
                                + "\(RecordCodec.entryVersion)")
        }
        for k in doomed { try txn.delete(entries, k) }
        var orphans: [[UInt8]] = []
        try txn.scan(chunks, from: nil) { k, _ in
            var r = ByteReader(k)
            if let id = r.u64() {
                result.maxBodyID = max(result.maxBodyID, id)
                if !live.contains(id) { orphans.append(Array(k)) }
            }
            return true
        }
        for k in orphans { try txn.delete(chunks, k) }
        result.orphanChunks = orphans.count
        try txn.commit()
        return result
    }

    static func chunkKey(_ id: UInt64, _ index: Int) -> [UInt8] {
        withChunkKey(id, index) { Array($0) }
    }

    /// The bytes `chunkKey` returns, on the stack: a read without an allocation.
    static func withChunkKey<R>(_ id: UInt64, _ index: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var bigEndian = (id.bigEndian, UInt32(index).bigEndian)
        return withUnsafeBytes(of: &bigEndian) { body(UnsafeRawBufferPointer(rebasing: $0[..<12])) }
    }

    static func accessKey(_ time: Int64, _ key: EntryKey) -> [UInt8] {
        var bigEndian = (UInt64(bitPattern: time).bigEndian, key.primary.high.bigEndian, key.primary.low.bigEndian,
                         key.secondary.high.bigEndian, key.secondary.low.bigEndian)
        return withUnsafeBytes(of: &bigEndian) { Array($0) }
    }
}

/// Reads for one thread: a read transaction renewed for each lookup and reset right after, so no
/// snapshot stays pinned between requests.
public final class DiskReader {
    let store: DiskStore
    private var txn: OpaquePointer?

    init(store: DiskStore) { self.store = store }

    deinit { if let txn { mdb_txn_abort(txn) } }

    /// Runs `body` inside a fresh snapshot.
    private func read<R>(_ body: (OpaquePointer) -> R?) -> R? {
        if let txn {
            guard mdb_txn_renew(txn) == 0 else { return nil }
        } else {
            var t: OpaquePointer?
            guard mdb_txn_begin(store.env, nil, UInt32(MDB_RDONLY), &t) == 0 else { return nil }
            txn = t
        }
        defer { mdb_txn_reset(txn) }
        return body(txn!)
    }

    public func spec(_ primary: KeyDigest) -> VariantSpec? {
        primary.withBytes { k in read { txn in spec(txn, k) } }
    }

    private func spec(_ txn: OpaquePointer, _ primary: UnsafeRawBufferPointer) -> VariantSpec? {
        lookUp(txn, store.variants, primary).flatMap { RecordCodec.variant($0.bytes) }
    }

    /// What is stored under `key`: a record, nothing, or bytes that fail to decode (damaged: the
    /// start-up sweep removed every record of another format).
    enum RecordLookup {
        case absent, damaged
        case found(EntryRecord)
    }

    /// The URL's variant spec and the record it selects (`entryKey` makes the key from the spec),
    /// read in one transaction: from two, a removal committed in between would show a spec
    /// without its record, a Vary miss for a URL that has nothing stored any more. A URL without a
    /// spec record has at most one response, stored without Vary: nil when there is none.
    func specAndRecord(_ primary: KeyDigest, primaryKey: [UInt8],
                       entryKey: (VariantSpec) -> EntryKey) -> (VariantSpec, EntryKey, RecordLookup)? {
        primary.withBytes { k in
            read { txn -> (VariantSpec, EntryKey, RecordLookup)? in
                if let spec = spec(txn, k) {
                    let key = entryKey(spec)
                    return (spec, key, record(txn, key))
                }
                // Built from the caller's key, so the check against another URL of the same
                // digest is the record's, here.
                let spec = VariantSpec(primaryKey: primaryKey, varyFields: [])
                let key = entryKey(spec)
                switch record(txn, key) {
                case .absent: return nil
                case .found(let r) where r.primaryKey != primaryKey: return nil   // another URL, same digest
                case let stored: return (spec, key, stored)
                }
            }
        }
    }

    public func record(_ key: EntryKey) -> EntryRecord? {
        if case .found(let r) = lookUpRecord(key) { return r }
        return nil
    }

    func lookUpRecord(_ key: EntryKey) -> RecordLookup {
        read { txn in record(txn, key) } ?? .absent
    }

    private func record(_ txn: OpaquePointer, _ key: EntryKey) -> RecordLookup {
        guard let v = key.withBytes({ lookUp(txn, store.entries, $0) }) else { return .absent }
        return RecordCodec.entry(v.bytes).map { .found($0) } ?? .damaged
    }

    /// Calls `body` with the bytes of chunk `index` of body `id`, which must hold `expectedCount` of
    /// them. With `verify` their checksum is checked first, and `body` is not called when it fails.
    func withChunk(id: UInt64, index: Int, expectedCount: Int, verify: Bool,
                   _ body: (UnsafeRawBufferPointer) -> Void) -> ChunkRead {
        DiskStore.withChunkKey(id, index) { key in
            read { txn -> ChunkRead? in
                guard let v = lookUp(txn, store.chunks, key) else { return .missing }
                let payload = verify ? BodyChunk.verifiedPayload(of: v.bytes, key: key, expectedCount: expectedCount)
                                     : BodyChunk.payload(of: v.bytes, expectedCount: expectedCount)
                guard let payload else { return .damaged }
                body(payload)
                return .delivered
            } ?? .missing
        }
    }

    /// Every stored variant of one URL (its keys are adjacent: the primary digest comes first).
    public func variants(of primary: KeyDigest) -> [(EntryKey, EntryRecord)] {
        let start = primary.bytes
        return read { txn -> [(EntryKey, EntryRecord)]? in
            var out: [(EntryKey, EntryRecord)] = []
            try? scanCursor(txn, store.entries, from: start) { k, v in
                guard let key = EntryKey(bytes: k), key.primary == primary else { return false }
                if let r = RecordCodec.entry(v) { out.append((key, r)) }
                return true
            }
            return out
        } ?? []
    }

    /// Every record (admin listings, purge-since, tests). Copies; not for the hot path.
    public func allRecords() -> [(EntryKey, EntryRecord)] {
        read { txn -> [(EntryKey, EntryRecord)]? in
            var out: [(EntryKey, EntryRecord)] = []
            try? scanCursor(txn, store.entries, from: nil) { k, v in
                if let key = EntryKey(bytes: k), let r = RecordCodec.entry(v) { out.append((key, r)) }
                return true
            }
            return out
        } ?? []
    }
}

/// LMDB aborts the process when one of its assertions fails, which on a corrupt cache would
/// repeat at every start: the cache is moved aside first, so the next start begins empty.
private func assertionMovesCacheAside(_ env: OpaquePointer?, _ message: UnsafePointer<CChar>?) {
    var path: UnsafePointer<CChar>?
    guard let env, mdb_env_get_path(env, &path) == 0, let path else { return }
    let directory = String(cString: path)
    let what = message.map { String(cString: $0) } ?? "?"
    var outcome: String
    do {
        let aside = try DiskStore.moveAside(directory, clock: DiskStore.asideClock.withLock { $0 })
        outcome = "moved to \(aside.to); the next start begins with an empty cache"
        for leftover in aside.leftovers { outcome += "; \(leftover)" }
    } catch {
        outcome = "could not be moved aside (\(error))"
    }
    let line = Array("larder: LMDB assertion failed (\(what)): the cache in \(directory) is damaged and was \(outcome)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// Test hook (`LARDER_TEST_CRASH=lmdb:SECONDS`): a read through a wild pointer inside liblmdb, as
/// a damaged page its checks let through makes one.
public enum LMDBFaultForTest {
    @inline(never)
    public static func fault() {
        let wild = OpaquePointer(bitPattern: 64 + Int(getpid() & 0))  // not a constant: called as written
        _ = mdb_txn_id(wild)
    }
}
