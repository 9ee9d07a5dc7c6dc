import HTTPWire
import SessionClient

/// Writes the head a proxy sends upstream for a client's request (RFC 9110 §7.6): hop-by-hop fields
/// dropped (those named in `Connection` too), `Host` set from the route, `Via` added, `Max-Forwards`
/// decremented for TRACE and OPTIONS, the session's additional headers added when absent, and the
/// body's framing declared from what the proxy actually sends: the client's `Content-Length` and
/// `Transfer-Encoding` fields are never copied, so no field list can make the origin read a
/// different body than the one Larder sends (request smuggling).
struct OutboundHead {
    /// Where the request goes and how its target is written.
    struct Route {
        var scheme: URIScheme
        /// The origin's host and port, written as the authority (`example.com:8080`, `[::1]`; the
        /// scheme's default port elided) only when a head goes out: a hit never builds it.
        var originHost: [UInt8]
        var originPort: Int
        /// Write `scheme://authority/path` (to a parent proxy) rather than `/path`.
        var absoluteForm: Bool
        /// The `Host` to send when it is not the authority (reverse mode passing the client's on).
        var host: [UInt8]? = nil
        /// `ftp://` only: the URL's `user[:password]`, written back into the absolute-form target
        /// for the FTP gateway or the parent proxy that logs in with it.
        var userinfo: [UInt8]? = nil

        func appendAuthority(into w: inout MessageWriter) {
            OutboundHead.appendAuthority(host: originHost, port: originPort, scheme: scheme, into: &w)
        }
    }

    /// A revalidation the cache sends in place of the client's request: this method (HEAD, or GET
    /// for a conditional GET), the stored entry's validators instead of the client's conditionals.
    struct Revalidation {
        var method: HTTPMethod
        var conditionalFields: [UInt8]
    }

    /// `body` is the body Larder will send after the head: `.none` (nothing, whatever the client
    /// announced), `.contentLength(n)` or `.chunked` (re-chunked as it is relayed).
    /// `parentCredentials` go with a request in absolute form (to the parent proxy) only; the
    /// client's own `Proxy-Authorization` (for Larder) is never passed on, being hop-by-hop.
    static func write(_ head: RequestHead, targetPath: UnsafeRawBufferPointer, route: Route, viaName: [UInt8],
                      additionalHeaders: [AdditionalHeader], parentCredentials: ProxyCredentials? = nil,
                      upgrading: Bool, revalidation: Revalidation? = nil,
                      body: BodyFraming, into w: inout MessageWriter) {
        let headers = head.headers
        if let r = revalidation { w.append(r.method == .head ? "HEAD" : "GET") } else { headers.withBytes(head.methodRange) { w.append($0) } }
        w.append(" ")
        if route.absoluteForm {
            w.append(route.scheme.prefix)
            if let userinfo = route.userinfo {
                w.append(userinfo)
                w.append("@")
            }
            route.appendAuthority(into: &w)
        }
        // A query without a path (`http://host?x=1`) is sent as `/?x=1`, as it is keyed.
        if targetPath.count == 0 || targetPath[0] != 0x2F { w.append("/") }
        w.append(targetPath)
        w.append(" HTTP/1.1\r\n")

        if let host = route.host { appendHost(host, into: &w) } else { appendHost(route, into: &w) }
        let rewriteMaxForwards = head.method == .trace || head.method == .options
        let connectionListsOthers = headers.connectionListsOtherFields
        for i in 0..<headers.count {
            if headers.nameEquals(at: i, "host") || headers.nameEquals(at: i, "content-length") {
                continue  // written above and below, from what Larder sends
            } else if headers.isHopByHop(at: i, connectionListsOtherFields: connectionListsOthers) {
                continue
            } else if rewriteMaxForwards, headers.nameEquals(at: i, "max-forwards") {
                continue
            } else if headers.nameEquals(at: i, "larder-cache-policy") {
                continue  // ours, not the origin's
            } else if revalidation != nil, isConditional(headers, i) {
                continue
            }
            w.appendField(at: i, of: headers)
        }
        if rewriteMaxForwards, let n = maxForwards(head) {
            w.append("Max-Forwards: ")
            w.appendDecimal(max(0, n - 1))
            w.append("\r\n")
        }
        for extra in additionalHeaders where !has(headers, named: extra.name) {
            w.appendString(extra.name)
            w.append(": ")
            w.appendString(extra.value)
            w.append("\r\n")
        }
        if let r = revalidation { w.append(r.conditionalFields) }
        if route.absoluteForm, let credentials = parentCredentials {
            w.append("Proxy-Authorization: ")
            w.appendString(credentials.authorization)
            w.append("\r\n")
        }
        w.append("Via: ")
        w.append(head.version == .http10 ? "1.0 " : "1.1 ")
        w.append(viaName)
        w.append("\r\n")
        switch body {
        case .contentLength(let n):
            w.append("Content-Length: ")
            w.appendDecimal(n)
            w.append("\r\n")
        case .chunked:
            w.append("Transfer-Encoding: chunked\r\n")
        case .none, .untilClose:
            break
        }
        if upgrading {
            w.append("Connection: Upgrade\r\n")
            if let i = headers.firstIndex(of: "upgrade") { w.appendField(at: i, of: headers) }
        }
        w.append("\r\n")
    }

    /// The client's own conditionals and ranges, replaced by the cache's validators on a revalidation.
    private static func appendHost(_ authority: [UInt8], into w: inout MessageWriter) {
        w.append("Host: ")
        w.append(authority)
        w.append("\r\n")
    }

    /// `host[:port]`: brackets around IPv6, the scheme's default port elided.
    static func appendAuthority(host: [UInt8], port: Int, scheme: URIScheme, into w: inout MessageWriter) {
        let isV6 = host.contains(UInt8(ascii: ":"))
        if isV6 { w.append("[") }
        w.append(host)
        if isV6 { w.append("]") }
        if port != scheme.defaultPort {
            w.append(":")
            w.appendDecimal(port)
        }
    }

    private static func appendHost(_ route: Route, into w: inout MessageWriter) {
        w.append("Host: ")
        route.appendAuthority(into: &w)
        w.append("\r\n")
    }

    private static func isConditional(_ headers: HeaderBlock, _ i: Int) -> Bool {
        headers.nameEquals(at: i, "if-none-match") || headers.nameEquals(at: i, "if-modified-since")
            || headers.nameEquals(at: i, "if-match") || headers.nameEquals(at: i, "if-unmodified-since")
            || headers.nameEquals(at: i, "if-range") || headers.nameEquals(at: i, "range")
    }

    /// The request's `Max-Forwards` value, if it has a valid one.
    static func maxForwards(_ head: RequestHead) -> Int? {
        guard let i = head.headers.firstIndex(of: "max-forwards") else { return nil }
        return head.headers.withBytes(head.headers.fields[i].value) { bytes -> Int? in
            guard bytes.count > 0, bytes.count < 10 else { return nil }
            var n = 0
            for b in bytes {
                guard b >= 0x30, b <= 0x39 else { return nil }
                n = n * 10 + Int(b - 0x30)
            }
            return n
        }
    }

    private static func has(_ headers: HeaderBlock, named name: String) -> Bool {
        let lower = Array(name.lowercased().utf8)
        for i in 0..<headers.count {
            let same = headers.withBytes(headers.fields[i].name) { bytes -> Bool in
                guard bytes.count == lower.count else { return false }
                for (a, b) in zip(bytes, lower) where asciiLower(a) != b { return false }
                return true
            }
            if same { return true }
        }
        return false
    }
}

/// The authority (`host[:port]`) for a target, as `OutboundHead.appendAuthority` writes it (reverse
/// mode's `Host` passed on from the client).
func authorityBytes(host: [UInt8], port: Int, scheme: URIScheme) -> [UInt8] {
    var w = MessageWriter(capacity: host.count + 8)
    OutboundHead.appendAuthority(host: host, port: port, scheme: scheme, into: &w)
    return w.bytes
}
