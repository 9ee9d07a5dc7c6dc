import CacheStore
import Glibc
import Logging
import ProxyServer

/// Test hook: `LARDER_TEST_CRASH=segv:SECONDS`, `fatal:SECONDS` or `lmdb:SECONDS` makes the first
/// worker crash that long after start-up, with a real bad memory access, a fatalError, or a bad
/// access inside liblmdb, so the integration tests can see how a crash inside a worker ends the
/// process (and, inside LMDB, that the cache is moved aside first). The variable is read once at
/// start-up and nothing a client sends can reach the hook; never set it in production.
struct CrashTestHook {
    static let variable = "LARDER_TEST_CRASH"

    enum Kind: String { case segv, fatal, lmdb }
    let kind: Kind
    let seconds: Double

    struct Invalid: Error, CustomStringConvertible {
        let value: String
        var description: String { "\(CrashTestHook.variable)=\(value): expected segv:SECONDS, fatal:SECONDS or lmdb:SECONDS" }
    }

    /// The hook the environment asks for, or nil when the variable is not set.
    static func fromEnvironment() throws(Invalid) -> CrashTestHook? {
        guard let raw = getenv(variable) else { return nil }
        let value = String(cString: raw)
        let parts = value.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let kind = Kind(rawValue: String(parts[0])),
              let seconds = Double(parts[1]), seconds >= 0, seconds.isFinite else {
            throw Invalid(value: value)
        }
        return CrashTestHook(kind: kind, seconds: seconds)
    }

    func arm(on server: ProxyServer, logger: Logger) {
        logger.warning("\(CrashTestHook.variable) is set: worker 0 crashes (\(kind.rawValue)) in \(seconds) s")
        let kind = self.kind
        server.runOnFirstWorker(after: seconds) {
            logger.critical("test hook: crashing worker 0 (\(kind.rawValue))")
            switch kind {
            case .segv: CrashTestHook.crashForTestWithBadAccess()
            case .fatal: CrashTestHook.crashForTestWithFatalError()
            case .lmdb: LMDBFaultForTest.fault()
            }
        }
    }

    /// A store to an unmapped page: a real SIGSEGV, raised by the kernel.
    @inline(never)
    static func crashForTestWithBadAccess() {
        let address = 16 + Int(getpid() & 0)  // not a constant, so the store is emitted as written
        UnsafeMutablePointer<Int>(bitPattern: address)!.pointee = 1
    }

    @inline(never)
    static func crashForTestWithFatalError() -> Never {
        fatalError("test hook: fatalError in worker 0")
    }
}
