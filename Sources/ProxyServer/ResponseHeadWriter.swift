import CachePolicy
import HTTPWire

/// How the proxy delimits a response body towards its client.
enum ClientFraming: Equatable {
    /// No body (HEAD, 1xx, 204, 304).
    case none
    /// The origin's Content-Length, passed through.
    case contentLength
    /// Re-chunked (origin sent chunked or close-delimited, client speaks HTTP/1.1).
    case chunked
    /// Close-delimited (HTTP/1.0 client and no length known).
    case untilClose
}

/// The `Cache-Status` of a forwarded head: serialized already, or written from the status as the
/// head is (no array of its own on the forwarding path).
enum CacheStatusField {
    case bytes([UInt8])
    case status(CacheStatus, CacheName)
}

/// Writes response heads towards clients: the origin's fields minus hop-by-hop ones, plus our own
/// framing, `Connection` and `Via`.
enum ResponseHeadWriter {
    /// Chooses how to frame the body for this client.
    static func framing(for response: ResponseHead, clientVersion: HTTPVersion) -> ClientFraming {
        switch response.framing {
        case .none: return .none
        case .contentLength: return .contentLength
        case .chunked, .untilClose: return clientVersion == .http11 ? .chunked : .untilClose
        }
    }

    /// `sharedWithout`: the response is another client's, shared (request collapsing): its
    /// `Set-Cookie` fields and these qualified fields stay out.
    static func write(_ response: ResponseHead, framing: ClientFraming, keepAlive: Bool,
                      clientVersion: HTTPVersion, viaName: [UInt8], upgrade: Bool, cacheStatus: CacheStatusField? = nil,
                      sharedWithout: [[UInt8]]? = nil, into w: inout MessageWriter) {
        let headers = response.headers
        w.append("HTTP/1.1 ")
        w.appendDecimal(response.status)
        w.append(" ")
        headers.withBytes(response.reason) { w.append($0) }
        w.append("\r\n")
        // A body delimited by length goes out with one Content-Length of the parsed value: a list
        // or repeated field (`5, 5`) is not forwarded as it came (RFC 9110 §8.6).
        var length: Int?
        if framing == .contentLength, case .contentLength(let n) = response.framing { length = n }
        let connectionListsOthers = headers.connectionListsOtherFields
        for i in 0..<headers.count where !headers.isHopByHop(at: i, connectionListsOtherFields: connectionListsOthers) {
            if length != nil, headers.nameEquals(at: i, "content-length") { continue }
            if let omit = sharedWithout, headers.isSetCookie(at: i) || headers.nameIsListed(at: i, in: omit) { continue }
            w.appendField(at: i, of: headers)
        }
        if let length {
            w.append("Content-Length: ")
            w.appendDecimal(length)
            w.append("\r\n")
        }
        w.append("Via: ")
        w.append(response.version == .http10 ? "1.0 " : "1.1 ")
        w.append(viaName)
        w.append("\r\n")
        if let cacheStatus { appendCacheStatus(cacheStatus, into: &w) }
        if framing == .chunked { w.append("Transfer-Encoding: chunked\r\n") }
        if upgrade {
            w.append("Connection: Upgrade\r\n")
            if let i = headers.firstIndex(of: "upgrade") { w.appendField(at: i, of: headers) }
        } else if response.isInformational {
            // 1xx heads carry no connection management.
        } else {
            appendConnection(keepAlive: keepAlive && framing != .untilClose, clientVersion: clientVersion, into: &w)
        }
        w.append("\r\n")
    }

    /// The one place a `Cache-Status` field line is written (`Responder` chooses what it says).
    static func appendCacheStatus(_ field: CacheStatusField, into w: inout MessageWriter) {
        w.append("Cache-Status: ")
        switch field {
        case .bytes(let serialized): w.append(serialized)
        case .status(let status, let name): status.write(cacheName: name, into: &w)
        }
        w.append("\r\n")
    }

    /// `Connection: close` when the connection ends after this response; `keep-alive` for an
    /// HTTP/1.0 client it stays open for; nothing for HTTP/1.1, where persistence is the default.
    static func appendConnection(keepAlive: Bool, clientVersion: HTTPVersion, into w: inout MessageWriter) {
        if !keepAlive {
            w.append("Connection: close\r\n")
        } else if clientVersion == .http10 {
            w.append("Connection: keep-alive\r\n")
        }
    }
}

/// The `Cache-Status` of answers Larder makes itself (RFC 9211): the configured name, no `fwd` when
/// the origin was not asked, and a `detail` saying why; `fwd` (the lookup's reason, or `method`)
/// and `detail=origin-error` when Larder answers for an origin it could not get an answer from.
/// Made once per configuration: the canned answers hold their Cache-Status already.
final class LocalAnswers: Sendable {
    let cacheName: CacheName
    /// CONNECT answered after the tunnel to the destination opened, and for interception.
    let connectEstablished: [UInt8]
    let connectIntercepted: [UInt8]
    /// Connections refused before a request is read (`ConnectionRefusal`).
    let refusedFull: [UInt8]
    let refusedPerClient: [UInt8]

    init(cacheName: CacheName) {
        self.cacheName = cacheName
        func connect(_ status: CacheStatus) -> [UInt8] {
            Array("HTTP/1.1 200 Connection Established\r\nCache-Status: ".utf8) + status.serialized(cacheName: cacheName)
                + Array("\r\n\r\n".utf8)
        }
        connectEstablished = connect(CacheStatus(forward: .method, detail: "tunnel"))
        connectIntercepted = connect(CacheStatus(detail: "intercepted"))
        refusedFull = ConnectionRefusal.full.canned(cacheStatus: CacheStatus(detail: "overloaded")
            .serialized(cacheName: cacheName))
        refusedPerClient = ConnectionRefusal.perClient.canned(cacheStatus: CacheStatus(detail: "too-many-connections")
            .serialized(cacheName: cacheName))
    }

    /// An answer made without asking the origin, with a detail for its status.
    func local(_ status: Int) -> [UInt8] {
        CacheStatus(detail: Self.detail(for: status)).serialized(cacheName: cacheName)
    }

    /// An error answer for a request that went to the origin and got no usable answer: the
    /// lookup's forward reason (`method` for requests the cache does not look up).
    func originError(after lookup: CacheStatus?) -> [UInt8] {
        CacheStatus(forward: lookup?.forward ?? .method, detail: "origin-error").serialized(cacheName: cacheName)
    }

    /// The origin's answer to a request the cache does not look up (OPTIONS, TRACE).
    func forwardedForMethod(originStatus: Int) -> [UInt8] {
        CacheStatus(forward: .method, forwardStatus: originStatus).serialized(cacheName: cacheName)
    }

    static func detail(for status: Int) -> CacheStatus.Detail {
        switch status {
        case 400, 411, 417, 505: return "bad-request"
        case 403: return "denied"
        case 404: return "not-found"
        case 405: return "method-not-allowed"
        case 407: return "auth-required"
        case 408: return "head-timeout"
        case 413: return "body-too-large"
        case 414: return "uri-too-long"
        case 429: return "too-many-requests"
        case 431: return "head-too-large"
        case 501: return "not-implemented"
        case 502: return "origin-error"
        case 503: return "overloaded"
        case 504: return "only-if-cached"
        default: return "local"
        }
    }
}

/// Responses the proxy makes itself: errors and the few requests it answers locally.
enum LocalResponse {
    /// A short plain-text response naming the cause.
    static func error(_ status: Int, _ message: String, keepAlive: Bool, clientVersion: HTTPVersion = .http11,
                      headOnly: Bool = false,
                      extraField: String? = nil, cacheStatus: CacheStatusField, into w: inout MessageWriter) {
        let body = message + "\n"
        w.appendStatusLine(status, reason: reasonPhrase(for: status))
        w.append("Content-Type: text/plain; charset=utf-8\r\nContent-Length: ")
        w.appendDecimal(body.utf8.count)
        w.append("\r\nCache-Control: no-store\r\n")
        ResponseHeadWriter.appendCacheStatus(cacheStatus, into: &w)
        if let extraField { w.appendString(extraField + "\r\n") }
        ResponseHeadWriter.appendConnection(keepAlive: keepAlive, clientVersion: clientVersion, into: &w)
        w.append("\r\n")
        if !headOnly { w.appendString(body) }
    }

    /// TRACE with `Max-Forwards: 0`: the request as received, as `message/http` (RFC 9110 §9.3.8),
    /// minus credentials. Returns the body's length.
    @discardableResult
    static func trace(_ head: RequestHead, keepAlive: Bool, cacheStatus: CacheStatusField,
                      into w: inout MessageWriter) -> Int {
        var body = MessageWriter(capacity: head.headers.storage.count)
        let headers = head.headers
        headers.withBytes(head.methodRange) { body.append($0) }
        body.append(" ")
        headers.withBytes(head.target) { body.append(RequestTarget.withoutUserinfo($0)) }
        body.append(head.version == .http10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n")
        for i in 0..<headers.count {
            if headers.nameEquals(at: i, "proxy-authorization") || headers.nameEquals(at: i, "authorization")
                || headers.nameEquals(at: i, "cookie") { continue }
            body.appendField(at: i, of: headers)
        }
        body.append("\r\n")
        w.appendStatusLine(200, reason: "OK")
        w.append("Content-Type: message/http\r\nContent-Length: ")
        w.appendDecimal(body.count)
        w.append("\r\n")
        ResponseHeadWriter.appendCacheStatus(cacheStatus, into: &w)
        ResponseHeadWriter.appendConnection(keepAlive: keepAlive, clientVersion: head.version, into: &w)
        w.append("\r\n")
        body.withBytes { w.append($0) }
        return body.count
    }

    /// OPTIONS with `Max-Forwards: 0` (or `OPTIONS *`): what this proxy supports.
    static func options(keepAlive: Bool, clientVersion: HTTPVersion = .http11, cacheStatus: CacheStatusField,
                        into w: inout MessageWriter) {
        w.appendStatusLine(200, reason: "OK")
        w.append("Allow: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE, CONNECT\r\nContent-Length: 0\r\n")
        ResponseHeadWriter.appendCacheStatus(cacheStatus, into: &w)
        ResponseHeadWriter.appendConnection(keepAlive: keepAlive, clientVersion: clientVersion, into: &w)
        w.append("\r\n")
    }

    /// Interim response to `Expect: 100-continue` (CONNECT's answers are `LocalAnswers`').
    static let continueHead: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"
}
