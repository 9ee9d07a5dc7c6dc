import Glibc

/// A counting semaphore over a heap-allocated `sem_t` (its address must not move).
public final class Semaphore: @unchecked Sendable {
    private let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    public init() { sem_init(sem, 0, 0) }

    deinit {
        sem_destroy(sem)
        sem.deallocate()
    }

    public func signal() { sem_post(sem) }

    /// Waits for one signal; a signal handler interrupting the wait does not end it.
    public func wait() { while sem_wait(sem) != 0 && errno == EINTR {} }

    /// Waits at most `seconds`; false on timeout.
    public func wait(seconds: Double) -> Bool {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let ns = Int(ts.tv_nsec) + Int(seconds * 1e9)
        ts.tv_sec += ns / 1_000_000_000
        ts.tv_nsec = ns % 1_000_000_000
        while true {
            if sem_timedwait(sem, &ts) == 0 { return true }
            if errno != EINTR { return false }
        }
    }
}
