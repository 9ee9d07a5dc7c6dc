import CH2Memory
import CNghttp2
import Glibc

/// What an HTTP/2 connection to clients allows; each is a configuration key (`http2.*`).
public struct H2Settings: Sendable, Equatable {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    public var maxConcurrentStreams: Int
    /// Request-body bytes a stream may send before Larder has taken them (per-stream window).
    public var streamWindow: Int
    /// Request-body bytes all streams of a connection may have in flight (connection window).
    public var connectionWindow: Int
    /// The largest header list a request may carry, decoded (SETTINGS_MAX_HEADER_LIST_SIZE).
    public var maxHeaderListSize: Int

    public init(maxConcurrentStreams: Int = 100, streamWindow: Int = 256 * 1024, connectionWindow: Int = 1 << 20,
                maxHeaderListSize: Int = 64 * 1024) {
        self.maxConcurrentStreams = maxConcurrentStreams
        self.streamWindow = streamWindow
        self.connectionWindow = connectionWindow
        self.maxHeaderListSize = maxHeaderListSize
    }
}

/// A request's header block as nghttp2 delivered it: already checked against RFC 9113 (pseudo-header
/// fields first, once each and known; names lower case tokens; values free of CR, LF and NUL and of
/// leading or trailing white space; no connection-specific fields; `te` only `trailers`;
/// `content-length` a number that the DATA frames will have to match).
///
/// One buffer holds it all: the fields' names and values, and the pseudo-header fields' values
/// beside them (an array for each of those cost more to empty and fill than the rest of reading
/// the block).
public struct H2RequestHead: Sendable, Equatable {
    /// Regular fields, in order. Changed only through the head (`appendField`, `removeFields`):
    /// a list put in its place would take the pseudo-header values' bytes with it.
    public internal(set) var fields = H2Fields(byteCapacity: 256, fieldCapacity: 8)
    @usableFromInline var methodRange = 0..<0
    @usableFromInline var schemeRange = 0..<0
    @usableFromInline var authorityRange = 0..<0
    @usableFromInline var pathRange = 0..<0
    @usableFromInline var protocolRange = 0..<0

    public init() {}

    // Copies, for tests and the seldom paths; the hot path reads them in place (`withPseudoHeaders`).
    public var method: [UInt8] {
        get { Array(fields.bytes[methodRange]) }
        set { set(.method, newValue) }
    }
    public var scheme: [UInt8] {
        get { Array(fields.bytes[schemeRange]) }
        set { set(.scheme, newValue) }
    }
    public var authority: [UInt8] {
        get { Array(fields.bytes[authorityRange]) }
        set { set(.authority, newValue) }
    }
    public var path: [UInt8] {
        get { Array(fields.bytes[pathRange]) }
        set { set(.path, newValue) }
    }
    /// `:protocol` of an extended CONNECT (RFC 8441).
    public var `protocol`: [UInt8] {
        get { Array(fields.bytes[protocolRange]) }
        set { set(.protocol, newValue) }
    }

    public mutating func appendField(name: some Collection<UInt8>, value: some Collection<UInt8>) {
        fields.append(name: name, value: value)
    }

    /// Removes the fields called `name`.
    public mutating func removeFields(named name: [UInt8]) {
        for i in fields.spans.indices.reversed() where fields.nameIs(i, name) { fields.remove(at: i) }
    }

    /// The pseudo-header fields' values where they lie, and the buffer the fields' names and
    /// values lie in too, valid inside `body`.
    /// (Inlinable, so that it is specialized where it is called: a generic closure per request
    /// cost more than the arrays it replaced.)
    @inlinable
    public func withPseudoHeaders<R>(_ body: (H2PseudoHeaders) -> R) -> R {
        fields.withBytesAndSpans { all, spans in
            @inline(__always) func at(_ r: Range<Int>) -> UnsafeRawBufferPointer {
                r.isEmpty ? UnsafeRawBufferPointer(start: nil, count: 0) : UnsafeRawBufferPointer(rebasing: all[r])
            }
            return body(H2PseudoHeaders(method: at(methodRange), scheme: at(schemeRange), authority: at(authorityRange),
                                        path: at(pathRange), protocol: at(protocolRange), bytes: all, spans: spans))
        }
    }

    /// Empties the head, keeping its buffers.
    mutating func removeAll() {
        fields.removeAll()
        methodRange = 0..<0
        schemeRange = 0..<0
        authorityRange = 0..<0
        pathRange = 0..<0
        protocolRange = 0..<0
    }

    enum Pseudo { case method, scheme, authority, path, `protocol` }

    /// A pseudo-header field's value, appended to the buffer (nghttp2 lets each through once; a
    /// setter above may change one, leaving its old bytes unread).
    mutating func set(_ pseudo: Pseudo, _ value: some Collection<UInt8>) {
        record(pseudo, at: fields.appendOutsideFields(value))
    }

    /// As nghttp2 hands a value over.
    @inline(__always)
    mutating func set(_ pseudo: Pseudo, _ value: UnsafeBufferPointer<UInt8>) {
        record(pseudo, at: fields.appendOutsideFields(value))
    }

    private mutating func record(_ pseudo: Pseudo, at range: Range<Int>) {
        switch pseudo {
        case .method: methodRange = range
        case .scheme: schemeRange = range
        case .authority: authorityRange = range
        case .path: pathRange = range
        case .protocol: protocolRange = range
        }
    }

    public static func == (a: H2RequestHead, b: H2RequestHead) -> Bool {
        a.method == b.method && a.scheme == b.scheme && a.authority == b.authority && a.path == b.path
            && a.protocol == b.protocol && a.fields.count == b.fields.count
            && zip(a.fields.pairs, b.fields.pairs).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }
}

/// A request's pseudo-header fields' values in place (`H2RequestHead.withPseudoHeaders`); empty
/// when the request has none.
public struct H2PseudoHeaders {
    @inlinable
    init(method: UnsafeRawBufferPointer, scheme: UnsafeRawBufferPointer, authority: UnsafeRawBufferPointer,
         path: UnsafeRawBufferPointer, protocol: UnsafeRawBufferPointer, bytes: UnsafeRawBufferPointer,
         spans: UnsafeBufferPointer<H2Fields.Span>) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.protocol = `protocol`
        self.bytes = bytes
        self.spans = spans
    }

    public let method: UnsafeRawBufferPointer
    public let scheme: UnsafeRawBufferPointer
    public let authority: UnsafeRawBufferPointer
    public let path: UnsafeRawBufferPointer
    public let `protocol`: UnsafeRawBufferPointer
    /// The head's whole buffer: `spans`, where its regular fields lie, index it.
    public let bytes: UnsafeRawBufferPointer
    public let spans: UnsafeBufferPointer<H2Fields.Span>
}

/// What a stream's response body source says when nghttp2 asks it for bytes.
public enum H2BodyRead {
    /// `count` bytes were copied; `end`: they are the last.
    case bytes(Int, end: Bool)
    /// `count` bytes are ready and stay where they are: the session frames them and has the
    /// delegate write the frame (`h2SendResponseBody`), so the bytes are never copied into it.
    case ready(Int, end: Bool)
    /// Nothing now: `resume(stream:)` once there is.
    case wait
    /// The body was cut: the stream is reset (INTERNAL_ERROR), never ended cleanly.
    case cut
}

/// Receives a server session's events, synchronously, from inside `receive` (and `send` for bodies).
public protocol H2ServerSessionDelegate: AnyObject {
    /// A request's complete header block; `endStream`: it has no body. The head is the session's,
    /// lent for the call (`inout` so that it is not copied: the delegate reads it, and copies what
    /// it keeps).
    func h2Request(_ stream: Int32, head: inout H2RequestHead, endStream: Bool)
    /// Request-body bytes (the session counts them against the windows until `consumed`).
    func h2RequestBody(_ stream: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The request's last byte arrived (END_STREAM).
    func h2RequestEnded(_ stream: Int32)
    /// The stream is gone: answered, reset by either side, or the connection is ending.
    /// `errorCode` is 0 for a clean end.
    func h2StreamClosed(_ stream: Int32, errorCode: UInt32)
    /// Up to `buffer.count` bytes of the stream's response body.
    func h2ResponseBody(_ stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead
    /// Writes a DATA frame for bytes the delegate said were `.ready`: the 9-byte `frameHeader`,
    /// then exactly `count` of those bytes, in that order and whole, where the session's other
    /// output goes — or nothing, to be asked again later (`.wouldBlock`).
    func h2SendResponseBody(_ stream: Int32, frameHeader: UnsafeRawBufferPointer, count: Int) -> H2FrameWrite
}

/// What became of a DATA frame the delegate was asked to write.
public enum H2FrameWrite {
    case written
    /// Nothing written: the session asks again at its next `send`.
    case wouldBlock
    /// The bytes are gone: the stream is reset (INTERNAL_ERROR).
    case failed
}

/// Why a session ended or refused to go on.
public struct H2SessionError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public var description: String { String(cString: nghttp2_strerror(code)) }
    public var isFlood: Bool { code == NGHTTP2_ERR_FLOODED.rawValue }
}

/// The server side of one HTTP/2 connection over nghttp2: bytes in (`receive`), bytes out (`send`),
/// events to the delegate. No I/O and no clock: the caller moves bytes between it and the socket,
/// so it runs the same in a unit test as behind a socket.
///
/// nghttp2 keeps HPACK, flow control and the protocol's rules; the limits against hostile peers
/// are set here: concurrent streams, header list size, CONTINUATION frames per header block, the
/// rate of streams a client resets (rapid reset), queued SETTINGS and PING answers a client does
/// not read (floods), and windows opened only as request bodies are taken (`consumed`).
public final class H2ServerSession {
    private var session: OpaquePointer?
    /// Neither retained nor weak: the delegate owns the session and clears this as it closes, and
    /// nghttp2 calls back only inside the calls it makes on the session. (A weak reference cost a
    /// load through its side table, a retain and a release on every callback of every stream.)
    public unowned(unsafe) var delegate: (any H2ServerSessionDelegate)?
    /// Streams a request's header block started, until they close. Each is marked in nghttp2's
    /// own stream table (a `RequestMark` as its user data), so no set of ids beside it costs a
    /// hash on every open, reset and close.
    private var requestStreams = 0
    private enum RequestMark: Int {
        /// Its header block began.
        case request = 1
        /// Its request was handed over (`h2Request`): work may have started. One still so marked
        /// that closes with an error was reset by nghttp2 for what the client sent, after that
        /// work started (a window overflowed, DATA beyond its content-length, …).
        case started
        /// Its reset, if one comes, is accounted for: Larder resets it (or fails its answer, which
        /// nghttp2 resets), or the client did (counted as it arrived).
        case settled

        var pointer: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: rawValue)! }
    }

    /// The mark of a request stream; nil for any other stream.
    private static func mark(_ session: OpaquePointer?, _ id: Int32) -> RequestMark? {
        RequestMark(rawValue: Int(bitPattern: nghttp2_session_get_stream_user_data(session, id)))
    }

    private static func setMark(_ session: OpaquePointer?, _ id: Int32, _ mark: RequestMark) {
        _ = nghttp2_session_set_stream_user_data(session, id, mark.pointer)
    }

    private static func isRequestStream(_ session: OpaquePointer?, _ id: Int32) -> Bool { mark(session, id) != nil }

    /// A reset of request stream `id` from now on is not nghttp2's answer to the client's frames.
    private static func settle(_ session: OpaquePointer?, _ id: Int32) {
        if let m = mark(session, id), m != .settled { setMark(session, id, .settled) }
    }
    /// The request header block being received (HTTP/2 sends a block's frames back to back, so
    /// there is one at a time), its stream (0: none), and the bytes of its names and values so
    /// far: a second bound beside nghttp2's own, which counts HPACK's overhead differently.
    private var building = H2RequestHead()
    private var buildingStream: Int32 = 0
    private var buildingBytes = 0
    let settings: H2Settings
    /// The first error a callback reported, kept for `receive` to return.
    private var callbackFailure: Int32?
    /// Answer heads' names and values handed to nghttp2 by pointer (its own copy lowered every
    /// name again), until nothing is queued before the socket: their HEADERS are written by then.
    private var headArena = H2HeadArena()
    /// Past this many bytes held (a client that keeps output queued while streams go on being
    /// answered), heads are copied by nghttp2 again until the queue empties.
    static let headArenaLimit = 256 * 1_024
    /// Bytes of answer heads held for nghttp2 now (for tests).
    public var heldHeadBytes: Int { headArena.held }
    /// Streams the client reset before their answer was complete, or made nghttp2 reset (a
    /// window overflowed, DATA beyond a content-length, …), less the exchanges it let finish
    /// (`exchangeCompleted`): a client that opens and cancels streams (rapid reset,
    /// CVE-2023-44487), or has them cancelled by sending what breaks them (MadeYouReset,
    /// CVE-2025-8671), makes Larder start work for each, and is cut off past
    /// `cancelledStreamLimit`, whatever its pace (nghttp2's own limit goes by resets per second,
    /// and counts only the client's own). Answers Larder refuses by itself do not count as
    /// finished: they cost it nothing.
    private var cancelledStreams = 0
    public static let cancelledStreamLimit = 100
    /// Set once the connection was cut off for resetting too many streams.
    public private(set) var cutOffForResets = false

    public init(settings: H2Settings) throws(H2SessionError) {
        self.settings = settings
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw H2SessionError(code: -901) }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, H2ServerSession.onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, H2ServerSession.onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, H2ServerSession.onFrameReceived)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, H2ServerSession.onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, H2ServerSession.onStreamClose)
        nghttp2_session_callbacks_set_send_data_callback(callbacks, H2ServerSession.sendData)

        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { throw H2SessionError(code: -901) }
        defer { nghttp2_option_del(option) }
        // Windows open as bodies are taken, not as they arrive: a client cannot queue more than the
        // windows in Larder's memory.
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_max_continuations(option, 8)
        // Answers to SETTINGS and PING a client does not read end the connection past this many.
        nghttp2_option_set_max_outbound_ack(option, 256)
        nghttp2_option_set_max_settings(option, 32)
        // Rapid reset (CVE-2023-44487): a burst of 200 resets, then 20 a second, then GOAWAY.
        nghttp2_option_set_stream_reset_rate_limit(option, 200, 20)
        // Closed streams kept for priority bookkeeping cost memory a client controls.
        nghttp2_option_set_no_closed_streams(option, 1)
        nghttp2_option_set_max_deflate_dynamic_table_size(option, 4096)

        var created: OpaquePointer?
        let me = Unmanaged.passUnretained(self).toOpaque()
        let rc = nghttp2_session_server_new3(&created, callbacks, me, option, larder_h2_memory())
        guard rc == 0, let created else { throw H2SessionError(code: rc) }
        session = created

        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                                   value: UInt32(settings.maxConcurrentStreams)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                                   value: UInt32(settings.streamWindow)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                                   value: UInt32(settings.maxHeaderListSize)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL.rawValue), value: 1),
        ]
        let submitted = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        guard submitted == 0 else { throw H2SessionError(code: submitted) }
        if settings.connectionWindow > 65_535 {
            _ = nghttp2_session_set_local_window_size(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0,
                                                      Int32(settings.connectionWindow))
        }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        headArena.deallocateAll()
    }

    // MARK: - Bytes

    /// Feeds what the client sent. An error means the connection must end (after `send`, which
    /// carries the GOAWAY nghttp2 queued, if any).
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(H2SessionError) {
        guard let session, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        if cutOffForResets { return }
        let n = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if cutOffForResets {
            // Outside nghttp2's callbacks: GOAWAY, and nothing more is read.
            terminate(code: UInt32(NGHTTP2_ENHANCE_YOUR_CALM.rawValue))
            return
        }
        if let failure = callbackFailure { throw H2SessionError(code: failure) }
        if n < 0 { throw H2SessionError(code: Int32(n)) }
    }

    /// Hands each piece of output to `out`, until nghttp2 has nothing more to send now or `out`
    /// returns false (the socket is backed up).
    public func send(_ out: (UnsafeRawBufferPointer) -> Bool) throws(H2SessionError) {
        guard let session else { return }
        while true {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { throw H2SessionError(code: Int32(n)) }
            guard n > 0, let data else { break }
            if !out(UnsafeRawBufferPointer(start: data, count: n)) { break }
        }
        // With nothing queued, every HEADERS submitted has been written (or dropped with its stream).
        if headArena.held > 0, nghttp2_session_get_outbound_queue_size(session) == 0 { headArena.releaseAll() }
    }

    /// Whether the session still reads or writes: false once GOAWAY went both ways or a fatal error.
    public var isAlive: Bool {
        guard let session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    public var wantsWrite: Bool {
        guard let session else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    // MARK: - Answers

    /// Submits a response head; `hasBody`: the body follows through `h2ResponseBody`.
    public func respond(_ stream: Int32, status: Int, fields: [(name: [UInt8], value: [UInt8])],
                        hasBody: Bool) -> Bool {
        var all = H2Fields(status: status)
        for f in fields { all.append(name: f.name, value: f.value) }
        return respond(stream, fields: all, hasBody: hasBody)
    }

    /// Submits a response head whose fields start with `:status` (`H2Fields(status:)`).
    public func respond(_ stream: Int32, fields: H2Fields, hasBody: Bool) -> Bool {
        guard let session else { return false }
        return fields.withNameValues { nva in submitResponse(session, stream, nva, hasBody: hasBody) }
    }

    /// Submits a response head: `:status`, then the fields at `spans`, whose names lie in `names`
    /// (in lower case) and values in `values`. Neither is read after this returns.
    public func respond(_ stream: Int32, status: Int, names: UnsafeRawBufferPointer, values: UnsafeRawBufferPointer,
                        spans: [H2Fields.Span], hasBody: Bool) -> Bool {
        guard let session else { return false }
        // nghttp2 never writes through these pointers; its type just is not const.
        func start(_ bytes: UnsafeRawBufferPointer) -> UnsafeMutablePointer<UInt8> {
            UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
                                     ?? UnsafePointer(bitPattern: 1)!)
        }
        // The names and values go to the arena, and nghttp2 keeps pointers to them there;
        // past the arena's limit it copies them itself.
        var nameBase = start(names), valueBase = start(values)
        var flags = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        if headArena.held < H2ServerSession.headArenaLimit {
            var namesEnd = 0, valuesEnd = 0
            for s in spans {
                namesEnd = max(namesEnd, s.nameStart + s.nameCount)
                valuesEnd = max(valuesEnd, s.valueStart + s.valueCount)
            }
            precondition(namesEnd <= names.count && valuesEnd <= values.count, "a span past its bytes")
            nameBase = start(UnsafeRawBufferPointer(start: headArena.copy(UnsafeRawBufferPointer(rebasing: names[..<namesEnd])),
                                                    count: namesEnd))
            valueBase = start(UnsafeRawBufferPointer(start: headArena.copy(UnsafeRawBufferPointer(rebasing: values[..<valuesEnd])),
                                                     count: valuesEnd))
            flags = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        }
        let code = (UInt8(48 + status / 100 % 10), UInt8(48 + status / 10 % 10), UInt8(48 + status % 10))
        return withUnsafeBytes(of: code) { digits in
            H2Fields.statusName.withUnsafeBytes { statusName in
                withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: spans.count + 1) { nva in
                    // `:status` is copied: its digits live on this stack.
                    nva[0] = nghttp2_nv(name: start(statusName), value: start(digits), namelen: statusName.count,
                                        valuelen: 3, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
                    for (i, s) in spans.enumerated() {
                        nva[i + 1] = nghttp2_nv(name: nameBase + s.nameStart, value: valueBase + s.valueStart,
                                                namelen: s.nameCount, valuelen: s.valueCount, flags: flags)
                    }
                    return submitResponse(session, stream, nva, hasBody: hasBody)
                }
            }
        }
    }

    private func submitResponse(_ session: OpaquePointer, _ stream: Int32, _ nva: UnsafeMutableBufferPointer<nghttp2_nv>,
                                hasBody: Bool) -> Bool {
        if hasBody {
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil),
                                                 read_callback: H2ServerSession.readBody)
            return nghttp2_submit_response(session, stream, nva.baseAddress, nva.count, &provider) == 0
        }
        return nghttp2_submit_response(session, stream, nva.baseAddress, nva.count, nil) == 0
    }

    /// An exchange the client let finish: one cancelled stream more is forgiven.
    public func exchangeCompleted() {
        if cancelledStreams > 0 { cancelledStreams -= 1 }
    }

    private func streamCancelled() {
        cancelledStreams += 1
        if cancelledStreams > H2ServerSession.cancelledStreamLimit { cutOffForResets = true }
    }

    /// Whether Larder has sent the end of `stream` (its answer is all out).
    public func answerSent(_ stream: Int32) -> Bool {
        guard let session else { return true }
        return nghttp2_session_get_stream_local_close(session, stream) == 1
    }

    /// Answer bytes the client's windows let go now on `stream`: the smaller of its own and the
    /// connection's (0 when either is closed, or the stream is gone).
    public func sendWindow(_ stream: Int32) -> Int {
        guard let session else { return 0 }
        let own = nghttp2_session_get_stream_remote_window_size(session, stream)
        return Int(max(0, min(own, nghttp2_session_get_remote_window_size(session))))
    }

    /// Gives back connection window for request-body bytes of a stream already closed.
    public func consumedOnConnection(_ count: Int) {
        guard let session, count > 0 else { return }
        _ = nghttp2_session_consume_connection(session, count)
    }

    /// A stream whose body source said `.wait` has bytes again.
    public func resume(_ stream: Int32) {
        guard let session else { return }
        _ = nghttp2_session_resume_data(session, stream)
    }

    /// Ends a stream with RST_STREAM.
    public func reset(_ stream: Int32, code: UInt32) {
        guard let session else { return }
        H2ServerSession.settle(session, stream)
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code)
    }

    /// Request-body bytes of `stream` were taken: its window and the connection's open again.
    public func consumed(_ stream: Int32, _ count: Int) {
        guard let session, count > 0 else { return }
        _ = nghttp2_session_consume(session, stream, count)
    }

    /// Graceful end (shutdown, idle): no new streams, the open ones finish.
    public func goAway(code: UInt32 = 0) {
        guard let session else { return }
        let last = nghttp2_session_get_last_proc_stream_id(session)
        _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, code, nil, 0)
        if lastStreamServed == nil { lastStreamServed = last }
    }

    /// After a GOAWAY, the last stream it lets finish. Streams above it that arrive before it is
    /// out (a client whose socket is backed up reads it late) are closed with REFUSED_STREAM once
    /// it is, which tells the client nothing of them was processed (RFC 9113 §8.7): their
    /// requests are never handed over.
    private(set) var lastStreamServed: Int32?

    /// Ends the connection now with GOAWAY `code` (after `send`).
    public func terminate(code: UInt32) {
        guard let session else { return }
        _ = nghttp2_session_terminate_session(session, code)
    }

    /// Streams open now.
    public var openStreams: Int { requestStreams }

    // MARK: - nghttp2 callbacks

    /// Runs `body` with the session a callback's `user` names, not retained: it is inside a call
    /// of its own into nghttp2 for as long as a callback runs (a retain and a release per header
    /// field showed in the instruction gates). That holds as long as whoever calls into the
    /// session holds it meanwhile (`H2Connection` keeps it as a `let`, and its own callers hold
    /// the connection), and `nghttp2_session_del` calls no callback.
    private static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (H2ServerSession) -> R) -> R {
        Unmanaged<H2ServerSession>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    private static let onBeginHeaders: nghttp2_on_begin_headers_callback = { session, frame, user in
        guard let frame else { return 0 }
        return with(user) { me in beginHeaders(me, session, frame) }
    }

    private static func beginHeaders(_ me: H2ServerSession, _ session: OpaquePointer?,
                                     _ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let id = frame.pointee.hd.stream_id
        if frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
           frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
            // A request's header block starts a stream once; nghttp2 opened it before this call.
            assert(!isRequestStream(session, id), "a request stream's head began twice")
            if nghttp2_session_set_stream_user_data(session, id, RequestMark.request.pointer) == 0 { me.requestStreams += 1 }
            me.building.removeAll()
            me.buildingStream = id
            me.buildingBytes = 0
        }
        return 0
    }

    private static let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, user in
        guard let frame, let name, let value else { return 0 }
        return with(user) { me in
            header(me, frame, UnsafeBufferPointer(start: name, count: nameLength),
                   UnsafeBufferPointer(start: value, count: valueLength))
        }
    }

    private static func header(_ me: H2ServerSession, _ frame: UnsafePointer<nghttp2_frame>,
                               _ n: UnsafeBufferPointer<UInt8>, _ v: UnsafeBufferPointer<UInt8>) -> Int32 {
        let id = frame.pointee.hd.stream_id
        // Trailers are not forwarded (an HTTP/1.1 origin would need them chunked, and no cache
        // behaviour depends on them).
        guard frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST, me.buildingStream == id else { return 0 }
        let total = me.buildingBytes + n.count + v.count + 32
        if total > me.settings.maxHeaderListSize {
            return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)  // the stream is reset
        }
        me.buildingBytes = total
        // Changed in place: a copy of the head per field would make a long header list cost its
        // square.
        if n.first == UInt8(ascii: ":") {
            // Appended to an emptied buffer, reused from one request to the next.
            guard let pseudo = pseudoHeader(n) else { return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
            me.building.set(pseudo, v)
        } else {
            me.building.fields.append(name: n, value: v)
        }
        return 0
    }

    private static let onFrameReceived: nghttp2_on_frame_recv_callback = { session, frame, user in
        guard let frame else { return 0 }
        return with(user) { me in frameReceived(me, session, frame) }
    }

    private static func frameReceived(_ me: H2ServerSession, _ session: OpaquePointer?,
                                      _ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let id = frame.pointee.hd.stream_id
        let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(frame.pointee.hd.type) {
        case NGHTTP2_HEADERS.rawValue:
            if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST, me.buildingStream == id {
                me.buildingStream = 0  // the next block starts a new head
                if let last = me.lastStreamServed, id > last { break }  // refused by the GOAWAY on its way
                setMark(session, id, .started)
                me.delegate?.h2Request(id, head: &me.building, endStream: endStream)
            } else if endStream {
                me.delegate?.h2RequestEnded(id)  // trailers end the body
            }
        case NGHTTP2_DATA.rawValue:
            if endStream { me.delegate?.h2RequestEnded(id) }
        case NGHTTP2_RST_STREAM.rawValue:
            // Not one Larder reset already, whose reset the client may have crossed.
            guard let m = mark(session, id), m != .settled else { break }
            setMark(session, id, .settled)
            me.streamCancelled()
        default:
            break
        }
        return 0
    }

    private static let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, id, data, length, user in
        guard let data else { return 0 }
        with(user) { $0.delegate?.h2RequestBody(id, UnsafeRawBufferPointer(start: data, count: length)) }
        return 0
    }

    private static let onStreamClose: nghttp2_on_stream_close_callback = { session, id, code, user in
        with(user) { me in streamClosed(me, session, id, code) }
    }

    private static func streamClosed(_ me: H2ServerSession, _ session: OpaquePointer?, _ id: Int32, _ code: UInt32) -> Int32 {
        // The stream (and its mark) is still in nghttp2's table while this runs.
        let m = mark(session, id)
        if m != nil { me.requestStreams -= 1 }
        // nghttp2's reset of a started request, the client's doing; not a refusal by a GOAWAY
        // (`lastStreamServed`), nor one of a request never handed over (its head too large, …),
        // which started nothing.
        if m == .started, code != 0, code != NGHTTP2_REFUSED_STREAM.rawValue { me.streamCancelled() }
        if me.buildingStream == id { me.buildingStream = 0 }
        if m != nil { me.delegate?.h2StreamClosed(id, errorCode: code) }
        return 0
    }

    private static let readBody: nghttp2_data_source_read_callback = { session, id, buffer, length, flags, _, user in
        guard let buffer, let flags, let delegate = with(user, { $0.delegate }) else {
            settle(session, id)  // reset by nghttp2 for Larder's failure, not the client's doing
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        switch delegate.h2ResponseBody(id, into: UnsafeMutableRawBufferPointer(start: buffer, count: length)) {
        case .wait:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .cut:
            settle(session, id)
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        case .bytes(let n, let end):
            if end { flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
            return n
        case .ready(let n, let end):
            flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_NO_COPY.rawValue)
            if end { flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
            return n
        }
    }

    /// A DATA frame whose bytes the delegate keeps (`.ready`): no padding is ever asked for, so the
    /// frame is its header and the bytes.
    private static let sendData: nghttp2_send_data_callback = { session, frame, header, length, _, user in
        guard let frame, let header, let delegate = with(user, { $0.delegate }) else {
            return Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
        }
        switch delegate.h2SendResponseBody(frame.pointee.hd.stream_id, frameHeader: UnsafeRawBufferPointer(start: header, count: 9),
                                           count: length) {
        case .written: return 0
        case .wouldBlock: return Int32(NGHTTP2_ERR_WOULDBLOCK.rawValue)
        case .failed:
            settle(session, frame.pointee.hd.stream_id)
            return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
    }

    /// Which request pseudo-header `name` is; its length and second byte pick the one candidate.
    /// (Static strings: comparing against arrays cost a retain and a release of each per field.)
    private static func pseudoHeader(_ name: UnsafeBufferPointer<UInt8>) -> H2RequestHead.Pseudo? {
        guard name.count > 1 else { return nil }
        let candidate: (H2RequestHead.Pseudo, StaticString)
        switch (name.count, name[1]) {
        case (7, UInt8(ascii: "m")): candidate = (.method, ":method")
        case (7, UInt8(ascii: "s")): candidate = (.scheme, ":scheme")
        case (10, _): candidate = (.authority, ":authority")
        case (5, _): candidate = (.path, ":path")
        case (9, _): candidate = (.protocol, ":protocol")
        default: return nil
        }
        return memcmp(candidate.1.utf8Start, name.baseAddress!, name.count) == 0 ? candidate.0 : nil
    }

    /// The fields as nghttp2's name-value pairs, valid inside `body`.
    static func withNameValues<R>(_ fields: [(name: [UInt8], value: [UInt8])],
                                  _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> R) -> R {
        H2Fields(fields).withNameValues(body)
    }
}
