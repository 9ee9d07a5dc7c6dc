@preconcurrency import CLibevent
import Glibc

/// What happened on a stream besides data.
public enum StreamEvent: Sendable, Equatable {
    /// An outgoing connection (and its TLS handshake, if any) completed.
    case connected
    /// The peer closed its side.
    case endOfStream
    /// A socket error (errno, 0 when unknown).
    case error(Int32)
    /// A read or write timeout set with `setTimeouts` expired.
    case timeout
}

/// Receives a stream's callbacks, on the stream's loop.
public protocol StreamDelegate: AnyObject {
    /// New bytes are in `stream.input`.
    func streamReadable(_ stream: Stream)
    /// `stream.output` fell to the write low-watermark (0 by default: everything written).
    func streamDrained(_ stream: Stream)
    func stream(_ stream: Stream, event: StreamEvent)
}

/// A buffered socket (libevent bufferevent), plain or TLS. Owned by one object on one loop;
/// `close()` frees it, after which no callback arrives.
public final class Stream {
    private var bev: OpaquePointer?
    /// Strong on purpose: the owner breaks the cycle by `close()`, which clears it.
    public var delegate: (any StreamDelegate)?
    public let input: Buffer
    public let output: Buffer
    private var shutdownWhenFlushed = false
    public private(set) var isClosed = false

    /// Wraps an accepted socket.
    public convenience init(loop: EventLoop, acceptedSocket fd: Int32) {
        self.init(bev: bufferevent_socket_new(loop.base, fd, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue))!)
        setNoDelay(fd)
    }

    /// Whether OpenSSL sits between this stream and its socket.
    public let isTLS: Bool

    var rawBufferevent: OpaquePointer? { bev }

    init(bev: OpaquePointer, isTLS: Bool = false) {
        self.bev = bev
        self.isTLS = isTLS
        input = Buffer(bufferevent_get_input(bev))
        output = Buffer(bufferevent_get_output(bev))
        bufferevent_setcb(bev, Stream.readCallback, Stream.writeCallback, Stream.eventCallback,
                          Unmanaged.passUnretained(self).toOpaque())
        // Large single reads and writes: bodies move in big slices, fewer syscalls per MiB.
        bufferevent_set_max_single_read(bev, 256 * 1024)
        bufferevent_set_max_single_write(bev, 256 * 1024)
    }

    /// Starts a non-blocking TCP connection; `.connected` or an error event follows.
    /// Returns nil when the connection fails at once (errno in `failure`).
    public static func connect(loop: EventLoop, to address: SocketAddress) -> Result<Stream, StreamConnectError> {
        guard let bev = bufferevent_socket_new(loop.base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            return .failure(StreamConnectError(errno: ENOMEM))
        }
        let stream = Stream(bev: bev)
        let rc = address.withSockaddr { sa, len in bufferevent_socket_connect(bev, sa, Int32(len)) }
        if rc != 0 {
            let e = errno
            stream.close()
            return .failure(StreamConnectError(errno: e == 0 ? ECONNREFUSED : e))
        }
        stream.setNoDelay(bufferevent_getfd(bev))
        return .success(stream)
    }

    deinit { close() }

    public var fileDescriptor: Int32 { bev.map { bufferevent_getfd($0) } ?? -1 }

    public func enableReading() { if let b = bev { bufferevent_enable(b, Int16(EV_READ)) } }
    public func disableReading() { if let b = bev { bufferevent_disable(b, Int16(EV_READ)) } }
    public var isReading: Bool { bev.map { Int32(bufferevent_get_enabled($0)) & EV_READ != 0 } ?? false }

    /// Read and write inactivity timeouts in seconds (nil: none). A timeout disables that direction
    /// and reports `.timeout`.
    public func setTimeouts(read: Double?, write: Double?) {
        guard let b = bev else { return }
        var r = timeval(seconds: read ?? 0)
        var w = timeval(seconds: write ?? 0)
        withUnsafePointer(to: &r) { rp in
            withUnsafePointer(to: &w) { wp in
                _ = bufferevent_set_timeouts(b, read == nil ? nil : rp, write == nil ? nil : wp)
            }
        }
    }

    /// `streamDrained` fires when the output falls to `bytes` or fewer.
    public func setWriteLowWatermark(_ bytes: Int) {
        if let b = bev { bufferevent_setwatermark(b, Int16(EV_WRITE), bytes, 0) }
    }

    /// Reading pauses by itself while `input` holds `bytes` or more, and resumes once it is drained
    /// below that: a bound on memory per connection whatever the peer sends.
    public func setReadHighWatermark(_ bytes: Int) {
        if let b = bev { bufferevent_setwatermark(b, Int16(EV_READ), 0, bytes) }
    }

    /// Half-close: once everything queued is written, shut down our sending side (the peer sees EOF),
    /// keep reading.
    public func shutdownWriteWhenFlushed() {
        guard let b = bev else { return }
        if output.count == 0 {
            shutdown(bufferevent_getfd(b), Int32(SHUT_WR))
        } else {
            shutdownWhenFlushed = true
            bufferevent_setwatermark(b, Int16(EV_WRITE), 0, 0)
        }
    }

    /// Frees the socket now; unsent output is lost. No callback follows.
    public func close() {
        guard let b = bev else { return }
        bev = nil
        isClosed = true
        bufferevent_setcb(b, nil, nil, nil, nil)
        bufferevent_free(b)
        delegate = nil
    }

    /// Aborts with a TCP reset instead of a clean FIN (a truncated response must not look complete).
    public func reset() {
        guard let b = bev else { return }
        var lin = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(bufferevent_getfd(b), SOL_SOCKET, SO_LINGER, &lin, socklen_t(MemoryLayout<linger>.size))
        close()
    }

    private func setNoDelay(_ fd: Int32) {
        guard fd >= 0 else { return }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    private static let readCallback: bufferevent_data_cb = { _, arg in
        let s = Unmanaged<Stream>.fromOpaque(arg!).takeUnretainedValue()
        s.delegate?.streamReadable(s)
    }

    private static let writeCallback: bufferevent_data_cb = { bev, arg in
        let s = Unmanaged<Stream>.fromOpaque(arg!).takeUnretainedValue()
        if s.shutdownWhenFlushed, s.output.count == 0, let bev {
            s.shutdownWhenFlushed = false
            shutdown(bufferevent_getfd(bev), Int32(SHUT_WR))
        }
        s.delegate?.streamDrained(s)
    }

    private static let eventCallback: bufferevent_event_cb = { _, what, arg in
        let s = Unmanaged<Stream>.fromOpaque(arg!).takeUnretainedValue()
        let w = Int32(what)
        let event: StreamEvent
        if w & BEV_EVENT_CONNECTED != 0 {
            s.setNoDelay(s.fileDescriptor)
            event = .connected
        } else if w & BEV_EVENT_TIMEOUT != 0 {
            event = .timeout
        } else if w & BEV_EVENT_EOF != 0 {
            event = .endOfStream
        } else {
            event = .error(errno)
        }
        s.delegate?.stream(s, event: event)
    }
}

public struct StreamConnectError: Error, Sendable {
    public let errno: Int32
    public var description: String { String(cString: strerror(errno)) }
}
