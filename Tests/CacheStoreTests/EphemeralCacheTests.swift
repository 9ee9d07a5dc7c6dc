import CachePolicy
import Glibc
import HTTPWire
import Testing
@testable import CacheStore

/// `cache.ephemeral`: the memory tier alone. No directory is created, every response is kept in
/// memory only, and nothing larger than `memoryObjectLimit` is kept.
@Suite struct EphemeralCacheTests {
    let directory = "/tmp/larder-ephemeral-test-never-created-\(getpid())"

    func makeCache(memoryObjectLimit: Int = 1_000) throws -> Cache {
        try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: directory, capacity: 64 << 20),
                                          memoryCapacity: 1 << 20, memoryObjectLimit: memoryObjectLimit, ephemeral: true),
                  log: { _ in })
    }

    func store(_ cache: Cache, _ url: String, _ bytes: [UInt8], expected: Int?) -> Bool {
        guard let w = cache.beginStore(primaryKey: Array(url.utf8), secondaryKey: [], facts: facts(), head: [],
                                       tier: .allowed, expectedLength: expected, now: 1_000) else { return false }
        bytes.withUnsafeBytes { _ = w.append($0) }
        return w.finish(head: Array("HTTP/1.1 200 OK\r\n".utf8), facts: facts())
    }

    func lookup(_ cache: Cache, _ url: String) -> StoredResponse? {
        if case .found(let e) = cache.makeReader().lookup(primaryKey: Array(url.utf8), request: HeaderBlock()) { return e }
        return nil
    }

    @Test func storesInMemoryOnlyAndNeverCreatesTheDirectory() throws {
        let cache = try makeCache()
        defer { cache.close() }
        #expect(cache.isEphemeral)
        #expect(store(cache, "http://h/a", body(500), expected: 500))
        let entry = try #require(lookup(cache, "http://h/a"))
        #expect(entry.tier == .allowedInMemoryOnly)
        guard case .memory(let object) = entry.body else {
            Issue.record("an ephemeral entry is not in memory")
            return
        }
        #expect(object.body == body(500))
        cache.flush()
        #expect(cache.statistics.diskEntries == 0 && cache.statistics.memoryEntries == 1)
        #expect(access(directory, F_OK) != 0, "the cache directory was created")
    }

    @Test func responsesLargerThanTheMemoryObjectLimitAreNotKept() throws {
        let cache = try makeCache(memoryObjectLimit: 1_000)
        defer { cache.close() }
        // Known length: refused at once.
        #expect(cache.beginStore(primaryKey: Array("http://h/big".utf8), secondaryKey: [], facts: facts(), head: [],
                                 tier: .allowed, expectedLength: 1_001, now: 1_000) == nil)
        // Unknown length (chunked): given up once it grows past the limit.
        #expect(!store(cache, "http://h/chunked", body(1_001), expected: nil))
        #expect(lookup(cache, "http://h/chunked") == nil)
        #expect(store(cache, "http://h/edge", body(1_000), expected: nil))
    }

    @Test func purgesWorkWithoutADisk() throws {
        let cache = try makeCache()
        defer { cache.close() }
        #expect(store(cache, "http://h/a", body(10), expected: 10))
        #expect(store(cache, "http://h/b", body(10), expected: 10))
        cache.invalidate(primaryKey: Array("http://h/a".utf8))
        #expect(lookup(cache, "http://h/a") == nil)
        #expect(lookup(cache, "http://h/b") != nil)
        cache.purgeAll()
        #expect(lookup(cache, "http://h/b") == nil)
        #expect(cache.makeReader().allRecords().isEmpty)
    }
}
