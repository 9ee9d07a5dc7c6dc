@preconcurrency import CLibevent
import COpenSSL
import Glibc

/// TLS under a `Stream`: an OpenSSL bufferevent, which owns the socket, both buffers and the
/// events. Made by `connectTLS`, `startTLS` and `acceptTLS`.
final class TLSTransport {
    /// Where callbacks go, unretained (a retain per callback shows in the instruction gates). Set
    /// by the stream as it wraps this transport; the stream owns it and frees the bufferevent
    /// before it goes away, so it is there for every callback.
    var owner: Unmanaged<Stream>?
    /// nil once closed.
    private(set) var bev: OpaquePointer?
    let input: Buffer
    let output: Buffer
    /// Output gathered for `sendStaged`, apart from `output`: bytes added to `output` make
    /// libevent arm a write event (a system call, and another when it is disarmed).
    let staged = Buffer(evbuffer_new()!)
    private var shutdownWhenFlushed = false

    /// Largest single read and write: bodies move in big slices, fewer syscalls per MiB.
    static let largestSlice = 256 * 1024

    init(_ bev: OpaquePointer) {
        self.bev = bev
        input = Buffer(bufferevent_get_input(bev))
        output = Buffer(bufferevent_get_output(bev))
        bufferevent_setcb(bev, TLSTransport.readCallback, TLSTransport.writeCallback, TLSTransport.eventCallback,
                          Unmanaged.passUnretained(self).toOpaque())
        bufferevent_set_max_single_read(bev, TLSTransport.largestSlice)
        bufferevent_set_max_single_write(bev, TLSTransport.largestSlice)
    }

    deinit { evbuffer_free(staged.raw) }

    var fileDescriptor: Int32 {
        guard let bev else { return -1 }
        return bufferevent_getfd(bev)
    }

    /// The connection's OpenSSL object, while open.
    var ssl: OpaquePointer? {
        guard let bev else { return nil }
        return bufferevent_openssl_get_ssl(bev)
    }

    /// Decrypted bytes OpenSSL holds that it has not handed over yet.
    var pendingBytes: Int32 {
        guard let ssl else { return 0 }
        return SSL_pending(ssl)
    }

    /// The last OpenSSL error queued for this connection (0: none); reading empties the queue.
    /// libevent queues entries of its own after OpenSSL's (the `SSL_get_error` code, an errno),
    /// which name no OpenSSL library and no reason: those are skipped, or a client's alert
    /// ("tlsv1 alert unknown ca") would be lost behind them.
    func lastOpenSSLError() -> UInt {
        guard let bev else { return 0 }
        var code = bufferevent_get_openssl_error(bev)
        var last: UInt = 0
        while code != 0 {
            if ERR_lib_error_string(code) != nil { last = code }
            code = bufferevent_get_openssl_error(bev)
        }
        return last
    }

    func enableReading() {
        guard let bev else { return }
        bufferevent_enable(bev, Int16(EV_READ))
    }

    func disableReading() {
        guard let bev else { return }
        bufferevent_disable(bev, Int16(EV_READ))
    }

    var isReading: Bool {
        guard let bev else { return false }
        return Int32(bufferevent_get_enabled(bev)) & EV_READ != 0
    }

    func setTimeouts(read: timeval?, write: timeval?) {
        guard let bev else { return }
        var r = read ?? timeval()
        var w = write ?? timeval()
        withUnsafePointer(to: &r) { rp in
            withUnsafePointer(to: &w) { wp in
                _ = bufferevent_set_timeouts(bev, read == nil ? nil : rp, write == nil ? nil : wp)
            }
        }
    }

    func setWriteLowWatermark(_ bytes: Int) {
        guard let bev else { return }
        bufferevent_setwatermark(bev, Int16(EV_WRITE), bytes, 0)
    }

    func setReadHighWatermark(_ bytes: Int) {
        guard let bev else { return }
        bufferevent_setwatermark(bev, Int16(EV_READ), 0, bytes)
    }

    /// The sending side is shut down once `output` is written out (the write callback, with the
    /// low-watermark at 0).
    func shutdownWriteOnceFlushed() {
        guard let bev else { return }
        shutdownWhenFlushed = true
        bufferevent_setwatermark(bev, Int16(EV_WRITE), 0, 0)
    }

    /// Set when a write made here did not go through (the socket was full, or the connection
    /// failed); cleared by libevent's write callback, once output is down to its low-water mark.
    private var socketFull = false

    /// Encrypts and sends `bytes` (a record at most) now, while they are still in the cache, after
    /// what is staged; or, when `output` holds bytes libevent has yet to write or the socket takes
    /// no more, appends them to `output`, for libevent to write with the rest. Whether they went
    /// out now.
    ///
    /// A write OpenSSL could not finish leaves its record pending inside OpenSSL, which must be
    /// retried from the same bytes and with at least as many: `bytes` go whole into an empty
    /// `output`, where libevent's next write passes them as its first segment.
    func sendNowOrQueue(_ bytes: UnsafeRawBufferPointer) -> Bool {
        sendStaged()
        if !socketFull, output.count == 0, let ssl, write(ssl, bytes) { return true }
        output.append(bytes)
        return false
    }

    /// Sends what is staged now, a record at a time, unless `output` holds bytes libevent has yet
    /// to write or the socket takes no more: what is not sent goes to `output`, for libevent. A
    /// record OpenSSL could not finish is at the front of the first segment moved there.
    func sendStaged() {
        guard bev != nil, staged.count > 0 else { return }
        if !socketFull, output.count == 0, let ssl {
            while staged.count > 0 {
                let n = min(staged.count, Stream.tlsRecord)
                guard staged.withContiguousPrefix(maxBytes: n, { write(ssl, $0) }) else { break }
                staged.drain(n)
            }
        }
        output.moveAll(from: staged)
    }

    /// Only once the handshake is done (libevent drives it), with `output` empty.
    private func write(_ ssl: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Bool {
        ERR_clear_error()
        let r = SSL_write(ssl, bytes.baseAddress, Int32(bytes.count))
        if r == Int32(bytes.count) { return true }
        // Blocked, or failed: either way the bytes go to `output`, and libevent's own write
        // finishes the record or meets the failure again, and reports it with its reason.
        ERR_clear_error()
        socketFull = true
        return false
    }

    /// Bytes read from and written to the socket (TLS records, the handshake included), as OpenSSL's
    /// socket BIO counts them; kept when the connection closes.
    var bytesCarried: (read: Int, written: Int) {
        guard let ssl else { return carriedAtClose }
        return (Int(BIO_number_read(SSL_get_rbio(ssl))), Int(BIO_number_written(SSL_get_wbio(ssl))))
    }
    private var carriedAtClose = (read: 0, written: 0)

    /// Frees the bufferevent, and with it the socket and the buffers; no callback follows.
    func close() {
        guard let b = bev else { return }
        carriedAtClose = bytesCarried
        staged.drain(staged.count)
        bev = nil
        bufferevent_setcb(b, nil, nil, nil, nil)
        bufferevent_free(b)
    }

    // The stream, called without a retain.
    private func reportReadable() { owner?._withUnsafeGuaranteedRef { $0.reportReadable() } }
    private func reportDrained() { owner?._withUnsafeGuaranteedRef { $0.reportDrained() } }
    private func report(_ event: StreamEvent) { owner?._withUnsafeGuaranteedRef { $0.report(event) } }

    // MARK: Callbacks from libevent

    /// Runs `body` with the stream held: its delegate may drop the last reference to it, and so
    /// to this transport.
    private static func withTransport(_ arg: UnsafeMutableRawPointer?, _ body: (TLSTransport) -> Void) {
        Unmanaged<TLSTransport>.fromOpaque(arg!)._withUnsafeGuaranteedRef { t in
            withExtendedLifetime(t.owner?.takeUnretainedValue()) { body(t) }
        }
    }

    private static let readCallback: bufferevent_data_cb = { _, arg in
        withTransport(arg) { $0.reportReadable() }
    }

    private static let writeCallback: bufferevent_data_cb = { bev, arg in
        withTransport(arg) { t in
            t.socketFull = false
            if t.shutdownWhenFlushed, t.output.count == 0, let bev {
                t.shutdownWhenFlushed = false
                shutdown(bufferevent_getfd(bev), Int32(SHUT_WR))
            }
            t.reportDrained()
        }
    }

    private static let eventCallback: bufferevent_event_cb = { _, what, arg in
        let failure = errno
        withTransport(arg) { t in
            let w = Int32(what)
            let event: StreamEvent
            if w & BEV_EVENT_CONNECTED != 0 {
                SocketOptions.setNoDelay(t.fileDescriptor)
                event = .connected
            } else if w & BEV_EVENT_TIMEOUT != 0 {
                event = .timeout
            } else if w & BEV_EVENT_EOF != 0 {
                event = .endOfStream
            } else {
                event = .error(failure)
            }
            t.report(event)
        }
    }
}
