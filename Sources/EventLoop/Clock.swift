import Glibc
import Locking

/// Where time comes from. A worker owns one and passes it to what it runs, so nothing above this
/// module reads the system clock itself, and tests step a `ManualClock` by hand.
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
