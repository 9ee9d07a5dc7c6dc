@preconcurrency import CLibevent
import Glibc

/// Tells when a socket has bytes to read (or was closed): for reading a little before a `Stream`
/// takes the socket over. The socket stays the owner's; `cancel()` stops the callbacks.
public final class SocketWatch {
    private var event: OpaquePointer?
    private let handler: () -> Void

    public init(loop: EventLoop, socket fd: Int32, _ handler: @escaping () -> Void) {
        self.handler = handler
        event = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            Unmanaged<SocketWatch>.fromOpaque(arg!).takeUnretainedValue().handler()
        }, Unmanaged.passUnretained(self).toOpaque())
        event_add(event, nil)
    }

    public func cancel() {
        if let e = event { event_free(e); event = nil }
    }

    deinit { cancel() }

    /// Copies up to `max` bytes waiting on `fd` without taking them. nil: the peer closed or the
    /// socket failed; empty: nothing yet.
    public static func peek(_ fd: Int32, max: Int) -> [UInt8]? {
        var buf = [UInt8](repeating: 0, count: max)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, max, Int32(MSG_PEEK)) }
        if n > 0 { return Array(buf.prefix(n)) }
        if n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return [] }
        return nil
    }

    /// Takes exactly `count` bytes already seen by `peek`; false if the socket gave fewer.
    public static func discard(_ fd: Int32, count: Int) -> Bool {
        guard count > 0 else { return true }
        var buf = [UInt8](repeating: 0, count: count)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, count, 0) }
        return n == count
    }
}
