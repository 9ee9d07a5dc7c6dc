@preconcurrency import CLibevent
import Glibc

/// A plain socket under a `Stream`, driven directly (two events and two evbuffers) rather than by a
/// bufferevent, to spend three system calls per exchange instead of six: bytes are read with one
/// `recv` into reserved buffer space (no FIONREAD probe), output is written eagerly once the
/// current callbacks are done (no write event added and removed around every response), and a
/// paused reader stays registered until the socket actually reports something.
final class PlainTransport {
    /// Where callbacks go, unretained (a retain per callback shows in the instruction gates). Set
    /// by the stream as it wraps this transport; the stream owns it and frees its events before
    /// it goes away, so it is there for every callback.
    var owner: Unmanaged<Stream>?
    let input: Buffer
    let output: Buffer
    /// -1 once closed or handed over (`releaseSocket`).
    private(set) var socket: Int32
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
    private var readChunk = PlainTransport.smallestRead
    private var shutdownWhenFlushed = false
    private var closed = false

    static let smallestRead = 4_096
    static let largestRead = 256 * 1024

    /// Unsent bytes a plain TCP stream may leave queued in the kernel before the socket takes no
    /// more and stops reporting writable (TCP_NOTSENT_LOWAT). Left alone, send buffers autotune to
    /// megabytes per socket: with many clients reading large bodies that queue outgrows every
    /// cache, and each copy into it runs at memory speed (4 MiB hits to 1,024 clients: about 1.6×
    /// the CPU per response). What the kernel does not take waits in `output`.
    static let unsentLimit: Int32 = 128 * 1024

    /// Bytes a peer must acknowledge per write timeout to count as reading: one that takes a few
    /// bytes a minute would otherwise hold its connection, buffers and pinned body for ever.
    static let minimumProgress = 16 * 1024

    /// Wraps an accepted (non-blocking) socket.
    convenience init(loop: EventLoop, acceptedSocket fd: Int32) {
        self.init(loop: loop, socket: fd)
        SocketOptions.setNoDelay(fd)
        SocketOptions.limitUnsent(fd, to: PlainTransport.unsentLimit)
    }

    private init(loop: EventLoop, socket fd: Int32) {
        socket = fd
        SocketOptions.keepUrgentDataInline(fd)
        input = Buffer(evbuffer_new()!)
        output = Buffer(evbuffer_new()!)
        let me = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(loop.base, fd, Int16(EV_READ | EV_PERSIST), PlainTransport.socketReadable, me)
        writeEvent = event_new(loop.base, fd, Int16(EV_WRITE | EV_PERSIST), PlainTransport.socketWritable, me)
        outputWatch = evbuffer_add_cb(output.raw, PlainTransport.outputChanged, me)
    }

    /// Starts a non-blocking TCP connection; the socket turning writable completes it.
    static func connect(loop: EventLoop, to address: SocketAddress) -> Result<PlainTransport, StreamConnectError> {
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
            let transport = PlainTransport(loop: loop, socket: fd)
            transport.connecting = true
            transport.armWrite()   // writable once connected
            return .success(transport)
        }
    }

    func enableReading() {
        guard !closed else { return }
        readWanted = true
        if readArmed {
            // Still registered from before a lazy disable: restart its inactivity clock.
            if var t = readTimeout { event_add(readEvent, &t) }
        } else if !readPaused, !connecting {
            armRead()
        }
    }

    /// The socket stays registered until it next reports readiness (then it is removed), so a
    /// request–response turn costs no registration changes.
    func disableReading() {
        readWanted = false
    }

    var isReading: Bool { readWanted }

    func setTimeouts(read: timeval?, write: timeval?) {
        guard !closed else { return }
        readTimeout = read
        writeTimeout = write
        if readArmed { PlainTransport.retime(readEvent, readTimeout, timed: &readTimed) }
        if writeArmed {
            PlainTransport.retime(writeEvent, writeTimeout, timed: &writeTimed)
            noteQueued()
        }
    }

    func setWriteLowWatermark(_ bytes: Int) {
        writeLowWatermark = bytes
    }

    func setReadHighWatermark(_ bytes: Int) {
        readHighWatermark = bytes
    }

    /// The sending side is shut down once `output` is written out.
    func shutdownWriteOnceFlushed() {
        shutdownWhenFlushed = true
        writeLowWatermark = 0
    }

    /// A one-byte non-blocking peek: bytes still in the socket, its end of stream, or nothing.
    func unreadInSocket() -> Stream.UnreadInput {
        var byte: UInt8 = 0
        let n = recv(socket, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        if n > 0 { return .bytes }
        if n == 0 { return .endOfStream }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .nothing : .endOfStream
    }

    /// The descriptor stops being this transport's: `close` leaves it open.
    func releaseSocket() -> Int32 {
        let fd = socket
        socket = -1
        return fd
    }

    /// Frees the events, both buffers and the socket (unless released); no callback follows.
    func close() {
        guard !closed else { return }
        closed = true
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

    // MARK: Events

    private func armRead() {
        guard !readArmed else { return }
        readArmed = true
        readTimed = PlainTransport.add(readEvent, readTimeout)
    }

    private func disarmRead() {
        guard readArmed else { return }
        readArmed = false
        PlainTransport.remove(readEvent, timed: &readTimed)
    }

    private func armWrite() {
        guard !writeArmed else { return }
        writeArmed = true
        watchOutput(false)
        writeTimed = PlainTransport.add(writeEvent, writeTimeout)
    }

    private func disarmWrite() {
        guard writeArmed else { return }
        writeArmed = false
        PlainTransport.remove(writeEvent, timed: &writeTimed)
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

    private func watchOutput(_ on: Bool) {
        guard on != outputWatched else { return }
        outputWatched = on
        if on {
            _ = evbuffer_cb_set_flags(output.raw, outputWatch, UInt32(EVBUFFER_CB_ENABLED))
        } else {
            _ = evbuffer_cb_clear_flags(output.raw, outputWatch, UInt32(EVBUFFER_CB_ENABLED))
        }
    }

    /// Queued output is written once the callbacks now running return: the head and body of a
    /// response, appended separately, leave in one `writev`.
    private func scheduleFlush() {
        guard !flushQueued, !writeArmed, !connecting, !closed else { return }
        flushQueued = true
        watchOutput(false)
        event_active(writeEvent, EV_WRITE, 0)
    }

    // MARK: Reading

    private func pauseReading() {
        readPaused = true
        disarmRead()
        if inputWatch == nil {
            inputWatch = evbuffer_add_cb(input.raw, PlainTransport.inputChanged, Unmanaged.passUnretained(self).toOpaque())
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
            report(.timeout)
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
            report(.error(ENOMEM))
            return
        }
        let got = recv(socket, vec.iov_base, min(vec.iov_len, want), 0)
        if got > 0 {
            vec.iov_len = got
            evbuffer_commit_space(input.raw, &vec, 1)
            if got == want {
                readChunk = min(readChunk * 2, PlainTransport.largestRead)
            } else if got < PlainTransport.smallestRead {
                readChunk = PlainTransport.smallestRead
            }
            if readHighWatermark > 0, input.count >= readHighWatermark { pauseReading() }
            reportReadable()
        } else if got == 0 {
            readWanted = false
            disarmRead()
            report(.endOfStream)
        } else {
            let e = errno
            if e == EAGAIN || e == EINTR { return }
            readWanted = false
            disarmRead()
            report(.error(e))
        }
    }

    // MARK: Writing

    private func socketWritable(_ what: Int16) {
        flushQueued = false
        if Int32(what) & EV_TIMEOUT != 0 {
            // The socket stays full while a slow peer reads (`unsentLimit` keeps it so): the
            // timeout is for a peer that took less than `minimumProgress` since the last write
            // or look.
            if !connecting, let queued = SocketOptions.unacknowledgedBytes(socket) {
                if queued == 0 { return flush() }  // all taken, and the wake-up missed
                if queuedAfterWrite - queued >= PlainTransport.minimumProgress {
                    queuedAfterWrite = queued
                    return  // a persistent event: its timer runs again
                }
            }
            disarmWrite()
            watchOutput(true)
            report(.timeout)
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
                report(.error(failure))
                return
            }
            SocketOptions.setNoDelay(socket)
            SocketOptions.limitUnsent(socket, to: PlainTransport.unsentLimit)
            if readWanted, !readPaused { armRead() }
            report(.connected)
            guard !closed else { return }
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
                report(.error(e))
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
        if wrote, output.count <= writeLowWatermark { reportDrained() }
    }

    /// Output is left waiting for a full socket: the write timeout measures from here.
    private func noteQueued() {
        if writeTimeout != nil { queuedAfterWrite = SocketOptions.unacknowledgedBytes(socket) ?? 0 }
    }

    // The stream, called without a retain.
    private func reportReadable() { owner?._withUnsafeGuaranteedRef { $0.reportReadable() } }
    private func reportDrained() { owner?._withUnsafeGuaranteedRef { $0.reportDrained() } }
    private func report(_ event: StreamEvent) { owner?._withUnsafeGuaranteedRef { $0.report(event) } }

    // MARK: Callbacks from libevent

    /// The stream is held for the length of a callback: its delegate may drop the last reference
    /// to it, and so to this transport. Nothing else is retained.
    private static let socketReadable: event_callback_fn = { _, what, arg in
        Unmanaged<PlainTransport>.fromOpaque(arg!)._withUnsafeGuaranteedRef { t in
            withExtendedLifetime(t.owner?.takeUnretainedValue()) { t.socketReadable(what) }
        }
    }

    private static let socketWritable: event_callback_fn = { _, what, arg in
        Unmanaged<PlainTransport>.fromOpaque(arg!)._withUnsafeGuaranteedRef { t in
            withExtendedLifetime(t.owner?.takeUnretainedValue()) { t.socketWritable(what) }
        }
    }

    private static let outputChanged: evbuffer_cb_func = { _, info, arg in
        guard let info, info.pointee.n_added > 0 else { return }
        Unmanaged<PlainTransport>.fromOpaque(arg!)._withUnsafeGuaranteedRef { $0.scheduleFlush() }
    }

    private static let inputChanged: evbuffer_cb_func = { _, _, arg in
        Unmanaged<PlainTransport>.fromOpaque(arg!)._withUnsafeGuaranteedRef { $0.inputShrank() }
    }
}
