import CSignals
import Glibc

/// Larder's own signals (SIGTERM, SIGINT, SIGHUP, SIGUSR1), blocked in every thread and read by the
/// main thread from a signalfd.
///
/// Not sigwait: while a thread waits in sigwait the kernel lifts the waited-for signals from its
/// blocked mask. The Swift runtime's crash handler pauses every other thread with SIGUSR1 where the
/// mask lets it through, so sigwait took the pause as a log reopen and the handler retried for 30 s
/// before the process could die. Reading a signalfd leaves the mask alone: SIGUSR1 stays blocked,
/// and the crash handler pauses this thread with SIGUSR2 like the workers.
struct ControlSignals {
    static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGUSR1]
    private let fd: Int32

    /// Blocks the signals in the calling thread, which every thread started later inherits, and opens
    /// the signalfd. Call it before any other thread starts, or that thread could take them instead.
    init() {
        var mask = sigset_t()
        sigemptyset(&mask)
        for s in ControlSignals.handled { sigaddset(&mask, s) }
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        fd = signalfd(-1, &mask, Int32(SFD_CLOEXEC))
        precondition(fd >= 0, "signalfd failed: errno \(errno)")
    }

    /// Waits for the next of the signals and returns its number.
    func next() -> Int32 {
        var info = signalfd_siginfo()
        let size = MemoryLayout<signalfd_siginfo>.size
        while true {
            let n = read(fd, &info, size)
            if n == size { return Int32(bitPattern: info.ssi_signo) }
            // EINTR: a crash handler paused this thread; the process is ending anyway.
            precondition(n < 0 && errno == EINTR, "reading the signalfd failed: errno \(errno)")
        }
    }
}
