@preconcurrency import CLibevent
import Glibc
import Locking

/// One libevent `event_base`, owned by one thread. Everything created on a loop (streams, timers,
/// listeners) must be used on that loop's thread only; other threads talk to it through `execute`.
///
/// The base is created with `EVENT_BASE_FLAG_NOLOCK`: libevent's own locking costs about 10 % per
/// request, and thread confinement makes it unnecessary.
public final class EventLoop: @unchecked Sendable {
    let base: OpaquePointer
    private let mailbox: Mailbox
    private var mailboxEvent: OpaquePointer?
    /// What `monotonicNow` reads, for the deadlines and timeouts run on this loop: the worker's
    /// clock (`ProxyClock`), never the system's directly.
    public let clock: any ProxyClock

    public init(clock: any ProxyClock = SystemClock.shared) {
        self.clock = clock
        let cfg = event_config_new()
        event_config_set_flag(cfg, Int32(EVENT_BASE_FLAG_NOLOCK.rawValue))
        guard let b = event_base_new_with_config(cfg) else { fatalError("event_base_new_with_config failed") }
        event_config_free(cfg)
        base = b
        mailbox = Mailbox()
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        mailboxEvent = event_new(base, mailbox.fd, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            Unmanaged<EventLoop>.fromOpaque(arg!).takeUnretainedValue().drainMailbox()
        }, ctx)
        event_add(mailboxEvent, nil)
    }

    deinit {
        if let e = mailboxEvent { event_free(e) }
        event_base_free(base)
    }

    /// Runs `job` on this loop's thread, soon. Safe from any thread.
    public func execute(_ job: @escaping @Sendable () -> Void) {
        mailbox.post(job)
    }

    /// Dispatches events until `stop()` is called on this loop's thread.
    public func run() {
        event_base_loop(base, 0)
    }

    /// Makes `run()` return after the current callback. Call on the loop's thread (or through `execute`).
    public func stop() {
        event_base_loopbreak(base)
    }

    /// Wall-clock seconds, from the loop's cached time (no syscall): it moves when the system
    /// clock is set, so not for deadlines (`monotonicNow`). Cached as each pass over the ready
    /// events begins, it also tells passes apart (two begun within a microsecond share it).
    public var now: Double {
        var tv = timeval()
        event_base_gettimeofday_cached(base, &tv)
        return Double(tv.tv_sec) + Double(tv.tv_usec) / 1_000_000
    }

    /// Seconds on the loop's monotonic clock (`clock.monotonic`: not set with the date; the
    /// system's is read through the vDSO, no syscall).
    public var monotonicNow: Double { clock.monotonic }

    private func drainMailbox() {
        for job in mailbox.take() { job() }
    }
}

/// A mutex-protected job queue woken through an eventfd, so NOLOCK bases can receive work.
final class Mailbox: Sendable {
    let fd: Int32
    private let jobs = Locked<[@Sendable () -> Void]>([])

    init() {
        fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        precondition(fd >= 0, "eventfd failed")
    }

    deinit { close(fd) }

    func post(_ job: @escaping @Sendable () -> Void) {
        let wasEmpty = jobs.withLock { list in
            list.append(job)
            return list.count == 1
        }
        if wasEmpty {
            var one: UInt64 = 1
            _ = write(fd, &one, 8)
        }
    }

    func take() -> [@Sendable () -> Void] {
        var counter: UInt64 = 0
        _ = read(fd, &counter, 8)
        return jobs.withLock { list in
            let out = list
            list.removeAll()
            return out
        }
    }
}
