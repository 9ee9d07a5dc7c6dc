@preconcurrency import CLibevent
import COpenSSL
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

/// A buffered socket, plain or TLS. Owned by one object on one loop; `close()` frees it, after
/// which no callback arrives.
///
/// The bytes move through one of two transports: a `PlainTransport` drives a socket directly, a
/// `TLSTransport` is an OpenSSL bufferevent. The stream holds the buffers and the delegate, and
/// passes each call to its transport with one switch (no dynamic dispatch on the hot path).
public final class Stream {
    /// Unretained, so that calls through it cost no reference counting (a retain and a release
    /// around each showed in the instruction gates); `transportOwner` keeps it alive.
    private enum Transport {
        case plain(Unmanaged<PlainTransport>)
        case tls(Unmanaged<TLSTransport>)
        /// An HTTP/2 stream's exchange: bytes to and from a peer in this process.
        case memory(Unmanaged<MemoryTransport>)
    }

    /// Fixed for the stream's life.
    private let transport: Transport
    /// Holds the transport that `transport` names without retaining it.
    private let transportOwner: AnyObject
    /// Strong on purpose: the owner breaks the cycle by `close()`, which clears it.
    public var delegate: (any StreamDelegate)?
    public let input: Buffer
    public let output: Buffer
    public private(set) var isClosed = false
    /// An in-memory stream's peer may note here which of its exchanges the stream serves now (an
    /// HTTP/2 stream's id; 0: none), to find it without a table.
    public var peerTag: Int32 = 0
    /// An in-memory stream's peer that moves whole pieces of its output to a socket rather than
    /// copying them sets here the size bodies queued by reference are cut into (0: left whole):
    /// moving part of a piece copies that part.
    public var referencePiece = 0

    /// Unsent bytes a plain TCP stream leaves queued in the kernel (`PlainTransport.unsentLimit`).
    public static let unsentLimit = PlainTransport.unsentLimit
    /// Bytes a peer must acknowledge per write timeout to count as reading
    /// (`PlainTransport.minimumProgress`).
    public static let minimumProgress = PlainTransport.minimumProgress

    /// Wraps an accepted (non-blocking) socket.
    public convenience init(loop: EventLoop, acceptedSocket fd: Int32) {
        self.init(PlainTransport(loop: loop, acceptedSocket: fd))
    }

    init(_ plain: PlainTransport) {
        transport = .plain(.passUnretained(plain))
        transportOwner = plain
        input = plain.input
        output = plain.output
        plain.owner = .passUnretained(self)
    }

    init(_ tls: TLSTransport) {
        transport = .tls(.passUnretained(tls))
        transportOwner = tls
        input = tls.input
        output = tls.output
        tls.owner = .passUnretained(self)
    }

    init(_ memory: MemoryTransport) {
        transport = .memory(.passUnretained(memory))
        transportOwner = memory
        input = memory.input
        output = memory.output
        memory.owner = .passUnretained(self)
    }

    /// A stream with no socket: `peer` fills its input and takes its output (`MemoryStreamPeer`).
    /// The stream holds its peer weakly, or with `holdingPeer` strongly: then the peer lives as
    /// long as the stream does (it must drop its own references to its streams as it closes), and
    /// no weak reference puts each retain of the peer on the slow path of a side table.
    public static func inMemory(loop: EventLoop, peer: any MemoryStreamPeer, holdingPeer: Bool = false) -> Stream {
        let transport = MemoryTransport(loop: loop)
        if holdingPeer { transport.heldPeer = peer } else { transport.weakPeer = peer }
        return Stream(transport)
    }

    /// Starts a non-blocking TCP connection; `.connected` or an error event follows.
    public static func connect(loop: EventLoop, to address: SocketAddress) -> Result<Stream, StreamConnectError> {
        PlainTransport.connect(loop: loop, to: address).map { Stream($0) }
    }

    deinit { close() }

    /// Calls the one of `plain`, `tls` and `memory` that fits the transport.
    @inline(__always)
    private func onTransport<R>(plain: (PlainTransport) -> R, tls: (TLSTransport) -> R,
                                memory: (MemoryTransport) -> R) -> R {
        switch transport {
        case .plain(let p): return p._withUnsafeGuaranteedRef(plain)
        case .tls(let t): return t._withUnsafeGuaranteedRef(tls)
        case .memory(let m): return m._withUnsafeGuaranteedRef(memory)
        }
    }

    /// Whether a socket is under this stream directly (splice(2) can move its bytes).
    public var isPlainSocket: Bool {
        if case .plain = transport { return true }
        return false
    }

    /// Whether this stream is one stream of a multiplexed connection (no socket of its own).
    public var isInMemory: Bool {
        if case .memory = transport { return true }
        return false
    }

    /// Over TLS, makes output small enough for one record one segment: libevent's TLS bufferevent
    /// calls `SSL_write` (a record, and a send) for each segment, so an answer's head and its body
    /// by reference would otherwise each be a record.
    /// Called once an answer (or a batch of frames) is queued, before the loop writes it.
    public func gatherForOneRecord() {
        guard case .tls = transport else { return }
        let n = output.count
        if n > 0, n <= Stream.tlsRecord { output.makeContiguous(n) }
    }

    /// Over TLS, encrypts and sends `bytes` (a record at most) now, after what is staged; appends
    /// them to `output` when that cannot be done now (another transport, bytes queued in `output`
    /// before them, a full socket). Whether they went out now. Bytes sent as they are made are
    /// read by OpenSSL from the cache; queued for the loop's next turn, from memory.
    public func sendNowOrQueue(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard case .tls(let t) = transport else {
            output.append(bytes)
            return false
        }
        return t._withUnsafeGuaranteedRef { $0.sendNowOrQueue(bytes) }
    }

    /// Where output gathered for `sendStaged` goes: over TLS a buffer apart from `output`, which
    /// libevent does not watch; for other transports `output` itself.
    public var stagedOutput: Buffer {
        guard case .tls(let t) = transport else { return output }
        return t._withUnsafeGuaranteedRef { $0.staged }
    }

    /// Over TLS, sends what is staged now, in records, or queues it in `output` behind what is
    /// there or when the socket takes no more. Called before the loop waits again: bytes staged
    /// at the end of a pass over the ready sockets leave together, after the reads.
    public func sendStaged() {
        guard case .tls(let t) = transport else { return }
        t._withUnsafeGuaranteedRef { $0.sendStaged() }
    }

    /// The most one TLS record carries.
    public static let tlsRecord = 16_384

    // MARK: The peer's side of an in-memory stream (no effect on others)

    /// Bytes for the stream's owner to read.
    public func peerAppend(_ bytes: UnsafeRawBufferPointer) {
        if case .memory(let m) = transport { m._withUnsafeGuaranteedRef { $0.peerAppend(bytes) } }
    }

    /// The peer drained `count` bytes of `output`.
    public func peerTook(_ count: Int) {
        if case .memory(let m) = transport { m._withUnsafeGuaranteedRef { $0.peerTook(count) } }
    }

    /// The peer sends nothing more (half-close): the owner hears `.endOfStream` after the rest.
    public func peerEnded() {
        if case .memory(let m) = transport { m._withUnsafeGuaranteedRef { $0.peerEnd() } }
    }

    /// The peer is gone: the owner hears an error, as from a reset socket.
    public func peerAborted() {
        if case .memory(let m) = transport { m._withUnsafeGuaranteedRef { $0.peerAborted() } }
    }

    /// Whether OpenSSL sits between this stream and its socket.
    public var isTLS: Bool {
        if case .tls = transport { return true }
        return false
    }

    /// The TLS transport, for what only it can tell (sessions, certificates, OpenSSL errors).
    var tls: TLSTransport? {
        if case .tls(let t) = transport { return t.takeUnretainedValue() }
        return nil
    }

    /// A TLS stream's bytes on the wire each way, records and handshake included, also once it
    /// is closed; nil for a plain stream.
    public var tlsBytesCarried: (fromPeer: Int, toPeer: Int)? {
        guard let t = tls else { return nil }
        let carried = t.bytesCarried
        return (carried.read, carried.written)
    }

    /// The TLS handshake chose `h2` by ALPN.
    public var negotiatedH2: Bool {
        guard let ssl = tls?.ssl else { return false }
        var name: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &name, &length)
        guard let name, length == 2 else { return false }
        return name[0] == UInt8(ascii: "h") && name[1] == UInt8(ascii: "2")
    }

    public var fileDescriptor: Int32 {
        onTransport(plain: { $0.socket }, tls: { $0.fileDescriptor }, memory: { _ in -1 })
    }

    public func enableReading() {
        guard !isClosed else { return }
        onTransport(plain: { $0.enableReading() }, tls: { $0.enableReading() }, memory: { $0.enableReading() })
    }

    /// Stops delivering bytes. A plain socket stays registered until it next reports readiness
    /// (then it is removed), so a request–response turn costs no registration changes.
    public func disableReading() {
        onTransport(plain: { $0.disableReading() }, tls: { $0.disableReading() }, memory: { $0.disableReading() })
    }

    public var isReading: Bool {
        onTransport(plain: { $0.isReading }, tls: { $0.isReading }, memory: { $0.isReading })
    }

    /// Read and write inactivity timeouts in seconds (nil: none). A timeout disables that direction
    /// and reports `.timeout`.
    public func setTimeouts(read: Double?, write: Double?) {
        guard !isClosed else { return }
        let r = read.map { timeval(seconds: $0) }
        let w = write.map { timeval(seconds: $0) }
        onTransport(plain: { $0.setTimeouts(read: r, write: w) }, tls: { $0.setTimeouts(read: r, write: w) },
                    memory: { $0.setTimeouts(read: read, write: write) })
    }

    /// `streamDrained` fires when the output falls to `bytes` or fewer.
    public func setWriteLowWatermark(_ bytes: Int) {
        onTransport(plain: { $0.setWriteLowWatermark(bytes) }, tls: { $0.setWriteLowWatermark(bytes) },
                    memory: { $0.setWriteLowWatermark(bytes) })
    }

    /// Reading pauses by itself while `input` holds `bytes` or more, and resumes once it is drained
    /// below that: a bound on memory per connection whatever the peer sends.
    public func setReadHighWatermark(_ bytes: Int) {
        // An in-memory stream's input is bounded by its peer (HTTP/2 windows).
        onTransport(plain: { $0.setReadHighWatermark(bytes) }, tls: { $0.setReadHighWatermark(bytes) }, memory: { _ in })
    }

    /// Half-close: once everything queued is written, shut down our sending side (the peer sees EOF),
    /// keep reading.
    public func shutdownWriteWhenFlushed() {
        guard !isClosed else { return }
        if case .memory(let m) = transport {
            m._withUnsafeGuaranteedRef { $0.shutdownWriteOnceFlushed() }
            return
        }
        if output.count == 0 {
            shutdown(fileDescriptor, Int32(SHUT_WR))
            return
        }
        onTransport(plain: { $0.shutdownWriteOnceFlushed() }, tls: { $0.shutdownWriteOnceFlushed() }, memory: { _ in })
    }

    /// Frees the socket now; unsent output is lost. No callback follows.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        onTransport(plain: { $0.close() }, tls: { $0.close() }, memory: { $0.close(reset: false) })
        delegate = nil
    }

    /// Hands the socket over (a CONNECT that is intercepted continues in TLS on it): the stream is
    /// closed without closing the descriptor, which becomes the caller's. Plain streams only;
    /// anything unread or unsent is dropped, so call it with both buffers empty.
    public func detachSocket() -> Int32? {
        guard !isClosed, case .plain(let p) = transport else { return nil }
        let fd = p._withUnsafeGuaranteedRef { $0.releaseSocket() }
        close()
        return fd
    }

    /// What the peer sent that nobody has read yet: bytes in the input buffer or still in the socket,
    /// or its end of stream. A connection is reused only when there is nothing, so stray bytes after a
    /// complete message are never read as the next one (response desync). A plain socket costs one
    /// non-blocking peek; a TLS stream reports its buffers and OpenSSL's pending bytes.
    public var unreadInput: UnreadInput {
        // Closed first: the buffers are freed with the transport.
        if isClosed { return .endOfStream }
        if input.count > 0 { return .bytes }
        return onTransport(plain: { $0.unreadInSocket() }, tls: { $0.pendingBytes > 0 ? .bytes : .nothing },
                           memory: { $0.unread })
    }

    public enum UnreadInput: Sendable, Equatable {
        case nothing
        /// Bytes nobody asked for: the connection's framing cannot be trusted.
        case bytes
        /// The peer closed (or the socket failed): not reusable, nothing wrong with it.
        case endOfStream
    }

    /// Aborts with a TCP reset instead of a clean FIN (a truncated response must not look complete).
    public func reset() {
        guard !isClosed else { return }
        if case .memory(let m) = transport {
            // The peer resets its stream (RST_STREAM): a cut answer never looks complete.
            isClosed = true
            m._withUnsafeGuaranteedRef { $0.close(reset: true) }
            delegate = nil
            return
        }
        var lin = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fileDescriptor, SOL_SOCKET, SO_LINGER, &lin, socklen_t(MemoryLayout<linger>.size))
        close()
    }

    // MARK: From the transports

    func reportReadable() { delegate?.streamReadable(self) }
    func reportDrained() { delegate?.streamDrained(self) }
    func report(_ event: StreamEvent) { delegate?.stream(self, event: event) }
}

public struct StreamConnectError: Error, Sendable {
    public let errno: Int32
    public var description: String { String(cString: strerror(errno)) }
}
