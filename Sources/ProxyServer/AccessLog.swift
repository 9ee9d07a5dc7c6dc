import EventLoop
import Glibc
import Locking
import Synchronization

/// The access log: one line per request, in the combined log format with the cache result and the
/// time taken appended, or as JSON. Workers format lines into their own buffer (no locks, no
/// syscalls per request) and hand full buffers, or whatever they have once a second, to one
/// writer thread. SIGUSR1 makes the writer reopen the file, for rotation.
final class AccessLog: Sendable {
    enum Format: Sendable { case combined, json }

    let format: Format
    /// nil: standard output.
    private let path: String?
    private struct State {
        var queue: [[UInt8]] = []
        var reopen = false
        var stopping = false
    }
    private let state = Locked(State())
    private let wake = AccessLogSignal()
    private let thread: LoopThread
    private let fd = Atomic<Int32>(-1)

    /// Opens the destination; throws a message when the file cannot be opened.
    init(path: String?, format: Format) throws(AccessLogError) {
        self.path = path
        self.format = format
        let opened = try AccessLog.open(path)
        fd.store(opened, ordering: .relaxed)
        let box = AccessLogRunner()
        thread = LoopThread { box.log?.run() }
        box.log = self
        thread.start()
    }

    private static func open(_ path: String?) throws(AccessLogError) -> Int32 {
        guard let path else { return 1 }
        let f = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard f >= 0 else { throw AccessLogError(message: "cannot open access log \(path): \(String(cString: strerror(errno)))") }
        return f
    }

    /// A worker's full buffer (or its once-a-second remainder).
    func submit(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        state.withLock { $0.queue.append(bytes) }
        wake.signal()
    }

    /// SIGUSR1: write to a freshly opened file from now on.
    func reopen() {
        state.withLock { $0.reopen = true }
        wake.signal()
    }

    /// Writes what is queued, then stops the thread.
    func close() {
        state.withLock { $0.stopping = true }
        wake.signal()
        thread.join()
        let f = fd.load(ordering: .relaxed)
        if f > 2 { Glibc.close(f) }
    }

    private func run() {
        while true {
            wake.wait()
            let (batch, reopen, stopping) = state.withLock { s -> ([[UInt8]], Bool, Bool) in
                let out = (s.queue, s.reopen, s.stopping)
                s.queue.removeAll()
                s.reopen = false
                return out
            }
            if reopen, path != nil {
                do {
                    let fresh = try AccessLog.open(path)
                    let old = fd.exchange(fresh, ordering: .relaxed)
                    if old > 2 { Glibc.close(old) }
                } catch {
                    writeAll(2, Array("larder: \(error.message); still writing to the old file\n".utf8))
                }
            }
            let f = fd.load(ordering: .relaxed)
            for bytes in batch { writeAll(f, bytes) }
            if stopping { return }
        }
    }

    private func writeAll(_ f: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(f, raw.baseAddress! + offset, raw.count - offset)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { return }  // a full disk or a closed pipe must not stop the proxy
                offset += n
            }
        }
    }
}

struct AccessLogError: Error {
    let message: String
}

/// Lets the writer thread reach the log it belongs to without a retain cycle at init.
private final class AccessLogRunner: @unchecked Sendable {
    weak var log: AccessLog?
}

/// A binary wake-up for the writer thread (a semaphore that coalesces posts).
private final class AccessLogSignal: @unchecked Sendable {
    private let posted = Atomic<Bool>(false)
    private let sem = Semaphore()
    func signal() {
        if !posted.exchange(true, ordering: .acquiringAndReleasing) { sem.signal() }
    }
    func wait() {
        sem.wait()
        posted.store(false, ordering: .releasing)
    }
}
