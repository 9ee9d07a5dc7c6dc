import CLMDB
import Testing
@testable import CacheStore

/// Body chunks are put at the end of their table without a search (`MDB_APPEND`) when their key
/// sorts last; a key that does not (a body whose id came before one already written, a chunk
/// written again) is put the usual way, and every key reads back what was put last under it.
@Suite(.serialized) struct AppendingPutTests {
    @Test func keysInAnyOrderLandWhetherOrNotTheySortLast() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let s = try DiskStore(settings: DiskStoreSettings(directory: dir, capacity: 64 << 20), log: { _ in })
        // Ascending, then below the last, equal to an earlier one, and ascending again.
        let order: [(UInt64, Int)] = [(5, 0), (5, 1), (9, 0), (7, 0), (5, 1), (1, 3), (12, 0), (9, 0), (12, 1)]
        var expected: [[UInt8]: [UInt8]] = [:]
        let txn = try WriteTransaction(env: s.env)
        for (n, (id, index)) in order.enumerated() {
            let key = DiskStore.chunkKey(id, index)
            let value = [UInt8](repeating: UInt8(n), count: 100 + n)
            try txn.put(s.chunks, key, reserving: value.count, appending: true) { out in out.copyBytes(from: value) }
            expected[key] = value
        }
        for (key, value) in expected { #expect(txn.get(s.chunks, key) == value) }
        try txn.commit()
        let again = try WriteTransaction(env: s.env)
        var stat = MDB_stat()
        mdb_stat(again.txn, s.chunks, &stat)
        #expect(stat.ms_entries == expected.count)
        for (key, value) in expected { #expect(again.get(s.chunks, key) == value) }
    }
}
