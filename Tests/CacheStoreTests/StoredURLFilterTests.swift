import HTTPWire
import Testing
@testable import CacheStore

/// The filter that lets a lookup skip the disk for URLs it never stored (`StoredURLFilter`).
@Suite struct StoredURLFilterTests {
    func digest(_ n: Int) -> KeyDigest { Array("http://a/\(n)".utf8).withUnsafeBytes { KeyDigest($0) } }

    @Test func whatWasInsertedIsAlwaysAMaybe() {
        let filter = StoredURLFilter(diskCapacity: 1 << 30)
        for n in 0..<20_000 { filter.insert(digest(n)) }
        #expect((0..<20_000).allSatisfy { filter.mayContain(digest($0)) })
    }

    @Test func whatWasNeverInsertedIsMostlyANo() {
        let filter = StoredURLFilter(diskCapacity: 1 << 30)
        for n in 0..<50_000 { filter.insert(digest(n)) }
        let falseMaybes = (50_000..<150_000).filter { filter.mayContain(digest($0)) }.count
        #expect(falseMaybes < 2_000, "\(falseMaybes) of 100,000")
    }

    @Test func sizedByCapacityWithinBounds() {
        #expect(StoredURLFilter(diskCapacity: 1 << 20).byteCount == 128 << 10)
        #expect(StoredURLFilter(diskCapacity: 1 << 30).byteCount == 1 << 20)
        #expect(StoredURLFilter(diskCapacity: 1 << 50).byteCount == 32 << 20)
    }

    /// Entries stored before a restart are found after it: the start-up sweep fills the filter.
    @Test func entriesFoundAtStartAreMaybes() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        do {
            let cache = try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: dir, capacity: 64 << 20)),
                                  log: { _ in })
            let w = cache.beginStore(primaryKey: Array("http://a/kept".utf8), secondaryKey: [], facts: facts(), head: [],
                                     tier: .allowed, expectedLength: 3, now: 1_000)!
            [UInt8]("abc".utf8).withUnsafeBytes { _ = w.append($0) }
            #expect(w.finish(head: Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n".utf8), facts: facts()))
            cache.flush()
            cache.close()
        }
        let cache = try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: dir, capacity: 64 << 20)),
                              log: { _ in })
        defer { cache.close() }
        let url = Array("http://a/kept".utf8)
        #expect(cache.disk!.storedURLs.mayContain(url.withUnsafeBytes { KeyDigest($0) }))
        guard case .found = cache.makeReader().lookup(primaryKey: url, request: HeaderBlock()) else {
            Issue.record("not found after a restart")
            return
        }
    }
}
