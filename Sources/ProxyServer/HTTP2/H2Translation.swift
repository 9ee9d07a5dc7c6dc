#if canImport(Glibc)
import Glibc
#endif
import HTTP2
import HTTPWire

/// An HTTP/2 request as the HTTP/1.1 request Larder's exchange reads, and which fields of its
/// answer stay with HTTP/1.1 (`H2AnswerHead` reads the rest). Pure: table-tested without a connection.
///
/// The HTTP/1.1 text is the one place an HTTP/2 request could smuggle a second request or field
/// (h2-to-h1 desync): every byte that reaches it is checked here again, although nghttp2 has already
/// refused controls in values, upper case and separators in names, connection-specific fields
/// and misplaced pseudo-header fields. The method must be a token; the path must start with `/`
/// (or be `*` for OPTIONS) and, like the authority, hold only visible ASCII; the authority carries
/// no user info; names are lower-case tokens and values field-value bytes (field-vchar, SP, HTAB);
/// a `host` field must name what `:authority` names; `content-length` is written by Larder from
/// the one the client sent, which nghttp2 holds the DATA frames to. A head handed to a waiting
/// exchange is not scanned again (`RequestParser.adopt` reads it from the places recorded here),
/// so this grammar is the parser's as well.
enum H2Translation {
    /// How the target is written: absolute for a forward proxy (the authority names the origin),
    /// origin-form where the connection already says where requests go (reverse mode, an
    /// intercepted connection, a mirror's path).
    enum TargetForm: Equatable { case absolute, origin }

    struct Request: Equatable {
        /// Where the request's head, CRLF-terminated, lies in the writer it was appended to.
        var head: Range<Int>
        /// Where its field lines are in the list they were appended to (each range counted from
        /// the head's start, as `RequestParser` records it), and where its method and target end:
        /// what `RequestParser.adopt` reads the head by, without scanning it.
        var fields: Range<Int>
        var methodEnd: Int
        var targetEnd: Int
        /// The body's DATA frames are to be sent chunked (no `content-length` was given).
        var chunkedBody: Bool
        /// A CONNECT: after a 2xx answer the stream carries the tunnel's bytes both ways.
        var isConnect: Bool
        /// The method, for reading the answer's framing (HEAD answers have no body).
        var method: HTTPMethod
        /// An extended CONNECT for a WebSocket (RFC 8441), sent upstream as an HTTP/1.1 upgrade:
        /// its `101` becomes a `200`, and the stream then carries the WebSocket's bytes.
        var isWebSocket = false
        /// Nothing follows the head (no body, no tunnel), so the exchange that answers it may
        /// answer another stream's request afterwards: the head asks for no `Connection: close`.
        var leavesExchangeReusable = false
    }

    struct Refusal: Error, Equatable {
        var status: Int
        var reason: String
    }

    /// Appends the request's HTTP/1.1 head to `out`, and its field lines' places to `fields`
    /// (nothing when it is refused). `webSocketKey`:
    /// the `Sec-WebSocket-Key` an extended CONNECT's upgrade carries upstream (16 random bytes in
    /// base64; RFC 8441 has the client send none).
    static func request(_ h: borrowing H2RequestHead, form: TargetForm, endStream: Bool,
                        webSocketKey: @autoclosure () -> [UInt8] = [],
                        into out: inout MessageWriter, fields lines: inout [HeaderField]) -> Result<Request, Refusal> {
        let extended = h.withPseudoHeaders { p -> Result<Bool, Refusal> in
            guard !p.method.isEmpty, p.method.allSatisfy(isTchar) else {
                return .failure(Refusal(status: 400, reason: "the :method is not a token"))
            }
            if p.protocol.isEmpty { return .success(false) }
            guard methodKind(p.method) == .connect, equalsIgnoringCase(p.protocol, 0, p.protocol.count, "websocket") else {
                return .failure(Refusal(status: 501, reason: "extended CONNECT is supported for the websocket protocol only"))
            }
            return .success(true)
        }
        switch extended {
        case .failure(let refusal):
            return .failure(refusal)
        case .success(false):
            return h.withPseudoHeaders { request($0, form: form, endStream: endStream, upgrading: false, into: &out, fields: &lines) }
        case .success(true):
            var upgrade = copy h
            upgrade.method = Array("GET".utf8)
            upgrade.protocol = []
            upgrade.removeFields(named: secWebSocketKeyName)
            upgrade.appendField(name: secWebSocketKeyName, value: webSocketKey())
            return upgrade.withPseudoHeaders {
                request($0, form: form, endStream: true, upgrading: true, into: &out, fields: &lines)
            }
        }
    }

    /// A field name's byte as HTTP/2 sends it: `tchar` (RFC 9110 §5.6.2) but upper case.
    @inline(__always)
    static func isFieldNameByte(_ b: UInt8) -> Bool { isTchar(b) && b &- 0x41 >= 26 }

    /// reg-name, IP literal and port characters; no user info, path, query or fragment: visible
    /// ASCII but `@ / ? # \ " < > ^ \` { | }`, as a bit per byte below 128.
    @inline(__always)
    static func isAuthorityByte(_ b: UInt8) -> Bool {
        b < 64 ? (0x2FFF_7FF2_0000_0000 as UInt64) >> UInt64(b) & 1 != 0
            : b < 128 ? (0x47FF_FFFE_AFFF_FFFE as UInt64) >> UInt64(b &- 64) & 1 != 0 : false
    }

    /// What a request field becomes in HTTP/1.1.
    private enum FieldRole { case forwarded, host, contentLength, cookie, dropped }

    /// Names are lower case here (checked before this is asked).
    private static func role(_ name: UnsafeRawBufferPointer) -> FieldRole {
        @inline(__always) func `is`(_ known: StaticString) -> Bool {
            memcmp(name.baseAddress!, known.utf8Start, known.utf8CodeUnitCount) == 0
        }
        switch name.count {
        case 2: return `is`("te") ? .dropped : .forwarded  // nghttp2 lets only `te: trailers` through, which means nothing here
        case 4: return `is`("host") ? .host : .forwarded
        case 6:
            if `is`("cookie") { return .cookie }
            return `is`("expect") ? .dropped : .forwarded  // the body comes anyway; a 100 would have nowhere to go
        case 7: return `is`("upgrade") ? .dropped : .forwarded
        case 10: return `is`("connection") || `is`("keep-alive") ? .dropped : .forwarded
        case 14: return `is`("content-length") ? .contentLength : .forwarded
        case 16: return `is`("proxy-connection") ? .dropped : .forwarded
        case 17: return `is`("transfer-encoding") ? .dropped : .forwarded
        default: return .forwarded
        }
    }

    /// The fields of a request, checked and sorted out without copying them: where its Host and
    /// Content-Length values lie, and how many cookie fields it has.
    private struct SortedFields {
        var host: Range<Int>?
        var contentLength: Range<Int>?
        var cookies = 0
    }

    /// `all`: the buffer the fields' spans index.
    private static func sort(_ spans: UnsafeBufferPointer<H2Fields.Span>, in all: UnsafeRawBufferPointer,
                             authority: UnsafeRawBufferPointer) -> Result<SortedFields, Refusal> {
        let unfit = Refusal(status: 400, reason: "a field name or value HTTP/1.1 cannot carry")
        var sorted = SortedFields()
        guard let base = all.baseAddress else { return spans.isEmpty ? .success(sorted) : .failure(unfit) }
        for s in spans {
            let name = UnsafeRawBufferPointer(start: base + s.nameStart, count: s.nameCount)
            let value = UnsafeRawBufferPointer(start: base + s.valueStart, count: s.valueCount)
            guard !name.isEmpty, name.allSatisfy(isFieldNameByte),
                  fieldValueBytesEnd(value, from: 0, to: value.count) == value.count else {
                return .failure(unfit)
            }
            switch role(name) {
            case .host:
                if authority.isEmpty, sorted.host == nil {
                    sorted.host = s.valueStart..<(s.valueStart + s.valueCount)
                } else {
                    let named = sorted.host.map { UnsafeRawBufferPointer(rebasing: all[$0]) } ?? authority
                    guard sameIgnoringCase(named, value) else {
                        return .failure(Refusal(status: 400, reason: "the host field names another authority than :authority"))
                    }
                }
            case .contentLength:
                if let seen = sorted.contentLength, !UnsafeRawBufferPointer(rebasing: all[seen]).elementsEqual(value) {
                    return .failure(Refusal(status: 400, reason: "conflicting content-length fields"))
                }
                sorted.contentLength = s.valueStart..<(s.valueStart + s.valueCount)
            case .cookie:
                sorted.cookies += 1  // one field again (RFC 9113 §8.2.3)
            case .dropped, .forwarded:
                break
            }
        }
        return .success(sorted)
    }

    /// `p`: the request's pseudo-header values, its fields' spans and the buffer they index.
    private static func request(_ p: H2PseudoHeaders, form: TargetForm, endStream: Bool,
                                upgrading: Bool, into out: inout MessageWriter,
                                fields lines: inout [HeaderField]) -> Result<Request, Refusal> {
        // The fields are checked first and the head written after, at the end of `out`.
        let all = p.bytes
        let sorted: SortedFields
        switch sort(p.spans, in: all, authority: p.authority) {
        case .success(let s): sorted = s
        case .failure(let refusal): return .failure(refusal)
        }
        let authority = sorted.host.map { UnsafeRawBufferPointer(rebasing: all[$0]) } ?? p.authority
        guard !authority.isEmpty, authority.allSatisfy(isAuthorityByte) else {
            return .failure(Refusal(status: 400, reason: "no :authority, or one with bytes a host cannot have"))
        }
        let method = methodKind(p.method)
        let isConnect = method == .connect
        let isAsterisk = !isConnect && p.path.count == 1 && p.path[0] == UInt8(ascii: "*") && method == .options
        if !isConnect {
            guard isAsterisk || p.path.first == UInt8(ascii: "/"), visibleBytesEnd(p.path, from: 0, to: p.path.count) == p.path.count else {
                return .failure(Refusal(status: 400, reason: "a :path that is not an absolute path of visible ASCII"))
            }
            guard equals(p.scheme, "http") || equals(p.scheme, "https") else {
                return .failure(Refusal(status: 400, reason: "a :scheme other than http or https"))
            }
        }
        let contentLength = sorted.contentLength.map { UnsafeRawBufferPointer(rebasing: all[$0]) }
        var chunked = false
        let framing: (name: StaticString, value: StaticString)?
        if upgrading || isConnect {
            framing = nil  // the WebSocket's or the tunnel's bytes follow the answer; no framing
        } else if contentLength != nil {
            framing = ("Content-Length", "")  // the client's value
        } else if !endStream {
            framing = ("Transfer-Encoding", "chunked")
            chunked = true
        } else if method == .post || method == .put || method == .patch {
            framing = ("Content-Length", "0")
        } else {
            framing = nil
        }
        // A request with nothing after its head leaves its exchange reusable (`H2Connection` hands
        // it the next stream only when it is waiting for a request with nothing unread); any other
        // is its exchange's last, so a body's framing can never run into a later request.
        // (nghttp2 already refuses a `content-length` other than 0 on a stream ended with its
        // HEADERS; a head owing body bytes is never left open to the next request regardless.)
        let owesBody = contentLength.map { !equals($0, "0") } ?? false
        let reusable = endStream && !upgrading && !isConnect && !chunked && !owesBody

        let start = out.count
        let firstLine = lines.count
        var nameStart = 0
        var nameEnd = 0
        var valueStart = 0
        // A field line is its name written after `startLine`, its value after `startValue`, and
        // `endLine`, which records where both lie as the parser would: the value without the
        // whitespace around it.
        func startLine() { nameStart = out.count }
        func startValue() {
            nameEnd = out.count
            out.append(": ")
            valueStart = out.count
        }
        func endLine() {
            var valueEnd = out.count
            out.withBytes { b in
                while valueStart < valueEnd, isOWS(b[valueStart]) { valueStart += 1 }
                while valueEnd > valueStart, isOWS(b[valueEnd - 1]) { valueEnd -= 1 }
            }
            lines.append(HeaderField(name: ByteRange(start: nameStart - start, count: nameEnd - nameStart),
                                     value: ByteRange(start: valueStart - start, count: valueEnd - valueStart)))
            out.append("\r\n")
        }
        out.append(p.method)
        let methodEnd = out.count - start
        out.append(byte: asciiSP)
        if isConnect {
            out.append(authority)
        } else {
            if form == .absolute, !isAsterisk {
                out.append(p.scheme)
                out.append("://")
                out.append(authority)
            }
            out.append(p.path)
        }
        let targetEnd = out.count - start
        out.append(" HTTP/1.1\r\n")
        startLine(); out.append("Host"); startValue(); out.append(authority); endLine()
        if let base = all.baseAddress {
            for s in p.spans {
                let name = UnsafeRawBufferPointer(start: base + s.nameStart, count: s.nameCount)
                guard role(name) == .forwarded else { continue }
                startLine()
                out.append(name)
                startValue()
                out.append(UnsafeRawBufferPointer(start: base + s.valueStart, count: s.valueCount))
                endLine()
            }
            if sorted.cookies > 0 {
                startLine()
                out.append("Cookie")
                startValue()
                var first = true
                for s in p.spans where s.nameCount == 6
                    && role(UnsafeRawBufferPointer(start: base + s.nameStart, count: s.nameCount)) == .cookie {
                    if !first { out.append("; ") }
                    first = false
                    out.append(UnsafeRawBufferPointer(start: base + s.valueStart, count: s.valueCount))
                }
                endLine()
            }
        }
        if let framing {
            startLine()
            out.append(framing.name)
            startValue()
            if let contentLength { out.append(contentLength) } else { out.append(framing.value) }
            endLine()
        }
        if upgrading {
            startLine(); out.append("Connection"); startValue(); out.append("Upgrade"); endLine()
            startLine(); out.append("Upgrade"); startValue(); out.append("websocket"); endLine()
        } else if !reusable {
            startLine(); out.append("Connection"); startValue(); out.append("close"); endLine()
        }
        out.append("\r\n")
        return .success(Request(head: start..<out.count, fields: firstLine..<lines.count, methodEnd: methodEnd,
                                targetEnd: targetEnd, chunkedBody: chunked, isConnect: isConnect, method: method,
                                isWebSocket: upgrading, leavesExchangeReusable: reusable))
    }

    /// Whether an answer's field (its name in lower case) belongs to the HTTP/1.1 connection and
    /// is not sent on a stream (RFC 9113 §8.2.2), or to the WebSocket upgrade an extended CONNECT's
    /// `200` replaces.
    static func isConnectionField(_ name: UnsafeRawBufferPointer) -> Bool {
        name.count < 64 && answerHopByHopLengths & (1 << UInt64(name.count)) != 0
            && answerHopByHop.contains(where: { equalsLowered(name, 0, name.count, $0) })
    }

    /// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64 (RFC 6455 §4.1).
    static func randomWebSocketKey() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let raw = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return base64(raw)
    }

    static func base64(_ bytes: [UInt8]) -> [UInt8] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = bytes[i], b1 = n > 1 ? bytes[i + 1] : 0, b2 = n > 2 ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(n > 1 ? alphabet[Int((b1 & 15) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(n > 2 ? alphabet[Int(b2 & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return out
    }

    /// A method's kind, its name compared with static strings.
    static func methodKind(_ m: UnsafeRawBufferPointer) -> HTTPMethod {
        switch m.count {
        case 3: return equals(m, "GET") ? .get : equals(m, "PUT") ? .put : .other
        case 4: return equals(m, "HEAD") ? .head : equals(m, "POST") ? .post : .other
        case 5: return equals(m, "TRACE") ? .trace : equals(m, "PATCH") ? .patch : .other
        case 6: return equals(m, "DELETE") ? .delete : .other
        case 7: return equals(m, "CONNECT") ? .connect : equals(m, "OPTIONS") ? .options : .other
        default: return .other
        }
    }

    @inline(__always)
    private static func equals(_ bytes: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        bytes.count == text.utf8CodeUnitCount && memcmp(bytes.baseAddress!, text.utf8Start, bytes.count) == 0
    }

    /// Whether `a` and `b` hold the same bytes, ASCII case-insensitively.
    private static func sameIgnoringCase(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.isEmpty || bytesEqualIgnoringCase(a.baseAddress!, b.baseAddress!, count: a.count))
    }

    private static let teName = Array("te".utf8)
    private static let connectionName = Array("connection".utf8)
    private static let keepAliveName = Array("keep-alive".utf8)
    private static let proxyConnectionName = Array("proxy-connection".utf8)
    private static let transferEncodingName = Array("transfer-encoding".utf8)
    private static let upgradeName = Array("upgrade".utf8)
    private static let trailerName = Array("trailer".utf8)
    private static let answerHopByHop = [connectionName, keepAliveName, proxyConnectionName, transferEncodingName,
                                         upgradeName, teName, trailerName, secWebSocketAcceptName]
    /// The lengths of those names, one bit each: most fields are told apart by length alone.
    private static let answerHopByHopLengths = answerHopByHop.reduce(UInt64(0)) { $0 | 1 << UInt64($1.count) }
    private static let secWebSocketKeyName = Array("sec-websocket-key".utf8)
    private static let secWebSocketAcceptName = Array("sec-websocket-accept".utf8)
}
