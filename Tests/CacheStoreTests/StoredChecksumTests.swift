import CachePolicy
import HTTPWire
import Locking
import Testing
@testable import CacheStore

/// The stored formats that carry checksums, and what the cache does when one fails.
@Suite struct BodyChunkTests {
    let key = DiskStore.chunkKey(42, 3)
    let payload = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    func verified(_ stored: [UInt8], key: [UInt8]? = nil, count: Int? = nil) -> [UInt8]? {
        stored.withUnsafeBytes {
            let stored = $0
            return (key ?? self.key).withUnsafeBytes {
                BodyChunk.verifiedPayload(of: stored, key: $0, expectedCount: count ?? payload.count).map { Array($0) }
            }
        }
    }

    @Test func storedChunkIsThePayloadThenItsChecksum() {
        let stored = BodyChunk.encoded(payload, key: key)
        #expect(stored.count == payload.count + 4)
        #expect(Array(stored[..<payload.count]) == payload)
        let crc = CRC32C.checksum(payload, continuing: CRC32C.checksum(key))
        #expect(Array(stored[payload.count...]) == [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF),
                                                     UInt8(crc >> 24)])
        #expect(verified(stored) == payload)
        #expect(stored.withUnsafeBytes { BodyChunk.payload(of: $0, expectedCount: payload.count).map { Array($0) } } == payload)
        // Unchecked, a chunk of another length than its record says is still refused.
        #expect(stored.withUnsafeBytes { BodyChunk.payload(of: $0, expectedCount: payload.count - 1) } == nil)
    }

    @Test func everyFlippedByteIsCaught() {
        let stored = BodyChunk.encoded(payload, key: key)
        for i in stored.indices {
            for mask: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = stored
                damaged[i] ^= mask
                #expect(verified(damaged) == nil, "byte \(i) ^ \(mask)")
            }
        }
    }

    @Test func aChunkUnderAnotherKeyOrOfAnotherLengthIsRejected() {
        let stored = BodyChunk.encoded(payload, key: key)
        #expect(verified(stored, key: DiskStore.chunkKey(42, 4)) == nil)
        #expect(verified(stored, key: DiskStore.chunkKey(43, 3)) == nil)
        #expect(verified(stored, count: payload.count - 1) == nil)
        #expect(verified(Array(stored.dropLast())) == nil)
        #expect(verified(payload) == nil, "a chunk of the format before checksums")
        #expect(verified([1, 2], count: 0) == nil)
        #expect(verified(BodyChunk.encoded([], key: key), count: 0) == [])
    }
}

@Suite(.serialized) struct StoredChecksumTests {
    let noLog: @Sendable (String) -> Void = { _ in }

    func record(head: String = "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n") -> EntryRecord {
        EntryRecord(bodyID: 7, bodyLength: 42, chunkSize: 16, storedAt: 5, lastAccess: 6,
                    primaryKey: Array("http://x/a".utf8), secondaryKey: [], facts: facts(), head: Array(head.utf8))
    }

    @Test func everyFlippedByteOfARecordIsCaught() {
        let bytes = RecordCodec.encode(record())
        #expect(bytes.withUnsafeBytes { RecordCodec.entry($0) } == record())
        for i in bytes.indices {
            var damaged = bytes
            damaged[i] ^= 0x20  // "OK" becomes "oK", a key letter changes case: still well-formed
            #expect(damaged.withUnsafeBytes { RecordCodec.decodeEntry($0) } == .failure(.damaged), "byte \(i)")
        }
    }

    /// Replaces the stored bytes under `key` of `dbi` with `change(old)`, as damage on disk would.
    func damage(_ s: DiskStore, _ dbi: UInt32, _ key: [UInt8], _ change: ([UInt8]) -> [UInt8]) throws {
        let txn = try WriteTransaction(env: s.env)
        let old = txn.get(dbi, key)
        try #require(old != nil)
        try txn.put(dbi, key, change(old!))
        try txn.commit()
    }

    @Test func aDamagedChunkIsReportedNotDelivered() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 100), log: noLog)
        let key = store(s, url: "http://a/x", bytes: body(250))
        s.flush()
        let r = s.makeReader()
        let rec = try #require(r.record(key))
        try damage(s, s.chunks, DiskStore.chunkKey(rec.bodyID, 1)) { var b = $0; b[17] ^= 4; return b }
        var delivered = 0
        let read = { (i: Int, verify: Bool) in
            r.withChunk(id: rec.bodyID, index: i, expectedCount: rec.chunkLength(at: i), verify: verify) { delivered += $0.count }
        }
        #expect(read(0, true) == .delivered)
        #expect(read(1, true) == .damaged)
        #expect(read(2, true) == .delivered)
        #expect(delivered == 150)
        // Unchecked re-reads (of chunks checked earlier in a response) pass the bytes on as stored.
        #expect(read(1, false) == .delivered)
        #expect(delivered == 250)
        s.close()
    }

    @Test func recordsOfTheFormatBeforeChecksumsAreSweptWithTheirChunksAtStart() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let settings = DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 100)
        do {
            let s = try DiskStore(settings: settings, log: noLog)
            let key = store(s, url: "http://a/old", bytes: body(250))
            _ = store(s, url: "http://a/new", bytes: body(50))
            s.flush()
            try damage(s, s.entries, key.bytes) { var b = Array($0.dropLast(4)); b[0] = 2; return b }
            s.close()
        }
        let s = try DiskStore(settings: settings, log: noLog)
        #expect(s.entryCount == 1)
        #expect(s.startupNotes == ["cache sweep: removed 3 orphan body chunks, 0 damaged records and 1 records of an earlier format"])
    }

    func makeCache(_ dir: String, memoryObjectLimit: Int, log: @escaping @Sendable (String) -> Void) throws -> Cache {
        try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 100),
                                          memoryObjectLimit: memoryObjectLimit),
                  log: log)
    }

    func storeEntry(_ cache: Cache, url: String, bytes: [UInt8]) {
        let w = cache.beginStore(primaryKey: Array(url.utf8), secondaryKey: [], facts: facts(), head: [],
                                 tier: .allowed, expectedLength: bytes.count, now: 1_000)!
        bytes.withUnsafeBytes { _ = w.append($0) }
        #expect(w.finish(head: Array("HTTP/1.1 200 OK\r\nContent-Length: \(bytes.count)\r\n".utf8), facts: facts()))
    }

    func lookup(_ reader: CacheReader, _ url: String) -> StoredResponse? {
        if case .found(let e) = reader.lookup(primaryKey: Array(url.utf8), request: HeaderBlock()) { return e }
        return nil
    }

    @Test func aDamagedEntryIsDroppedCountedAndLoggedOncePerInterval() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let lines = Locked<[String]>([])
        let cache = try makeCache(dir, memoryObjectLimit: 0, log: { line in lines.withLock { $0.append(line) } })
        defer { cache.close() }
        for name in ["a", "b"] { storeEntry(cache, url: "http://h/\(name)", bytes: body(250)) }
        cache.flush()
        let reader = cache.makeReader()
        for name in ["a", "b"] {
            let e = try #require(lookup(reader, "http://h/\(name)"))
            try damage(cache.disk!, cache.disk!.chunks, DiskStore.chunkKey(e.record.bodyID, 2)) { var b = $0; b[0] ^= 1; return b }
            var sent = 0
            for i in 0..<2 { #expect(reader.withChunk(of: e, index: i, verify: true) { sent += $0.count } == .delivered) }
            #expect(reader.withChunk(of: e, index: 2, verify: true) { sent += $0.count } == .damaged)
            #expect(sent == 200)
            #expect(lookup(reader, "http://h/\(name)") == nil, "dropped at once, before the writer commits")
        }
        cache.flush()
        #expect(cache.statistics.checksumFailures == 2)
        #expect(cache.statistics.diskEntries == 0)
        #expect(lines.withLock { $0 } == ["cache entry http://h/a failed its checksum (body chunk 3 of 3): dropped"])
    }

    @Test func aDamagedRecordOrPromotedBodyIsAMissNeverAHit() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 1 << 20, log: { _ in })
        defer { cache.close() }
        storeEntry(cache, url: "http://h/record", bytes: body(50))
        storeEntry(cache, url: "http://h/body", bytes: body(250))
        cache.flush()
        cache.memory.removeAll()  // as after a restart: the entries are on disk only
        let reader = cache.makeReader()
        let key = { (url: String) in EntryKey(primary: KeyDigest(Array(url.utf8)), secondary: KeyDigest([])) }
        try damage(cache.disk!, cache.disk!.entries, key("http://h/record").bytes) { var b = $0; b[b.count - 10] ^= 1; return b }
        let bodyID = try #require(cache.disk!.makeReader().record(key("http://h/body"))).bodyID
        try damage(cache.disk!, cache.disk!.chunks, DiskStore.chunkKey(bodyID, 1)) { var b = $0; b[99] ^= 1; return b }
        for url in ["http://h/record", "http://h/body"] {
            guard case .uriMiss = reader.lookup(primaryKey: Array(url.utf8), request: HeaderBlock()) else {
                Issue.record("\(url) was not a miss")
                continue
            }
        }
        #expect(cache.statistics.checksumFailures == 2)
        #expect(cache.memory.count == 0, "nothing damaged was promoted to the memory tier")
    }
}
