import CLMDB
import Glibc
import Testing
@testable import CacheStore

/// The cache directory at start: damage moves it aside, other errors are thrown with the files
/// left alone, and one directory serves one process.
@Suite(.serialized) struct CacheDirectoryTests {
    let noLog: @Sendable (String) -> Void = { _ in }

    func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : -1
    }

    /// The directory named in a "moved to X, starting empty" note.
    func movedTo(_ notes: [String], _ dir: String) -> String? {
        notes.first?.split(separator: " ").first { $0.hasPrefix("\(dir).broken-") }.map { String($0.dropLast(1)) }
    }

    @Test func truncatedDataFileIsMovedAsideBeforeAnyPageIsRead() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let settings = DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 4_096)
        do {
            let s = try DiskStore(settings: settings, log: noLog)
            for i in 0..<20 { _ = store(s, url: "http://a/\(i)", bytes: body(40_000)) }
            s.flush()
            s.close()
        }
        let size = fileSize(dir + "/data.mdb")
        #expect(truncate(dir + "/data.mdb", off_t(size - 4_096)) == 0)
        let s = try DiskStore(settings: settings, log: noLog)
        #expect(s.entryCount == 0)
        #expect(s.startupNotes.first?.contains("truncated") == true)
        let aside = try #require(movedTo(s.startupNotes, dir))
        defer { removeTree(aside) }
        #expect(fileSize(aside + "/data.mdb") == size - 4_096)
    }

    @Test func onlyProvenDamageCountsAsDamage() {
        for code in [MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID, MDB_VERSION_MISMATCH] {
            #expect(LMDBError(code: code, operation: "x").provesDamage)
        }
        for code in [EACCES, EPERM, EROFS, ENOTDIR, EIO, ENOSPC, MDB_MAP_FULL, MDB_READERS_FULL] {
            #expect(!LMDBError(code: code, operation: "x").provesDamage)
        }
    }

    @Test func aFileWhereTheDirectoryShouldBeIsAnErrorAndIsKept() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/cache"
        let fd = open(path, O_WRONLY | O_CREAT, 0o644)
        #expect(fd >= 0)
        close(fd)
        #expect(throws: LMDBError.self) { try DiskStore(settings: DiskStoreSettings(directory: path), log: noLog) }
        #expect(fileSize(path) == 0)
        #expect(access(path + ".broken-\(time(nil))", F_OK) != 0)
    }

    @Test func aSecondStoreOnTheSameDirectoryIsRefusedUntilTheFirstIsGone() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let settings = DiskStoreSettings(directory: dir, capacity: 64 << 20)
        do {
            let first = try DiskStore(settings: settings, log: noLog)
            do {
                _ = try DiskStore(settings: settings, log: noLog)
                Issue.record("a second store opened a directory in use")
            } catch {
                #expect(error.description.contains("in use by another Larder (pid \(getpid()))"))
                #expect(error.description.contains(dir))
            }
            first.close()
        }
        // Released with the first store.
        let again = try DiskStore(settings: settings, log: noLog)
        #expect(again.startupNotes.isEmpty)
    }
}
