import CachePolicy
import Glibc
import Testing
@testable import CacheStore

/// A fresh directory under /tmp, removed by the caller's `defer`.
func temporaryDirectory() -> String {
    var template = Array("/tmp/larder-store-test.XXXXXX".utf8CString)
    let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: p!)
}

func removeTree(_ path: String) {
    _ = path.withCString { p in
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/rm"), strdup("-rf"), strdup(p), nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        if posix_spawn(&pid, "/bin/rm", nil, nil, &argv, environ) == 0 { var status: Int32 = 0; waitpid(pid, &status, 0) }
        return 0
    }
}

func facts(status: Int = 200, vary: [[UInt8]] = []) -> EntryFacts {
    EntryFacts(status: status, requestTime: 1_000, responseTime: 1_001, dateValue: 1_001, correctedInitialAge: 1,
               freshnessLifetime: 60, heuristic: false, noCache: false, mustRevalidate: false, staleWhileRevalidate: 0,
               staleIfError: 0, etag: Array("\"v1\"".utf8), lastModified: 900, contentLength: nil, varyFields: vary,
               varyStar: false)
}

func body(_ n: Int, seed: UInt8 = 1) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) } }

/// Stores `bytes` under `url` the way the proxy does: chunks, then the commit.
func store(_ s: DiskStore, url: String, secondary: [UInt8] = [], bytes: [UInt8], storedAt: Int64 = 1_000,
           vary: [[UInt8]] = []) -> EntryKey {
    let primary = Array(url.utf8)
    let key = EntryKey(primary: KeyDigest(primary), secondary: KeyDigest(secondary))
    let id = s.allocateBodyID()
    let chunk = s.settings.chunkSize
    var index = 0
    var offset = 0
    while offset < bytes.count {
        let end = min(offset + chunk, bytes.count)
        s.enqueue(.chunk(id: id, index: index, bytes: Array(bytes[offset..<end])))
        index += 1
        offset = end
    }
    let record = EntryRecord(bodyID: id, bodyLength: bytes.count, chunkSize: chunk, storedAt: storedAt,
                             lastAccess: storedAt, primaryKey: primary, secondaryKey: secondary,
                             facts: facts(vary: vary), head: Array("HTTP/1.1 200 OK\r\nContent-Length: \(bytes.count)\r\n".utf8))
    s.enqueue(.commit(EntryCommit(key: key, spec: VariantSpec(primaryKey: primary, varyFields: vary), record: record)))
    return key
}

func readBody(_ r: DiskReader, _ record: EntryRecord) -> [UInt8]? {
    var out: [UInt8] = []
    for i in 0..<record.chunkCount {
        let read = r.withChunk(id: record.bodyID, index: i, expectedCount: record.chunkLength(at: i), verify: true) {
            out.append(contentsOf: $0)
        }
        guard read == .delivered else { return nil }
    }
    return out
}

@Suite(.serialized) struct DiskStoreTests {
    let noLog: @Sendable (String) -> Void = { _ in }

    @Test func storesAndReadsBackAcrossChunksAndRestarts() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let settings = DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 1_000)
        let data = body(2_500)
        do {
            let s = try DiskStore(settings: settings, log: noLog)
            let key = store(s, url: "http://a/x", bytes: data)
            s.flush()
            let r = s.makeReader()
            let rec = try #require(r.record(key))
            #expect(rec.chunkCount == 3)
            #expect(readBody(r, rec) == data)
            #expect(rec.facts == facts())
            #expect(s.entryCount == 1)
            s.close()
        }
        let reopened = try DiskStore(settings: settings, log: noLog)
        let key = EntryKey(primary: KeyDigest(Array("http://a/x".utf8)), secondary: KeyDigest([]))
        let rec = try #require(reopened.makeReader().record(key))
        #expect(readBody(reopened.makeReader(), rec) == data)
        #expect(reopened.entryCount == 1)
        #expect(reopened.storedBytes == rec.footprint)
        #expect(reopened.startupNotes.isEmpty)
    }

    @Test func uncommittedChunksAreSweptAtStart() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let settings = DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 100)
        do {
            let s = try DiskStore(settings: settings, log: noLog)
            // A store cut off before its commit, as after kill -9.
            let id = s.allocateBodyID()
            for i in 0..<5 { s.enqueue(.chunk(id: id, index: i, bytes: body(100))) }
            _ = store(s, url: "http://a/whole", bytes: body(250))
            s.flush()
            s.close()
        }
        let s = try DiskStore(settings: settings, log: noLog)
        #expect(s.entryCount == 1)
        #expect(s.startupNotes.count == 1)
        #expect(s.startupNotes.first?.contains("removed 5 orphan body chunks") == true)
    }

    @Test func replacingAVariantDropsTheOldBody() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 100), log: noLog)
        let key = store(s, url: "http://a/x", bytes: body(300, seed: 1))
        s.flush()
        let old = try #require(s.makeReader().record(key))
        _ = store(s, url: "http://a/x", bytes: body(150, seed: 2))
        s.flush()
        let r = s.makeReader()
        let new = try #require(r.record(key))
        #expect(readBody(r, new) == body(150, seed: 2))
        #expect(r.withChunk(id: old.bodyID, index: 0, expectedCount: old.chunkLength(at: 0), verify: true) { _ in } == .missing)
        #expect(s.entryCount == 1)
        #expect(s.storedBytes == new.footprint)
    }

    @Test func varyChangeRemovesOtherVariants() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        let gzip = store(s, url: "http://a/v", secondary: Array("gzip".utf8), bytes: body(10), vary: [Array("accept-encoding".utf8)])
        let plain = store(s, url: "http://a/v", secondary: Array("none".utf8), bytes: body(20), vary: [Array("accept-encoding".utf8)])
        s.flush()
        #expect(s.entryCount == 2)
        let lang = store(s, url: "http://a/v", secondary: Array("en".utf8), bytes: body(30), vary: [Array("accept-language".utf8)])
        s.flush()
        let r = s.makeReader()
        #expect(r.record(gzip) == nil)
        #expect(r.record(plain) == nil)
        #expect(r.record(lang) != nil)
        #expect(r.spec(KeyDigest(Array("http://a/v".utf8)))?.varyFields == [Array("accept-language".utf8)])
        #expect(s.entryCount == 1)
    }

    /// The record `specAndRecord` selects for `url` and a request whose Vary-selected fields make
    /// `secondary`: nil when the URL has nothing stored.
    func selected(_ r: DiskReader, _ url: String, secondary: [UInt8] = []) -> (VariantSpec, DiskReader.RecordLookup)? {
        let primaryKey = Array(url.utf8)
        let primary = KeyDigest(primaryKey)
        return r.specAndRecord(primary, primaryKey: primaryKey) { spec in
            EntryKey(primary: primary, secondary: KeyDigest(spec.varyFields.isEmpty ? [] : secondary))
        }.map { ($0.0, $0.2) }
    }

    /// Writes `bytes` as the URL's variant spec behind the writer's back: a spec an earlier Larder
    /// kept, or a damaged one.
    func putSpecBytes(_ s: DiskStore, _ primary: KeyDigest, _ bytes: [UInt8]) throws {
        let txn = try WriteTransaction(env: s.env)
        try txn.put(s.variants, primary.bytes, bytes)
        try txn.commit()
    }

    /// A response without Vary stored as an earlier Larder did: with a spec of no fields beside it.
    func storeWithEmptySpec(_ s: DiskStore, url: String, bytes: [UInt8]) throws -> EntryKey {
        let key = store(s, url: url, bytes: bytes)
        s.flush()
        try putSpecBytes(s, key.primary, RecordCodec.encode(VariantSpec(primaryKey: Array(url.utf8), varyFields: [])))
        return key
    }

    @Test func aResponseWithoutVaryIsStoredWithoutASpec() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        let plain = store(s, url: "http://a/p", bytes: body(10))
        s.flush()
        let r = s.makeReader()
        #expect(r.spec(plain.primary) == nil)
        let (spec, found) = try #require(selected(r, "http://a/p"))
        #expect(spec.varyFields.isEmpty && spec.primaryKey == Array("http://a/p".utf8))
        guard case .found(let record) = found else { Issue.record("not found: \(found)"); return }
        #expect(readBody(r, record) == body(10))
        #expect(selected(r, "http://a/other") == nil)
        // Another URL whose digest this were: never answered with this URL's record.
        let impostor = r.specAndRecord(plain.primary, primaryKey: Array("http://a/impostor".utf8)) { _ in plain }
        #expect(impostor == nil)
    }

    @Test func varyArrivingOverAResponseWithoutItReplacesItAndTheOtherWayRound() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        let url = "http://a/v"
        let plain = store(s, url: url, bytes: body(10))
        s.flush()
        let gzip = store(s, url: url, secondary: Array("gzip".utf8), bytes: body(20), vary: [Array("accept-encoding".utf8)])
        s.flush()
        let r = s.makeReader()
        #expect(r.record(plain) == nil)
        #expect(r.record(gzip) != nil)
        #expect(r.spec(plain.primary)?.varyFields == [Array("accept-encoding".utf8)])
        #expect(s.entryCount == 1 && s.storedBytes == r.record(gzip)!.footprint)
        guard case .absent = try #require(selected(r, url, secondary: Array("br".utf8))).1 else {
            Issue.record("another coding must be a Vary miss"); return
        }
        let again = store(s, url: url, bytes: body(30))
        s.flush()
        #expect(r.record(gzip) == nil)
        #expect(r.spec(plain.primary) == nil)
        guard case .found(let record) = try #require(selected(r, url, secondary: Array("gzip".utf8))).1 else {
            Issue.record("the response without Vary must be found"); return
        }
        #expect(record.bodyID == r.record(again)!.bodyID && readBody(r, record) == body(30))
        #expect(s.entryCount == 1 && r.variants(of: plain.primary).count == 1)
    }

    @Test func aSpecKeptByAnEarlierLarderStillSelectsAndGoesAtTheNextStore() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        let url = "http://a/old"
        let key = try storeWithEmptySpec(s, url: url, bytes: body(10))
        let r = s.makeReader()
        #expect(r.spec(key.primary) != nil)
        guard case .found = try #require(selected(r, url)).1 else { Issue.record("not found"); return }
        _ = store(s, url: url, bytes: body(20))
        s.flush()
        #expect(r.spec(key.primary) == nil)
        guard case .found(let record) = try #require(selected(r, url)).1 else { Issue.record("not found"); return }
        #expect(readBody(r, record) == body(20) && s.entryCount == 1)
    }

    @Test func aDamagedSpecTakesItsVariantsWithItAtTheNextStore() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        let url = "http://a/damaged-spec"
        let vary = [Array("accept-encoding".utf8)]
        let gzip = store(s, url: url, secondary: Array("gzip".utf8), bytes: body(10), vary: vary)
        let br = store(s, url: url, secondary: Array("br".utf8), bytes: body(20), vary: vary)
        s.flush()
        try putSpecBytes(s, gzip.primary, [0xEE, 0x01])
        let r = s.makeReader()
        #expect(selected(r, url, secondary: Array("gzip".utf8)) == nil, "a damaged spec selects nothing")
        let plain = store(s, url: url, bytes: body(30))
        s.flush()
        #expect(r.record(gzip) == nil && r.record(br) == nil, "unselectable variants are not left behind")
        #expect(r.record(plain) != nil && r.spec(gzip.primary) == nil)
        #expect(s.entryCount == 1 && s.storedBytes == r.record(plain)!.footprint)
    }

    @Test func aSpecKeptByAnEarlierLarderGivesWayToAVaryResponse() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        let url = "http://a/old-then-vary"
        let plain = try storeWithEmptySpec(s, url: url, bytes: body(10))
        let gzip = store(s, url: url, secondary: Array("gzip".utf8), bytes: body(20), vary: [Array("accept-encoding".utf8)])
        s.flush()
        let r = s.makeReader()
        #expect(r.record(plain) == nil && r.record(gzip) != nil)
        #expect(r.spec(plain.primary)?.varyFields == [Array("accept-encoding".utf8)])
        #expect(s.entryCount == 1)
    }

    @Test func invalidateAndPurges() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        let a = store(s, url: "http://a/1", bytes: body(10), storedAt: 100)
        let b = store(s, url: "http://a/2", bytes: body(10), storedAt: 200)
        let c = store(s, url: "http://a/3", bytes: body(10), storedAt: 300)
        s.enqueue(.invalidate(primary: a.primary))
        s.flush()
        let r = s.makeReader()
        #expect(r.record(a) == nil && r.spec(a.primary) == nil)
        #expect(r.record(b) != nil)
        s.enqueue(.purgeSince(time: 250))
        s.flush()
        #expect(r.record(b) != nil && r.record(c) == nil)
        #expect(s.entryCount == 1)
        s.enqueue(.purgeAll())
        s.flush()
        #expect(r.record(b) == nil)
        #expect(s.entryCount == 0 && s.storedBytes == 0)
    }

    @Test func evictsLeastRecentlyUsedToStayUnderCapacity() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let capacity = 1 << 20
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: capacity, chunkSize: 64 * 1024), log: noLog)
        var keys: [EntryKey] = []
        for i in 0..<6 {
            keys.append(store(s, url: "http://a/\(i)", bytes: body(150_000), storedAt: Int64(1_000 + i)))
            s.flush()
        }
        // The first one was used recently: it survives; the next oldest go.
        s.enqueue(.touch(key: keys[0], time: 5_000))
        for i in 6..<10 {
            keys.append(store(s, url: "http://a/\(i)", bytes: body(150_000), storedAt: Int64(1_000 + i)))
            s.flush()
        }
        #expect(s.storedBytes <= capacity)
        let r = s.makeReader()
        #expect(r.record(keys[0]) != nil)
        #expect(r.record(keys[1]) == nil)
        #expect(r.record(keys[9]) != nil)
        #expect(s.writer.evictions.load(ordering: .relaxed) > 0)
    }

    @Test func directoryFromAnotherFormatIsMovedAside() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        // A cache written with a different marker stands for an older or newer Larder.
        do {
            let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
            _ = store(s, url: "http://a/old", bytes: body(10))
            s.flush()
            s.close()
        }
        let marker = dir + "/data.mdb"
        // Corrupt the file header so LMDB rejects it.
        let fd = open(marker, O_WRONLY)
        #expect(fd >= 0)
        let junk = [UInt8](repeating: 0x5A, count: 8_192)
        _ = junk.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: noLog)
        #expect(s.entryCount == 0)
        #expect(s.startupNotes.first?.contains("moved to \(dir).broken-") == true)
        removeTree(String(s.startupNotes.first!.split(separator: " ").first { $0.hasPrefix("\(dir).broken-") }!.dropLast(1)))
    }
}
