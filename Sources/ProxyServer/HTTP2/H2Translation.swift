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
/// refused CR, LF and NUL in values, upper case and separators in names, connection-specific fields
/// and misplaced pseudo-header fields. The method must be a token; the path must start with `/`
/// (or be `*` for OPTIONS) and, like the authority, hold only visible ASCII; the authority carries
/// no user info; a `host` field must name what `:authority` names; `content-length` is written by
/// Larder from the one the client sent, which nghttp2 holds the DATA frames to.
enum H2Translation {
    /// How the target is written: absolute for a forward proxy (the authority names the origin),
    /// origin-form where the connection already says where requests go (reverse mode, an
    /// intercepted connection, a mirror's path).
    enum TargetForm: Equatable { case absolute, origin }

    struct Request: Equatable {
        /// The request head, CRLF-terminated.
        var head: [UInt8]
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

    /// `webSocketKey`: the `Sec-WebSocket-Key` an extended CONNECT's upgrade carries upstream (16
    /// random bytes in base64; RFC 8441 has the client send none).
    static func request(_ h: H2RequestHead, form: TargetForm, endStream: Bool,
                        webSocketKey: @autoclosure () -> [UInt8] = []) -> Result<Request, Refusal> {
        guard !h.method.isEmpty, h.method.allSatisfy(isTchar) else {
            return .failure(Refusal(status: 400, reason: "the :method is not a token"))
        }
        if !h.protocol.isEmpty {
            guard h.method == connectName, lowercased(h.protocol) == websocketName else {
                return .failure(Refusal(status: 501, reason: "extended CONNECT is supported for the websocket protocol only"))
            }
            var upgrade = h
            upgrade.method = Array("GET".utf8)
            upgrade.protocol = []
            for i in upgrade.fields.spans.indices.reversed() where upgrade.fields.nameIs(i, secWebSocketKeyName) {
                upgrade.fields.remove(at: i)
            }
            upgrade.fields.append(name: secWebSocketKeyName, value: webSocketKey())
            return request(upgrade, form: form, endStream: true, upgrading: true)
        }
        return request(h, form: form, endStream: endStream, upgrading: false)
    }

    /// Writes into an array as it is made: a bounds check and a copy per piece, where an
    /// `Array.append(contentsOf:)` cost several times that (a head is some twenty pieces).
    private struct Filler {
        let buffer: UnsafeMutableRawBufferPointer
        private(set) var count = 0

        init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

        mutating func put(_ bytes: UnsafeRawBufferPointer) {
            guard let from = bytes.baseAddress, !bytes.isEmpty else { return }
            precondition(count + bytes.count <= buffer.count, "a request head longer than its measure")
            (buffer.baseAddress! + count).copyMemory(from: from, byteCount: bytes.count)
            count += bytes.count
        }

        mutating func put(_ bytes: [UInt8]) { bytes.withUnsafeBytes { put($0) } }

        mutating func put(_ byte: UInt8) {
            precondition(count < buffer.count, "a request head longer than its measure")
            buffer[count] = byte
            count += 1
        }
    }

    /// What a request field becomes in HTTP/1.1.
    private enum FieldRole { case forwarded, host, contentLength, cookie, dropped }

    /// Names are lower case here (checked before this is asked).
    private static func role(_ name: UnsafeRawBufferPointer) -> FieldRole {
        func `is`(_ known: [UInt8]) -> Bool {
            known.withUnsafeBytes { memcmp(name.baseAddress!, $0.baseAddress!, known.count) == 0 }
        }
        switch name.count {
        case 2: return `is`(teName) ? .dropped : .forwarded  // nghttp2 lets only `te: trailers` through, which means nothing here
        case 4: return `is`(hostName) ? .host : .forwarded
        case 6:
            if `is`(cookieName) { return .cookie }
            return `is`(expectName) ? .dropped : .forwarded  // the body comes anyway; a 100 would have nowhere to go
        case 7: return `is`(upgradeName) ? .dropped : .forwarded
        case 10: return `is`(connectionName) || `is`(keepAliveName) ? .dropped : .forwarded
        case 14: return `is`(contentLengthName) ? .contentLength : .forwarded
        case 16: return `is`(proxyConnectionName) ? .dropped : .forwarded
        case 17: return `is`(transferEncodingName) ? .dropped : .forwarded
        default: return .forwarded
        }
    }

    /// The fields of a request, checked and sorted out without copying them: where its Host and
    /// Content-Length values lie, and how many bytes the fields written as they are and the
    /// cookies take.
    private struct SortedFields {
        var host: Range<Int>?
        var contentLength: Range<Int>?
        var cookies = 0
        var cookieBytes = 0
        var forwardedBytes = 0
    }

    private static func sort(_ fields: H2Fields, authority: [UInt8]) -> Result<SortedFields, Refusal> {
        fields.bytes.withUnsafeBytes { all -> Result<SortedFields, Refusal> in
            var sorted = SortedFields()
            for s in fields.spans {
                let name = UnsafeRawBufferPointer(rebasing: all[s.nameStart..<(s.nameStart + s.nameCount)])
                let value = s.valueStart..<(s.valueStart + s.valueCount)
                var fit = !name.isEmpty
                for b in name where !isTchar(b) || b &- 0x41 < 26 { fit = false }
                for i in value where all[i] == 0x0D || all[i] == 0x0A || all[i] == 0 { fit = false }
                guard fit else { return .failure(Refusal(status: 400, reason: "a field name or value HTTP/1.1 cannot carry")) }
                switch role(name) {
                case .host:
                    if authority.isEmpty, sorted.host == nil {
                        sorted.host = value
                    } else {
                        let named = sorted.host.map { Array(all[$0]) } ?? authority
                        guard sameIgnoringCase(named, Array(all[value])) else {
                            return .failure(Refusal(status: 400, reason: "the host field names another authority than :authority"))
                        }
                    }
                case .contentLength:
                    if let seen = sorted.contentLength, !all[seen].elementsEqual(all[value]) {
                        return .failure(Refusal(status: 400, reason: "conflicting content-length fields"))
                    }
                    sorted.contentLength = value
                case .cookie:
                    sorted.cookies += 1  // one field again (RFC 9113 §8.2.3)
                    sorted.cookieBytes += s.valueCount
                case .dropped:
                    break
                case .forwarded:
                    sorted.forwardedBytes += s.nameCount + s.valueCount + 4
                }
            }
            return .success(sorted)
        }
    }

    private static func request(_ h: H2RequestHead, form: TargetForm, endStream: Bool,
                                upgrading: Bool) -> Result<Request, Refusal> {
        // The fields are checked first and the head written after, once, into a buffer of its size.
        let sorted: SortedFields
        switch sort(h.fields, authority: h.authority) {
        case .success(let s): sorted = s
        case .failure(let refusal): return .failure(refusal)
        }
        let authority = sorted.host.map { h.fields.bytes[$0] }.map(Array.init) ?? h.authority
        guard !authority.isEmpty, authority.allSatisfy(isAuthorityByte) else {
            return .failure(Refusal(status: 400, reason: "no :authority, or one with bytes a host cannot have"))
        }
        let isConnect = h.method == connectName
        let method = methodKind(h.method)
        let isAsterisk = !isConnect && h.path.count == 1 && h.path[0] == UInt8(ascii: "*") && method == .options
        if !isConnect {
            guard isAsterisk || h.path.first == UInt8(ascii: "/"), h.path.allSatisfy(isVisibleASCII) else {
                return .failure(Refusal(status: 400, reason: "a :path that is not an absolute path of visible ASCII"))
            }
            guard h.scheme == httpName || h.scheme == httpsName else {
                return .failure(Refusal(status: 400, reason: "a :scheme other than http or https"))
            }
        }
        let contentLength = sorted.contentLength.map { h.fields.bytes[$0] }
        var chunked = false
        let framing: [UInt8]?
        if upgrading || isConnect {
            framing = nil  // the WebSocket's or the tunnel's bytes follow the answer; no framing
        } else if contentLength != nil {
            framing = contentLengthLine
        } else if !endStream {
            framing = chunkedLine
            chunked = true
        } else if method == .post || method == .put || method == .patch {
            framing = emptyBodyLine
        } else {
            framing = nil
        }
        // A request with nothing after its head leaves its exchange reusable (`H2Connection` hands
        // it the next stream only when it is waiting for a request with nothing unread); any other
        // is its exchange's last, so a body's framing can never run into a later request.
        // (nghttp2 already refuses a `content-length` other than 0 on a stream ended with its
        // HEADERS; a head owing body bytes is never left open to the next request regardless.)
        let owesBody = contentLength.map { !$0.elementsEqual(zeroLength) } ?? false
        let reusable = endStream && !upgrading && !isConnect && !chunked && !owesBody
        let ending = upgrading ? upgradeLines : reusable ? [] : closeLine

        let capacity = h.method.count + 1 + h.scheme.count + schemeSeparator.count + 2 * authority.count
            + h.path.count + version.count + hostLine.count + sorted.forwardedBytes + cookieLine.count
            + sorted.cookieBytes + 2 * sorted.cookies + (framing?.count ?? 0) + (contentLength?.count ?? 0)
            + ending.count + 3 * crlf.count  // after Host, after a length's value, at the end
        let head = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, written in
            var out = Filler(UnsafeMutableRawBufferPointer(buffer))
            out.put(h.method)
            out.put(asciiSP)
            if isConnect {
                out.put(authority)
            } else {
                if form == .absolute, !isAsterisk {
                    out.put(h.scheme)
                    out.put(schemeSeparator)
                    out.put(authority)
                }
                out.put(h.path)
            }
            out.put(version)
            out.put(hostLine)
            out.put(authority)
            out.put(crlf)
            h.fields.bytes.withUnsafeBytes { all in
                for s in h.fields.spans {
                    let name = UnsafeRawBufferPointer(rebasing: all[s.nameStart..<(s.nameStart + s.nameCount)])
                    guard role(name) == .forwarded else { continue }
                    out.put(name)
                    out.put(colonSpace)
                    out.put(UnsafeRawBufferPointer(rebasing: all[s.valueStart..<(s.valueStart + s.valueCount)]))
                    out.put(crlf)
                }
                guard sorted.cookies > 0 else { return }
                out.put(cookieLine)
                var first = true
                for s in h.fields.spans where s.nameCount == cookieName.count
                    && role(UnsafeRawBufferPointer(rebasing: all[s.nameStart..<(s.nameStart + s.nameCount)])) == .cookie {
                    if !first { out.put(cookieSeparator) }
                    first = false
                    out.put(UnsafeRawBufferPointer(rebasing: all[s.valueStart..<(s.valueStart + s.valueCount)]))
                }
                out.put(crlf)
            }
            if let framing {
                out.put(framing)
                if let contentLength {
                    contentLength.withUnsafeBytes { out.put($0) }
                    out.put(crlf)
                }
            }
            out.put(ending)
            out.put(crlf)
            written = out.count
        }
        return .success(Request(head: head, chunkedBody: chunked, isConnect: isConnect, method: method,
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

    /// Compared with the names kept below: a `case Array("GET".utf8)` would make an array per
    /// case tried, on every stream.
    static func methodKind(_ m: [UInt8]) -> HTTPMethod {
        for (name, kind) in methodNames where m == name { return kind }
        return .other
    }

    private static let methodNames: [([UInt8], HTTPMethod)] = [
        (Array("GET".utf8), .get), (Array("HEAD".utf8), .head), (Array("POST".utf8), .post),
        (Array("PUT".utf8), .put), (Array("DELETE".utf8), .delete), (Array("CONNECT".utf8), .connect),
        (Array("OPTIONS".utf8), .options), (Array("TRACE".utf8), .trace), (Array("PATCH".utf8), .patch),
    ]

    private static func isVisibleASCII(_ b: UInt8) -> Bool { b > 0x20 && b < 0x7F }

    /// reg-name, IP literal and port characters; no user info, path, query or fragment.
    private static func isAuthorityByte(_ b: UInt8) -> Bool {
        guard isVisibleASCII(b) else { return false }
        switch b {
        case UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "\\"),
             UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "^"), UInt8(ascii: "`"),
             UInt8(ascii: "{"), UInt8(ascii: "|"), UInt8(ascii: "}"):
            return false
        default:
            return true
        }
    }

    private static func sameIgnoringCase(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { lower($0) == lower($1) }
    }

    private static func lowercased(_ bytes: [UInt8]) -> [UInt8] { bytes.map(lower) }

    private static func lower(_ b: UInt8) -> UInt8 { (0x41...0x5A).contains(b) ? b | 0x20 : b
    }

    private static let hostName = Array("host".utf8)
    private static let contentLengthName = Array("content-length".utf8)
    private static let zeroLength: [UInt8] = [UInt8(ascii: "0")]
    private static let cookieName = Array("cookie".utf8)
    private static let teName = Array("te".utf8)
    private static let connectionName = Array("connection".utf8)
    private static let keepAliveName = Array("keep-alive".utf8)
    private static let proxyConnectionName = Array("proxy-connection".utf8)
    private static let transferEncodingName = Array("transfer-encoding".utf8)
    private static let upgradeName = Array("upgrade".utf8)
    private static let expectName = Array("expect".utf8)
    private static let hopByHop = [teName, connectionName, keepAliveName, proxyConnectionName, transferEncodingName,
                                   upgradeName]
    private static let trailerName = Array("trailer".utf8)
    private static let answerHopByHop = [connectionName, keepAliveName, proxyConnectionName, transferEncodingName,
                                         upgradeName, teName, trailerName, secWebSocketAcceptName]
    /// The lengths of those names, one bit each: most fields are told apart by length alone.
    private static let answerHopByHopLengths = answerHopByHop.reduce(UInt64(0)) { $0 | 1 << UInt64($1.count) }
    private static let connectName = Array("CONNECT".utf8)
    private static let httpName = Array("http".utf8)
    private static let httpsName = Array("https".utf8)
    private static let schemeSeparator = Array("://".utf8)
    private static let version = Array(" HTTP/1.1\r\n".utf8)
    private static let hostLine = Array("Host: ".utf8)
    private static let cookieLine = Array("Cookie: ".utf8)
    private static let cookieSeparator = Array("; ".utf8)
    private static let contentLengthLine = Array("Content-Length: ".utf8)
    private static let chunkedLine = Array("Transfer-Encoding: chunked\r\n".utf8)
    private static let emptyBodyLine = Array("Content-Length: 0\r\n".utf8)
    private static let closeLine = Array("Connection: close\r\n".utf8)
    private static let upgradeLines = Array("Connection: Upgrade\r\nUpgrade: websocket\r\n".utf8)
    private static let websocketName = Array("websocket".utf8)
    private static let secWebSocketKeyName = Array("sec-websocket-key".utf8)
    private static let secWebSocketAcceptName = Array("sec-websocket-accept".utf8)
    private static let colonSpace = Array(": ".utf8)
    private static let crlf = Array("\r\n".utf8)
}
