import Glibc
import Locking

/// Where time comes from. The process makes one at start-up and passes it to everything that reads
/// the time (the workers and their loops, the cache store and its writer, the session client's
/// deadlines, warming, the admin endpoint), so nothing else reads the system clock itself, tests
/// step a `ManualClock` by hand, and the integration tests move a running binary's clock with an
/// `OffsetClock`.
public protocol ProxyClock: AnyObject, Sendable {
    /// Whole seconds since the epoch: HTTP dates, cache ages, the access log's timestamp.
    var wallSeconds: Int64 { get }
    /// Seconds on a clock that never jumps, to the nanosecond: durations, timeouts, rates.
    var monotonic: Double { get }
}

/// The machine's clocks (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`).
public final class SystemClock: ProxyClock {
    public static let shared = SystemClock()

    public init() {}

    public var wallSeconds: Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }

    public var monotonic: Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// A clock that moves only when told to: for tests that step time.
public final class ManualClock: ProxyClock {
    private let time: Locked<(wall: Int64, monotonic: Double)>

    public init(wallSeconds: Int64 = 1_800_000_000, monotonic: Double = 1_000) {
        time = Locked((wallSeconds, monotonic))
    }

    public var wallSeconds: Int64 { time.withLock { $0.wall } }
    public var monotonic: Double { time.withLock { $0.monotonic } }

    /// Moves both clocks forward by `seconds` (the wall clock by its whole part).
    public func advance(by seconds: Double) {
        time.withLock {
            $0.monotonic += seconds
            $0.wall += Int64(seconds.rounded(.down))
        }
    }
}

/// The machine's clocks moved forward by an offset another process sets: the integration tests'
/// way to let hours pass for a running binary without waiting for them (`LARDER_TEST_CLOCK_FILE`,
/// read once at start-up; a production start never makes one).
///
/// The offset is the first 8 bytes of a file, a little-endian signed count of nanoseconds, mapped
/// shared: a test's write to the file is seen by the next read of either clock, with no signal and
/// no syscall. Both clocks move by it, so durations (rate limits, uptime) see the jump as well as
/// dates (cache ages). The offset must only grow, or the monotonic clock would run backwards.
/// Timers armed with libevent still fire after real time: a deadline seen when its timer fires has
/// passed if the clock was moved past it meanwhile.
public final class OffsetClock: ProxyClock, @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The mapped offset; stays mapped for the life of the process.
    private let offset: UnsafeRawPointer
    public let path: String

    /// Maps the first 8 bytes of `path`, creating it (offset 0) when missing or shorter.
    public init(path: String) throws(Failure) {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failure(description: "cannot open the test clock file \(path): errno \(errno)") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw Failure(description: "cannot stat \(path): errno \(errno)") }
        if st.st_size < 8, ftruncate(fd, 8) != 0 {
            throw Failure(description: "cannot extend \(path) to 8 bytes: errno \(errno)")
        }
        guard let map = mmap(nil, 8, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            throw Failure(description: "cannot map \(path): errno \(errno)")
        }
        offset = UnsafeRawPointer(map)
    }

    /// The offset in nanoseconds (an aligned 8-byte load: never torn).
    public var offsetNanoseconds: Int64 { Int64(littleEndian: offset.load(as: Int64.self)) }

    public var wallSeconds: Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let nanos = Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec) + offsetNanoseconds
        return nanos >= 0 ? nanos / 1_000_000_000 : (nanos - 999_999_999) / 1_000_000_000
    }

    public var monotonic: Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9 + Double(offsetNanoseconds) / 1e9
    }

    /// The environment variable naming the file; consulted once, at start-up.
    public static let environmentVariable = "LARDER_TEST_CLOCK_FILE"

    /// The process's clock: the system's, or an `OffsetClock` when `LARDER_TEST_CLOCK_FILE` is set
    /// (non-empty) in `environment`.
    public static func fromEnvironment(_ environment: [String: String]) throws(Failure) -> any ProxyClock {
        guard let path = environment[environmentVariable], !path.isEmpty else { return SystemClock.shared }
        return try OffsetClock(path: path)
    }
}
