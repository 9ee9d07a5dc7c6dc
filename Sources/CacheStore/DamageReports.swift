import Locking
import Synchronization
import Timekeeping

/// Counts stored entries found damaged and logs them: at most one line per interval, with how
/// many more were found since the last line, so a failing disk cannot flood the log.
final class DamageReports: Sendable {
    static let logInterval = 10.0

    let count = Atomic<Int>(0)
    private let log: @Sendable (String) -> Void
    /// The cache's clock: the interval is measured on its monotonic time.
    private let clock: any ProxyClock
    private let state = Locked<(loggedAt: Double, unlogged: Int)>((-.infinity, 0))

    init(log: @escaping @Sendable (String) -> Void, clock: any ProxyClock) {
        self.log = log
        self.clock = clock
    }

    func report(_ description: String) {
        count.add(1, ordering: .relaxed)
        let now = clock.monotonic
        let line = state.withLock { s -> String? in
            guard now - s.loggedAt >= DamageReports.logInterval else {
                s.unlogged += 1
                return nil
            }
            let earlier = s.unlogged
            s = (now, 0)
            return earlier == 0 ? description : "\(description) (and \(earlier) more damaged entries since the last report)"
        }
        if let line { log(line) }
    }
}
