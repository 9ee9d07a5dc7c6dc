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

/// Errors opening a cache that prove nothing about its files reach the caller, the files as they were.
@Suite(.serialized) struct CacheOpenErrorTests {
    let noLog: @Sendable (String) -> Void = { _ in }

    func contents(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return n == 0 ? out : nil }
            out.append(contentsOf: buffer[..<n])
        }
    }

    /// A cache of a few entries in a fresh directory, closed.
    func populatedCache() throws -> (dir: String, settings: DiskStoreSettings) {
        let dir = temporaryDirectory()
        let settings = DiskStoreSettings(directory: dir, capacity: 64 << 20, chunkSize: 4_096)
        let s = try DiskStore(settings: settings, log: noLog)
        for i in 0..<5 { _ = store(s, url: "http://a/\(i)", bytes: body(10_000)) }
        s.flush()
        s.close()
        return (dir, settings)
    }

    /// Names next to `dir` that a move aside would have made.
    func movedAsideCopies(_ dir: String) -> [String] {
        let parent = String(dir[..<dir.lastIndex(of: "/")!])
        let base = String(dir[dir.index(after: dir.lastIndex(of: "/")!)...])
        guard let d = opendir(parent) else { return [] }
        defer { closedir(d) }
        var out: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix(base + ".broken-") { out.append(name) }
        }
        return out
    }

    func openFails(_ settings: DiskStoreSettings) -> LMDBError? {
        do {
            _ = try DiskStore(settings: settings, log: noLog)
            return nil
        } catch {
            return error
        }
    }

    @Test(.disabled(if: geteuid() == 0, "root reads and writes files whatever their mode"))
    func anUnreadableDataFileIsAnErrorAndIsKept() throws {
        let (dir, settings) = try populatedCache()
        defer { removeTree(dir) }
        let data = dir + "/data.mdb"
        let before = try #require(contents(data))
        #expect(chmod(data, 0) == 0)
        defer { chmod(data, 0o644) }
        let error = try #require(openFails(settings), "a cache whose data file cannot be read opened")
        #expect(error.code == EACCES)
        #expect(!error.provesDamage)
        var st = stat()
        #expect(stat(data, &st) == 0 && st.st_mode & 0o777 == 0, "mode left as it was")
        #expect(chmod(data, 0o644) == 0)
        #expect(contents(data) == before)
        #expect(movedAsideCopies(dir).isEmpty)
        let again = try DiskStore(settings: settings, log: noLog)
        #expect(again.entryCount == 5)
        #expect(again.startupNotes.isEmpty)
    }

    /// The same as the permissions case for any user, root included: LMDB's lock file cannot be
    /// opened (it is a directory), an I/O error that says nothing about the cache.
    @Test func anUnopenableLockFileIsAnErrorAndTheCacheIsKept() throws {
        let (dir, settings) = try populatedCache()
        defer { removeTree(dir) }
        let data = dir + "/data.mdb"
        let before = try #require(contents(data))
        #expect(unlink(dir + "/lock.mdb") == 0)
        #expect(mkdir(dir + "/lock.mdb", 0o755) == 0)
        let error = try #require(openFails(settings), "a cache whose lock file cannot be opened opened")
        #expect(error.code == EISDIR)
        #expect(!error.provesDamage)
        #expect(error.description.contains(dir))
        #expect(contents(data) == before)
        #expect(movedAsideCopies(dir).isEmpty)
        #expect(access(dir + "/lock.mdb", F_OK) == 0)
        #expect(rmdir(dir + "/lock.mdb") == 0)
        let again = try DiskStore(settings: settings, log: noLog)
        #expect(again.entryCount == 5)
        #expect(again.startupNotes.isEmpty)
    }

    @Test func recordsOfALaterFormatMoveTheCacheAsideWhole() throws {
        let (dir, settings) = try populatedCache()
        defer { removeTree(dir) }
        do {
            let s = try DiskStore(settings: settings, log: noLog)
            let key = EntryKey(primary: KeyDigest(Array("http://a/3".utf8)), secondary: KeyDigest([]))
            let txn = try WriteTransaction(env: s.env)
            let stored = txn.get(s.entries, key.bytes)
            var later = Array(try #require(stored).dropLast(RecordCodec.checksumSize))
            later[0] = RecordCodec.entryVersion + 1
            try txn.put(s.entries, key.bytes, RecordCodecTests.sealed(later))
            try txn.commit()
            s.close()
        }
        let size = try #require(contents(dir + "/data.mdb")).count
        let s = try DiskStore(settings: settings, log: noLog)
        #expect(s.entryCount == 0)
        let note = try #require(s.startupNotes.first)
        #expect(note.contains("entry records of format version 4, newer than this Larder's 3"), "\(note)")
        let copies = movedAsideCopies(dir)
        try #require(copies.count == 1, "\(s.startupNotes)")
        let aside = String(dir[..<dir.lastIndex(of: "/")!]) + "/" + copies[0]
        defer { removeTree(aside) }
        #expect(contents(aside + "/data.mdb")?.count == size, "nothing deleted before the move")
    }

    @Test func whatCannotBeRemovedIsReportedNotIgnored() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        #expect(mkdir(dir + "/sub", 0o755) == 0)
        let fd = open(dir + "/file", O_WRONLY | O_CREAT, 0o644)
        #expect(fd >= 0)
        close(fd)
        let failures = DiskStore.removeDirectory(dir)
        #expect(failures.count == 2, "\(failures)")
        #expect(failures.first { $0.contains("\(dir)/sub") } != nil, "\(failures)")
        #expect(failures.first { $0.hasPrefix("cannot remove \(dir):") } != nil, "\(failures)")
        #expect(access(dir + "/file", F_OK) != 0, "what could be removed was")
        #expect(DiskStore.removeDirectory(dir + "/none").count == 1)
    }
}
