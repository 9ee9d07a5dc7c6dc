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

/// A buffered socket, plain or TLS. Owned by one object on one loop; `close()` frees it, after
/// which no callback arrives.
///
/// Plain sockets are driven directly (two events and two evbuffers) rather than by a bufferevent,
/// to spend three system calls per exchange instead of six: bytes are read with one `recv` into
/// reserved buffer space (no FIONREAD probe), output is written eagerly once the current callbacks
/// are done (no write event added and removed around every response), and a paused reader stays
/// registered until the socket actually reports something. TLS streams are OpenSSL bufferevents.
public final class Stream {
    /// TLS streams only.
    private var bev: OpaquePointer?
    /// Plain streams only.
    private var socket: Int32 = -1
    private var readEvent: OpaquePointer?
    private var writeEvent: OpaquePointer?
    /// Schedules a flush when output is queued; switched off while one is pending anyway, because
    /// libevent calls it on every change of the buffer.
    private var outputWatch: OpaquePointer?
    private var outputWatched = true
    /// Exists only while reading is paused by the high-watermark.
    private var inputWatch: OpaquePointer?
    /// The owner wants bytes (`enableReading`).
    private var readWanted = false
    /// `readEvent` is registered with the loop (it may lag behind `readWanted` going false).
    private var readArmed = false
    /// Reading is suspended because `input` reached the read high-watermark.
    private var readPaused = false
    /// `writeEvent` is registered: waiting for the socket to accept more, or for a connection.
    private var writeArmed = false
    /// `writeEvent` was activated by hand to write what the current callbacks queued.
    private var flushQueued = false
    private var connecting = false
    private var readHighWatermark = 0
    private var writeLowWatermark = 0
    private var readTimeout: timeval?
    private var writeTimeout: timeval?
    /// What the peer had not acknowledged after the last partial write (`unacknowledgedBytes`):
    /// `minimumProgress` less of it when the write timeout expires means the peer is reading,
    /// only slowly.
    private var queuedAfterWrite = 0
    /// Whether the read (write) event was added with a timeout (`remove(_:timed:)`).
    private var readTimed = false
    private var writeTimed = false
    /// Bytes asked of one `recv`: grows while reads fill it, so bulk transfers take few calls and
    /// idle connections hold little.
    private var readChunk = Stream.smallestRead

    /// Strong on purpose: the owner breaks the cycle by `close()`, which clears it.
    public var delegate: (any StreamDelegate)?
    public let input: Buffer
    public let output: Buffer
    private var shutdownWhenFlushed = false
    public private(set) var isClosed = false
    /// Whether OpenSSL sits between this stream and its socket.
    public let isTLS: Bool

    static let smallestRead = 4_096
    static let largestRead = 256 * 1024

    /// Wraps an accepted (non-blocking) socket.
    public convenience init(loop: EventLoop, acceptedSocket fd: Int32) {
        self.init(loop: loop, socket: fd)
        Stream.setNoDelay(fd)
        Stream.limitUnsent(fd, to: Stream.unsentLimit)
    }

    private init(loop: EventLoop, socket fd: Int32) {
        isTLS = false
        socket = fd
        Stream.keepUrgentDataInline(fd)
        input = Buffer(evbuffer_new()!)
        output = Buffer(evbuffer_new()!)
        let me = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), Stream.socketReadable, me)
        writeEvent = event_new(loop.base, fd, Int16(EV_WRITE | EV_PERSIST), Stream.socketWritable, me)
        outputWatch = evbuffer_add_cb(output.raw, Stream.outputChanged, me)
    }

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
    public static func connect(loop: EventLoop, to address: SocketAddress) -> Result<Stream, StreamConnectError> {
        let opened: Result<Int32, StreamConnectError> = address.withSockaddr { sa, len in
            let fd = Glibc.socket(Int32(sa.pointee.sa_family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
                                  | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return .failure(StreamConnectError(errno: errno)) }
            if Glibc.connect(fd, sa, len) != 0, errno != EINPROGRESS {
                let e = errno
                Glibc.close(fd)
                return .failure(StreamConnectError(errno: e == 0 ? ECONNREFUSED : e))
            }
            return .success(fd)
        }
        switch opened {
        case .failure(let error):
            return .failure(error)
        case .success(let fd):
            let stream = Stream(loop: loop, socket: fd)
            stream.connecting = true
            stream.armWrite()   // writable once connected
            return .success(stream)
        }
    }

    deinit { close() }

    public var fileDescriptor: Int32 {
        if let b = bev { return bufferevent_getfd(b) }
        return socket
    }

    public func enableReading() {
        if let b = bev { bufferevent_enable(b, Int16(EV_READ)); return }
        guard !isClosed else { return }
        readWanted = true
        if readArmed {
            // Still registered from before a lazy disable: restart its inactivity clock.
            if var t = readTimeout { event_add(readEvent, &t) }
        } else if !readPaused, !connecting {
            armRead()
        }
    }

    /// Stops delivering bytes. A plain socket stays registered until it next reports readiness
    /// (then it is removed), so a request–response turn costs no registration changes.
    public func disableReading() {
        if let b = bev { bufferevent_disable(b, Int16(EV_READ)); return }
        readWanted = false
    }

    public var isReading: Bool {
        if let b = bev { return Int32(bufferevent_get_enabled(b)) & EV_READ != 0 }
        return readWanted
    }

    /// Read and write inactivity timeouts in seconds (nil: none). A timeout disables that direction
    /// and reports `.timeout`.
    public func setTimeouts(read: Double?, write: Double?) {
        if let b = bev {
            var r = timeval(seconds: read ?? 0)
            var w = timeval(seconds: write ?? 0)
            withUnsafePointer(to: &r) { rp in
                withUnsafePointer(to: &w) { wp in
                    _ = bufferevent_set_timeouts(b, read == nil ? nil : rp, write == nil ? nil : wp)
                }
            }
            return
        }
        guard !isClosed else { return }
        readTimeout = read.map { timeval(seconds: $0) }
        writeTimeout = write.map { timeval(seconds: $0) }
        if readArmed { Stream.retime(readEvent, readTimeout, timed: &readTimed) }
        if writeArmed {
            Stream.retime(writeEvent, writeTimeout, timed: &writeTimed)
            noteQueued()
        }
    }

    /// `streamDrained` fires when the output falls to `bytes` or fewer.
    public func setWriteLowWatermark(_ bytes: Int) {
        if let b = bev { bufferevent_setwatermark(b, Int16(EV_WRITE), bytes, 0); return }
        writeLowWatermark = bytes
    }

    /// Reading pauses by itself while `input` holds `bytes` or more, and resumes once it is drained
    /// below that: a bound on memory per connection whatever the peer sends.
    public func setReadHighWatermark(_ bytes: Int) {
        if let b = bev { bufferevent_setwatermark(b, Int16(EV_READ), 0, bytes); return }
        readHighWatermark = bytes
    }

    /// Half-close: once everything queued is written, shut down our sending side (the peer sees EOF),
    /// keep reading.
    public func shutdownWriteWhenFlushed() {
        guard !isClosed else { return }
        if output.count == 0 {
            shutdown(fileDescriptor, Int32(SHUT_WR))
        } else {
            shutdownWhenFlushed = true
            if let b = bev { bufferevent_setwatermark(b, Int16(EV_WRITE), 0, 0) } else { writeLowWatermark = 0 }
        }
    }

    /// Frees the socket now; unsent output is lost. No callback follows.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        if let b = bev {
            bev = nil
            bufferevent_setcb(b, nil, nil, nil, nil)
            bufferevent_free(b)
        } else {
            event_free(readEvent)
            event_free(writeEvent)
            readEvent = nil
            writeEvent = nil
            evbuffer_remove_cb_entry(output.raw, outputWatch)
            if let w = inputWatch { evbuffer_remove_cb_entry(input.raw, w) }
            evbuffer_free(input.raw)
            evbuffer_free(output.raw)
            if socket >= 0 { Glibc.close(socket) }
            socket = -1
        }
        delegate = nil
    }

    /// Hands the socket over (a CONNECT that is intercepted continues in TLS on it): the stream is
    /// closed without closing the descriptor, which becomes the caller's. Plain streams only;
    /// anything unread or unsent is dropped, so call it with both buffers empty.
    public func detachSocket() -> Int32? {
        guard !isClosed, bev == nil else { return nil }
        let fd = socket
        socket = -1
        close()
        return fd
    }

    /// What the peer sent that nobody has read yet: bytes in the input buffer or still in the socket,
    /// or its end of stream. A connection is reused only when there is nothing, so stray bytes after a
    /// complete message are never read as the next one (response desync). A plain socket costs one
    /// non-blocking peek; a TLS stream reports its buffers and OpenSSL's pending bytes.
    public var unreadInput: UnreadInput {
        if input.count > 0 { return .bytes }
        if isClosed { return .endOfStream }
        if let b = bev { return TLSClientContext.pendingBytes(b) > 0 ? .bytes : .nothing }
        var byte: UInt8 = 0
        let n = recv(socket, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if n > 0 { return .bytes }
        if n == 0 { return .endOfStream }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .nothing : .endOfStream
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
        var lin = linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fileDescriptor, SOL_SOCKET, SO_LINGER, &lin, socklen_t(MemoryLayout<linger>.size))
        close()
    }

    /// Unsent bytes a plain TCP stream may leave queued in the kernel before the socket takes no
    /// more and stops reporting writable (TCP_NOTSENT_LOWAT). Left alone, send buffers autotune to
    /// megabytes per socket: with many clients reading large bodies that queue outgrows every
    /// cache, and each copy into it runs at memory speed (4 MiB hits to 1,024 clients: about 1.6×
    /// the CPU per response). What the kernel does not take waits in `output`.
    public static let unsentLimit: Int32 = 128 * 1024

    /// TCP urgent data read as ordinary bytes (SO_OOBINLINE). Otherwise the kernel takes the urgent
    /// byte out of the stream and `recv` stops short in front of it: bytes an origin sends behind a
    /// complete response could hide from the unread-bytes check that decides whether its connection
    /// is reused, and a tunnel would lose the byte. Inline, the byte is there for the check to see.
    static func keepUrgentDataInline(_ fd: Int32) {
        guard fd >= 0 else { return }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    static func setNoDelay(_ fd: Int32) {
        guard fd >= 0 else { return }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bytes a peer must acknowledge per write timeout to count as reading: one that takes a few
    /// bytes a minute would otherwise hold its connection, buffers and pinned body for ever.
    public static let minimumProgress = 16 * 1024

    /// `unsentLimit` on a plain stream's socket; 0 puts back the system's default
    /// (`net.ipv4.tcp_notsent_lowat`, no limit unless changed) for a socket handed on to OpenSSL,
    /// whose streams time out writes without `unacknowledgedBytes`.
    static func limitUnsent(_ fd: Int32, to limit: Int32) {
        guard fd >= 0 else { return }
        var value = limit
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NOTSENT_LOWAT, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bytes written to `fd` that the peer has not acknowledged yet, sent or not (SIOCOUTQ); nil
    /// when the kernel does not say.
    static func unacknowledgedBytes(_ fd: Int32) -> Int? {
        var queued: Int32 = 0
        return ioctl(fd, UInt(TIOCOUTQ), &queued) == 0 ? Int(queued) : nil
    }

    // MARK: Plain sockets

    private func armRead() {
        guard !readArmed else { return }
        readArmed = true
        readTimed = Stream.add(readEvent, readTimeout)
    }

    private func disarmRead() {
        guard readArmed else { return }
        readArmed = false
        Stream.remove(readEvent, timed: &readTimed)
    }

    private func armWrite() {
        guard !writeArmed else { return }
        writeArmed = true
        watchOutput(false)
        writeTimed = Stream.add(writeEvent, writeTimeout)
    }

    private func disarmWrite() {
        guard writeArmed else { return }
        writeArmed = false
        Stream.remove(writeEvent, timed: &writeTimed)
    }

    /// Adds a persistent event, with its timeout if any; true when it has one.
    private static func add(_ event: OpaquePointer?, _ timeout: timeval?) -> Bool {
        guard var t = timeout else {
            event_add(event, nil)
            return false
        }
        event_add(event, &t)
        return true
    }

    /// `event_del` alone would leave a persistent event's timeout recorded in it, and libevent
    /// puts that timeout back whenever the event runs again: activated by hand (`scheduleFlush`),
    /// it would stay registered after its callback and fire on every turn of the loop; re-added
    /// without a timeout, it would still time out. The timer goes first, while it is pending
    /// (`event_remove_timer` forgets the timeout only then).
    private static func remove(_ event: OpaquePointer?, timed: inout Bool) {
        if timed {
            event_remove_timer(event)
            timed = false
        }
        event_del(event)
    }

    private func watchOutput(_ on: Bool) {
        guard on != outputWatched else { return }
        outputWatched = on
        if on {
            _ = evbuffer_cb_set_flags(output.raw, outputWatch, UInt32(EVBUFFER_CB_ENABLED))
        } else {
            _ = evbuffer_cb_clear_flags(output.raw, outputWatch, UInt32(EVBUFFER_CB_ENABLED))
        }
    }

    /// A new timeout for an event already added.
    private static func retime(_ event: OpaquePointer?, _ timeout: timeval?, timed: inout Bool) {
        if var t = timeout {
            event_add(event, &t)
            timed = true
        } else {
            event_remove_timer(event)
            timed = false
        }
    }

    /// Queued output is written once the callbacks now running return: the head and body of a
    /// response, appended separately, leave in one `writev`.
    private func scheduleFlush() {
        guard !flushQueued, !writeArmed, !connecting, !isClosed else { return }
        flushQueued = true
        watchOutput(false)
        event_active(writeEvent, EV_WRITE, 0)
    }

    private func pauseReading() {
        readPaused = true
        disarmRead()
        if inputWatch == nil {
            inputWatch = evbuffer_add_cb(input.raw, Stream.inputChanged, Unmanaged.passUnretained(self).toOpaque())
        }
    }

    private func inputShrank() {
        guard readPaused, input.count < readHighWatermark else { return }
        readPaused = false
        if let w = inputWatch {
            inputWatch = nil
            evbuffer_remove_cb_entry(input.raw, w)
        }
        if readWanted, !connecting { armRead() }
    }

    private func socketReadable(_ what: Int16) {
        if Int32(what) & EV_TIMEOUT != 0 {
            disarmRead()
            guard readWanted else { return }
            readWanted = false
            delegate?.stream(self, event: .timeout)
            return
        }
        guard readWanted else { disarmRead(); return }
        var want = readChunk
        if readHighWatermark > 0 {
            let room = readHighWatermark - input.count
            if room <= 0 { pauseReading(); return }
            want = min(want, room)
        }
        var vec = iovec()
        guard evbuffer_reserve_space(input.raw, want, &vec, 1) == 1 else {
            readWanted = false
            disarmRead()
            delegate?.stream(self, event: .error(ENOMEM))
            return
        }
        let got = recv(socket, vec.iov_base, min(vec.iov_len, want), 0)
        if got > 0 {
            vec.iov_len = got
            evbuffer_commit_space(input.raw, &vec, 1)
            if got == want { readChunk = min(readChunk * 2, Stream.largestRead) } else if got < Stream.smallestRead { readChunk = Stream.smallestRead }
            if readHighWatermark > 0, input.count >= readHighWatermark { pauseReading() }
            delegate?.streamReadable(self)
        } else if got == 0 {
            readWanted = false
            disarmRead()
            delegate?.stream(self, event: .endOfStream)
        } else {
            let e = errno
            if e == EAGAIN || e == EINTR { return }
            readWanted = false
            disarmRead()
            delegate?.stream(self, event: .error(e))
        }
    }

    private func socketWritable(_ what: Int16) {
        flushQueued = false
        if Int32(what) & EV_TIMEOUT != 0 {
            // The socket stays full while a slow peer reads (`unsentLimit` keeps it so): the
            // timeout is for a peer that took less than `minimumProgress` since the last write
            // or look.
            if !connecting, let queued = Stream.unacknowledgedBytes(socket) {
                if queued == 0 { return flush() }  // all taken, and the wake-up missed
                if queuedAfterWrite - queued >= Stream.minimumProgress {
                    queuedAfterWrite = queued
                    return  // a persistent event: its timer runs again
                }
            }
            disarmWrite()
            watchOutput(true)
            delegate?.stream(self, event: .timeout)
            return
        }
        if connecting {
            var failure: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(socket, SOL_SOCKET, SO_ERROR, &failure, &len) != 0 { failure = errno }
            connecting = false
            disarmWrite()
            watchOutput(true)
            if failure != 0 {
                delegate?.stream(self, event: .error(failure))
                return
            }
            Stream.setNoDelay(socket)
            Stream.limitUnsent(socket, to: Stream.unsentLimit)
            if readWanted, !readPaused { armRead() }
            delegate?.stream(self, event: .connected)
            guard !isClosed else { return }
        }
        flush()
    }

    private func flush() {
        var wrote = false
        if output.count > 0 {
            let n = evbuffer_write_atmost(output.raw, socket, -1)
            if n > 0 {
                wrote = true
            } else {
                let e = n == 0 ? EPIPE : errno
                if n < 0, e == EAGAIN || e == EINTR {
                    noteQueued()
                    armWrite()
                    return
                }
                disarmWrite()
                watchOutput(true)
                delegate?.stream(self, event: .error(e))
                return
            }
        }
        if output.count > 0 {
            noteQueued()
            armWrite()
        } else {
            disarmWrite()
            watchOutput(true)
            if shutdownWhenFlushed {
                shutdownWhenFlushed = false
                shutdown(socket, Int32(SHUT_WR))
            }
        }
        if wrote, output.count <= writeLowWatermark { delegate?.streamDrained(self) }
    }

    /// Output is left waiting for a full socket: the write timeout measures from here.
    private func noteQueued() {
        if writeTimeout != nil { queuedAfterWrite = Stream.unacknowledgedBytes(socket) ?? 0 }
    }

    private static let socketReadable: event_callback_fn = { _, what, arg in
        let s = Unmanaged<Stream>.fromOpaque(arg!).takeUnretainedValue()
        withExtendedLifetime(s) { s.socketReadable(what) }
    }

    private static let socketWritable: event_callback_fn = { _, what, arg in
        let s = Unmanaged<Stream>.fromOpaque(arg!).takeUnretainedValue()
        withExtendedLifetime(s) { s.socketWritable(what) }
    }

    private static let outputChanged: evbuffer_cb_func = { _, info, arg in
        guard let info, info.pointee.n_added > 0 else { return }
        Unmanaged<Stream>.fromOpaque(arg!).takeUnretainedValue().scheduleFlush()
    }

    private static let inputChanged: evbuffer_cb_func = { _, _, arg in
        Unmanaged<Stream>.fromOpaque(arg!).takeUnretainedValue().inputShrank()
    }

    // MARK: TLS (bufferevents)

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
            Stream.setNoDelay(s.fileDescriptor)
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
