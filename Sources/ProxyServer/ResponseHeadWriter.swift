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
                      clientVersion: HTTPVersion, viaName: [UInt8], upgrade: Bool, cacheStatus: [UInt8]? = nil,
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
        if let cs = cacheStatus {
            w.append("Cache-Status: ")
            w.append(cs)
            w.append("\r\n")
        }
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

/// Responses the proxy makes itself: errors and the few requests it answers locally.
enum LocalResponse {
    /// A short plain-text response naming the cause.
    static func error(_ status: Int, _ message: String, close: Bool, headOnly: Bool = false,
                      extraField: String? = nil, into w: inout MessageWriter) {
        let body = message + "\n"
        w.appendStatusLine(status, reason: reasonPhrase(for: status))
        w.append("Content-Type: text/plain; charset=utf-8\r\nContent-Length: ")
        w.appendDecimal(body.utf8.count)
        w.append("\r\nCache-Control: no-store\r\n")
        if let extraField { w.appendString(extraField + "\r\n") }
        if close { w.append("Connection: close\r\n") }
        w.append("\r\n")
        if !headOnly { w.appendString(body) }
    }

    /// TRACE with `Max-Forwards: 0`: the request as received, as `message/http` (RFC 9110 §9.3.8),
    /// minus credentials.
    static func trace(_ head: RequestHead, close: Bool, into w: inout MessageWriter) {
        var body = MessageWriter(capacity: head.headers.storage.count)
        let headers = head.headers
        headers.withBytes(head.methodRange) { body.append($0) }
        body.append(" ")
        headers.withBytes(head.target) { body.append($0) }
        body.append(head.version == .http10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n")
        for i in 0..<headers.count {
            if headers.nameEquals(at: i, "proxy-authorization") || headers.nameEquals(at: i, "authorization")
                || headers.nameEquals(at: i, "cookie") { continue }
            body.appendField(at: i, of: headers)
        }
        body.append("\r\n")
        w.appendStatusLine(200, reason: "OK")
        w.append("Content-Type: message/http\r\nContent-Length: ")
        w.appendDecimal(body.bytes.count)
        w.append("\r\n")
        if close { w.append("Connection: close\r\n") }
        w.append("\r\n")
        w.append(body.bytes)
    }

    /// OPTIONS with `Max-Forwards: 0` (or `OPTIONS *`): what this proxy supports.
    static func options(close: Bool, into w: inout MessageWriter) {
        w.appendStatusLine(200, reason: "OK")
        w.append("Allow: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE, CONNECT\r\nContent-Length: 0\r\n")
        if close { w.append("Connection: close\r\n") }
        w.append("\r\n")
    }

    /// Interim response to `Expect: 100-continue` and CONNECT success.
    static let continueHead: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"
    static let connectEstablished: StaticString = "HTTP/1.1 200 Connection Established\r\n\r\n"
}
