import CH2Memory
import CNghttp2

/// An origin's answer head as nghttp2 delivered it (checked against RFC 9113 as requests are).
public struct H2ResponseHead: Sendable {
    public var status: Int = 0
    public var fields: [(name: [UInt8], value: [UInt8])] = []
    public init() {}
}

/// Receives a client session's events, synchronously, from inside `receive` (and `send` for bodies).
public protocol H2ClientSessionDelegate: AnyObject {
    /// A final answer head (informational ones are skipped); `endStream`: no body follows.
    func h2Response(_ stream: Int32, head: H2ResponseHead, endStream: Bool)
    func h2ResponseBody(_ stream: Int32, _ bytes: UnsafeRawBufferPointer)
    func h2ResponseEnded(_ stream: Int32)
    /// The stream is gone; `errorCode` 0 for a clean end (REFUSED_STREAM: the origin never
    /// processed the request, which may then be sent again).
    func h2StreamClosed(_ stream: Int32, errorCode: UInt32)
    /// Up to `buffer.count` bytes of the stream's request body.
    func h2RequestBody(_ stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead
}

/// The client side of one HTTP/2 connection to an origin over nghttp2: bytes in, bytes out,
/// events to the delegate; no I/O. A stream's window opens only as its body is taken
/// (`consumed`), so an origin cannot queue more than a stream window per stream in Larder's
/// memory. The connection's window is given back as DATA arrives: held until each stream's
/// reader took its bytes, a few readers that stop reading would close it for every other stream
/// of the connection (other clients' requests to the same origin).
public final class H2ClientSession {
    private var session: OpaquePointer?
    public weak var delegate: (any H2ClientSessionDelegate)?
    private var heads: [Int32: H2ResponseHead] = [:]
    private var headBytes: [Int32: Int] = [:]
    private let maxHeaderListSize: Int

    public init(streamWindow: Int = 256 * 1024, connectionWindow: Int = 1 << 20,
                maxHeaderListSize: Int = 256 * 1024) throws(H2SessionError) {
        self.maxHeaderListSize = maxHeaderListSize
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw H2SessionError(code: -901) }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, H2ClientSession.onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, H2ClientSession.onHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, H2ClientSession.onFrameReceived)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, H2ClientSession.onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, H2ClientSession.onStreamClose)
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { throw H2SessionError(code: -901) }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_max_continuations(option, 8)
        nghttp2_option_set_max_outbound_ack(option, 256)
        nghttp2_option_set_max_settings(option, 32)
        nghttp2_option_set_no_closed_streams(option, 1)
        // No pushed streams.
        nghttp2_option_set_max_reserved_remote_streams(option, 0)
        var created: OpaquePointer?
        let rc = nghttp2_session_client_new3(&created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option,
                                            larder_h2_memory())
        guard rc == 0, let created else { throw H2SessionError(code: rc) }
        session = created
        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                                   value: UInt32(streamWindow)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                                   value: UInt32(maxHeaderListSize)),
        ]
        let submitted = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        guard submitted == 0 else { throw H2SessionError(code: submitted) }
        if connectionWindow > 65_535 {
            _ = nghttp2_session_set_local_window_size(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(connectionWindow))
        }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Feeds what the origin sent; an error means the connection must end.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(H2SessionError) {
        guard let session, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let n = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if n < 0 { throw H2SessionError(code: Int32(n)) }
    }

    /// Hands each piece of output to `out` until there is nothing more or it returns false.
    public func send(_ out: (UnsafeRawBufferPointer) -> Bool) throws(H2SessionError) {
        guard let session else { return }
        while true {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { throw H2SessionError(code: Int32(n)) }
            guard n > 0, let data else { return }
            if !out(UnsafeRawBufferPointer(start: data, count: n)) { return }
        }
    }

    public var isAlive: Bool {
        guard let session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    /// A new stream may be opened now: no GOAWAY from the origin, and under its concurrency limit.
    public var acceptsStreams: Bool {
        guard let session, nghttp2_session_check_request_allowed(session) != 0 else { return false }
        let limit = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        return openStreams < limit
    }

    /// Streams submitted and not closed yet.
    public private(set) var openStreams = 0

    /// Submits a request; its body (if `hasBody`) comes through `h2RequestBody`. The stream's id,
    /// or nil if nghttp2 refused it.
    public func request(_ fields: [(name: [UInt8], value: [UInt8])], hasBody: Bool) -> Int32? {
        guard let session else { return nil }
        let id = H2ServerSession.withNameValues(fields) { nva -> Int32 in
            if hasBody {
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil),
                                                     read_callback: H2ClientSession.readBody)
                return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
            }
            return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil)
        }
        guard id > 0 else { return nil }
        openStreams += 1
        return id
    }

    public func resume(_ stream: Int32) {
        guard let session else { return }
        _ = nghttp2_session_resume_data(session, stream)
    }

    public func reset(_ stream: Int32, code: UInt32) {
        guard let session else { return }
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code)
    }

    /// The stream's reader took `count` body bytes: its window opens by as much (the
    /// connection's opened as they arrived).
    public func consumed(_ stream: Int32, _ count: Int) {
        guard let session, count > 0 else { return }
        _ = nghttp2_session_consume_stream(session, stream, count)
    }

    /// Ends the connection (idle, shutdown): GOAWAY after the open streams.
    public func goAway() {
        guard let session else { return }
        _ = nghttp2_session_terminate_session(session, 0)
    }

    // MARK: - Callbacks

    private static func this(_ user: UnsafeMutableRawPointer?) -> H2ClientSession {
        Unmanaged<H2ClientSession>.fromOpaque(user!).takeUnretainedValue()
    }

    private static let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, user in
        guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        let me = this(user)
        let id = frame.pointee.hd.stream_id
        if frame.pointee.headers.cat == NGHTTP2_HCAT_RESPONSE || frame.pointee.headers.cat == NGHTTP2_HCAT_HEADERS,
           me.heads[id] == nil || me.heads[id]!.status < 200 {
            me.heads[id] = H2ResponseHead()
            me.headBytes[id] = 0
        }
        return 0
    }

    private static let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, user in
        guard let frame, let name, let value else { return 0 }
        let me = this(user)
        let id = frame.pointee.hd.stream_id
        guard let total = me.headBytes[id], me.heads[id] != nil else { return 0 }  // trailers
        let size = total + nameLength + valueLength + 32
        if size > me.maxHeaderListSize { return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        me.headBytes[id] = size
        let n = Array(UnsafeBufferPointer(start: name, count: nameLength))
        let v = Array(UnsafeBufferPointer(start: value, count: valueLength))
        if n == H2ClientSession.statusName {
            guard v.count == 3, v.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), v[0] != 0x30 else {
                return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)  // no status below 100
            }
            me.heads[id]?.status = v.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        } else if n.first != UInt8(ascii: ":") {
            me.heads[id]?.fields.append((n, v))  // in place: no copy of the list per field
        }
        return 0
    }

    private static let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, user in
        guard let frame else { return 0 }
        let me = this(user)
        let id = frame.pointee.hd.stream_id
        let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(frame.pointee.hd.type) {
        case NGHTTP2_HEADERS.rawValue:
            if let head = me.heads[id], me.headBytes[id] != nil {
                me.headBytes[id] = nil
                if head.status >= 200 {
                    me.delegate?.h2Response(id, head: head, endStream: endStream)
                } else {
                    me.heads[id] = nil  // 1xx: the final head follows
                }
            } else if endStream {
                me.delegate?.h2ResponseEnded(id)  // trailers end the body
            }
        case NGHTTP2_DATA.rawValue:
            if endStream { me.delegate?.h2ResponseEnded(id) }
        default:
            break
        }
        return 0
    }

    private static let onDataChunk: nghttp2_on_data_chunk_recv_callback = { session, _, id, data, length, user in
        guard let data else { return 0 }
        // Buffered per stream from here, each bounded by its own window.
        _ = nghttp2_session_consume_connection(session, length)
        this(user).delegate?.h2ResponseBody(id, UnsafeRawBufferPointer(start: data, count: length))
        return 0
    }

    private static let onStreamClose: nghttp2_on_stream_close_callback = { _, id, code, user in
        let me = this(user)
        me.heads[id] = nil
        me.headBytes[id] = nil
        me.openStreams = max(0, me.openStreams - 1)
        me.delegate?.h2StreamClosed(id, errorCode: code)
        return 0
    }

    private static let readBody: nghttp2_data_source_read_callback = { _, id, buffer, length, flags, _, user in
        guard let buffer, let flags, let delegate = this(user).delegate else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        switch delegate.h2RequestBody(id, into: UnsafeMutableRawBufferPointer(start: buffer, count: length)) {
        case .wait:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .cut, .ready:
            // Request bodies are copied into frames: a client session writes no frames itself.
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        case .bytes(let n, let end):
            if end { flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
            return n
        }
    }

    private static let statusName = Array(":status".utf8)
}
