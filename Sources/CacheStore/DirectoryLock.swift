import Glibc

/// One Larder per cache directory: an exclusive `flock` on `larder.lock` inside it, holding the
/// holder's PID. Two processes on one directory would hand out the same body ids and serve each
/// other's bodies. The kernel drops the lock when the process ends, however it ends (kill -9
/// included), so a crash never leaves a lock that blocks the restart.
final class DirectoryLock {
    static let fileName = "larder.lock"
    private let fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }

    /// Takes the lock of `directory` (which must exist) or throws, naming the holder's PID when
    /// another process has it.
    static func acquire(_ directory: String) throws(LMDBError) -> DirectoryLock {
        let path = "\(directory)/\(fileName)"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw LMDBError(code: errno, operation: "open \(path)") }
        let failure = takeLock(fd)
        guard failure == 0 else {
            let holder = readHolder(fd)
            close(fd)
            guard failure == EWOULDBLOCK else { throw LMDBError(code: failure, operation: "flock \(path)") }
            throw LMDBError(code: failure, operation: path, reason:
                "the cache directory \(directory) is in use by another Larder (pid \(holder ?? "unknown")); "
                + "one directory serves one instance")
        }
        writeHolder(fd, pid: getpid())
        return DirectoryLock(fd: fd)
    }

    /// Takes the lock at once; or, when this very process holds it (a store it opened before is
    /// still being let go, as in tests that reopen a directory), within a second. Returns 0 or the
    /// error of the last attempt.
    private static func takeLock(_ fd: Int32) -> Int32 {
        var failure: Int32 = 0
        for _ in 0..<50 {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return 0 }
            failure = errno
            guard failure == EWOULDBLOCK, readHolder(fd) == String(getpid()) else { return failure }
            usleep(20_000)
        }
        return failure
    }

    private static func writeHolder(_ fd: Int32, pid: pid_t) {
        let text = Array("\(pid)\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    /// The PID written by the holder; nil while it has not written it yet.
    private static func readHolder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        let digits = buffer[..<n].prefix { $0 >= 0x30 && $0 <= 0x39 }
        return digits.isEmpty ? nil : String(decoding: digits, as: UTF8.self)
    }
}
