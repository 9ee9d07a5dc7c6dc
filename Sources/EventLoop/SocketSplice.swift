@preconcurrency import CLibevent
import Glibc
import Synchronization

/// Moves bytes from one connected socket to another with splice(2) through a pipe, so they never
/// pass through user space (a tunnel's bulk direction). One direction; the sockets stay the
/// caller's: `close()` frees the events and the pipe, not them.
///
/// Back-pressure: the source is read only while the pipe is empty, and while the destination is
/// full only the destination is watched, so at most one pipe's worth waits here.
public final class SocketSplice {
    public enum End: Sendable, Equatable {
        /// The source's end of stream was relayed: all written, the destination's sending side shut down.
        case finished
        /// A socket failed (errno).
        case failed(Int32)
        /// splice(2) does not work on these sockets (ENOSYS or EINVAL at the first call); nothing moved.
        case unsupported
    }

    /// Pipe capacity asked for: fewer calls per MiB than the default 64 KiB. The pages are held
    /// only while bytes wait in the pipe; a refusal (the per-user pipe limit) leaves the default.
    /// A quarter of the largest pipe: as fast within a few per cent, and four times as many pipes
    /// fit under the per-user limit of a Larder not running as root (64 MiB by default).
    public static let pipeCapacity = 256 * 1024
    /// Pipes open at once in the process (two descriptors each): beyond this, bulk directions copy
    /// through user space, so spliced tunnels cannot use up the descriptors accept and connect need.
    /// At most 512, fewer where the open-files limit is low (`setMaximumPipes`, at start).
    static var maximumPipes: Int { pipeLimit.load(ordering: .relaxed) }
    private static let pipeLimit = Atomic<Int>(512)
    private static let openPipes = Atomic<Int>(0)

    /// The process's share of descriptors for pipes (before any tunnel runs).
    public static func setMaximumPipes(_ count: Int) {
        pipeLimit.store(max(0, min(512, count)), ordering: .relaxed)
    }
    private var holdsPipeSlot = false
    /// A pipe smaller than this (the default is 64 KiB) is not worth splicing through.
    static let smallestUsefulPipe: Int32 = 64 * 1024
    /// Source reads per callback, so one busy tunnel cannot hold the loop for long.
    static let readsPerCallback = 4

    /// Bytes taken from the source.
    public private(set) var bytes = 0
    private let source: Int32
    private let destination: Int32
    private var pipeRead: Int32 = -1
    private var pipeWrite: Int32 = -1
    /// Bytes read into the pipe and not yet written out.
    private var inPipe = 0
    private var sourceEnded = false
    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    private var readArmed = false
    private var writeArmed = false
    private var onEnd: ((End) -> Void)?

    /// nil when no pipe can be made (ENOSYS, or out of descriptors): the caller relays another way.
    public init?(loop: EventLoop, from source: Int32, to destination: Int32, onEnd: @escaping (End) -> Void) {
        guard SocketSplice.openPipes.add(1, ordering: .relaxed).newValue <= SocketSplice.maximumPipes else {
            SocketSplice.openPipes.subtract(1, ordering: .relaxed)
            return nil
        }
        var fds: [Int32] = [-1, -1]
        guard pipe2(&fds, O_NONBLOCK | O_CLOEXEC) == 0 else {
            SocketSplice.openPipes.subtract(1, ordering: .relaxed)
            return nil
        }
        _ = fcntl(fds[1], larder_F_SETPIPE_SZ, Int32(SocketSplice.pipeCapacity))
        // Past the per-user pipe limit (fs.pipe-user-pages-soft, when not root) new pipes hold a
        // page or two: two calls per few KiB would cost more than copying through user space.
        guard fcntl(fds[1], larder_F_GETPIPE_SZ) >= SocketSplice.smallestUsefulPipe else {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
            SocketSplice.openPipes.subtract(1, ordering: .relaxed)
            return nil
        }
        holdsPipeSlot = true
        pipeRead = fds[0]
        pipeWrite = fds[1]
        self.source = source
        self.destination = destination
        self.onEnd = onEnd
        let me = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(loop.base, source, Int16(EV_READ | EV_PERSIST), SocketSplice.ready, me)
        writeEvent = event_new(loop.base, destination, Int16(EV_WRITE | EV_PERSIST), SocketSplice.ready, me)
    }

    deinit { close() }

    /// Starts watching the source. Nothing moves before the loop reports it readable, so no
    /// callback arrives from inside this call.
    public func start() {
        guard onEnd != nil else { return }
        armRead(true)
    }

    /// Frees the events and the pipe (bytes in it are lost); no callback follows. The sockets are
    /// left open.
    public func close() {
        onEnd = nil
        if let e = readEvent { event_free(e); readEvent = nil }
        if let e = writeEvent { event_free(e); writeEvent = nil }
        readArmed = false
        writeArmed = false
        if pipeRead >= 0 { Glibc.close(pipeRead); pipeRead = -1 }
        if pipeWrite >= 0 { Glibc.close(pipeWrite); pipeWrite = -1 }
        if holdsPipeSlot {
            holdsPipeSlot = false
            SocketSplice.openPipes.subtract(1, ordering: .relaxed)
        }
    }

    /// Pipes open now, in the whole process (tests).
    static var pipesOpen: Int { openPipes.load(ordering: .relaxed) }

    private func pump() {
        var reads = 0
        while onEnd != nil {
            // Empty the pipe first: reading more before it drains would hold more than a pipe's worth.
            while inPipe > 0 {
                let n = splice(pipeRead, nil, destination, nil, inPipe, larder_SPLICE_F_MOVE | larder_SPLICE_F_NONBLOCK)
                if n > 0 { inPipe -= n; continue }
                let e = n == 0 ? EPIPE : errno
                if e == EINTR { continue }
                if e == EAGAIN {
                    // The destination is full: wait for room, and leave the source unread meanwhile.
                    armRead(false)
                    armWrite(true)
                    return
                }
                return end(.failed(e))
            }
            armWrite(false)
            if sourceEnded {
                shutdown(destination, Int32(SHUT_WR))
                return end(.finished)
            }
            if reads == SocketSplice.readsPerCallback { armRead(true); return }
            reads += 1
            let n = splice(source, nil, pipeWrite, nil, SocketSplice.pipeCapacity,
                           larder_SPLICE_F_MOVE | larder_SPLICE_F_NONBLOCK)
            if n > 0 {
                inPipe += n
                bytes += n
            } else if n == 0 {
                sourceEnded = true
            } else {
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN { armRead(true); return }
                if (e == ENOSYS || e == EINVAL), bytes == 0 { return end(.unsupported) }
                return end(.failed(e))
            }
        }
    }

    private func end(_ how: End) {
        let report = onEnd
        close()
        report?(how)
    }

    private func armRead(_ on: Bool) {
        guard on != readArmed, let e = readEvent else { return }
        readArmed = on
        if on { event_add(e, nil) } else { event_del(e) }
    }

    private func armWrite(_ on: Bool) {
        guard on != writeArmed, let e = writeEvent else { return }
        writeArmed = on
        if on { event_add(e, nil) } else { event_del(e) }
    }

    private static let ready: event_callback_fn = { _, _, arg in
        let s = Unmanaged<SocketSplice>.fromOpaque(arg!).takeUnretainedValue()
        withExtendedLifetime(s) { s.pump() }
    }
}
