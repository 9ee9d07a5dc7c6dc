/// The four request-target forms of RFC 9112 §3.2.
public enum RequestTargetForm: Sendable, Equatable {
    /// `/path?query`
    case origin
    /// `http://host:port/path?query`
    case absolute
    /// `host:port` (CONNECT only)
    case authority
    /// `*` (OPTIONS only)
    case asterisk
}

public enum URIScheme: Sendable, Equatable {
    case http, https
    /// Served by the proxy's FTP gateway (absolute form only, GET and HEAD).
    case ftp

    /// The port a URL of this scheme means when it names none.
    public var defaultPort: Int {
        switch self {
        case .http: return 80
        case .https: return 443
        case .ftp: return 21
        }
    }

    public var name: String {
        switch self {
        case .http: return "http"
        case .https: return "https"
        case .ftp: return "ftp"
        }
    }

    /// `scheme://`, as an absolute URI begins.
    public var prefix: StaticString {
        switch self {
        case .http: return "http://"
        case .https: return "https://"
        case .ftp: return "ftp://"
        }
    }
}

/// A request target taken apart. `host` is normalised once, here, and every decision (cache key,
/// rules, access, authentication, interception, TLS pins, DNS) uses that one value: ASCII
/// lowercase, IPv6 literals without brackets, one trailing dot removed (`example.com.` is
/// `example.com`), and a host whose last label is a number read as the IPv4 address it spells,
/// written `a.b.c.d` (`IPv4Host`: `2130706437` is `127.0.0.5`; `a.1`, which spells none, is
/// refused). Names are ASCII only: internationalised names must arrive as A-labels (`xn--…`),
/// which are kept as sent; U-labels, empty labels and percent-encoding are refused.
public struct RequestTarget: Sendable, Equatable {
    public var form: RequestTargetForm
    /// Absolute form only (`.http` otherwise).
    public var scheme: URIScheme
    /// Empty for origin and asterisk forms.
    public var host: [UInt8]
    /// Explicit port, or the scheme's default (80/443); 0 for origin and asterisk forms.
    public var port: Int
    /// Whether the target named the port.
    public var hasExplicitPort: Bool
    /// Offset into the target bytes where path-and-query begins, or nil when there is none
    /// (absolute form without a path means "/"; authority and asterisk forms have none).
    public var pathOffset: Int?
    /// Offset of a `#fragment`, if the client sent one. A fragment is never part of what is
    /// keyed or forwarded (RFC 9110 §4.2.5: it is the client's alone).
    public var fragmentStart: Int?
    /// `ftp://` only: the offsets of `user[:password]` before the `@`, still percent-encoded.
    /// Credentials, never keyed or logged (`withoutUserinfo`).
    public var userinfo: Range<Int>?

    public init(form: RequestTargetForm, scheme: URIScheme, host: [UInt8], port: Int,
                hasExplicitPort: Bool, pathOffset: Int?, fragmentStart: Int? = nil, userinfo: Range<Int>? = nil) {
        self.form = form; self.scheme = scheme; self.host = host; self.port = port
        self.hasExplicitPort = hasExplicitPort; self.pathOffset = pathOffset; self.fragmentStart = fragmentStart
        self.userinfo = userinfo
    }

    /// The path and query within a target of `length` bytes, without the fragment: what is keyed
    /// and forwarded. Empty when the target has none (forwarded as `/`).
    public func pathRange(targetLength length: Int) -> Range<Int> {
        guard let start = pathOffset else { return 0..<0 }
        return start..<(fragmentStart ?? length)
    }

    /// Parses `bytes` (the request-target of a request with `method`).
    /// CONNECT requires authority form with a port; `*` only with OPTIONS; absolute form only with the
    /// `http`, `https` and `ftp` schemes (others: `invalidTarget`); userinfo (`user@host`) is
    /// rejected, but for `ftp`, whose URLs carry their credentials (RFC 1738 §3.1), where it is
    /// taken apart from the host once: at most one `@`, and only the characters RFC 3986 allows.
    public static func parse(_ bytes: UnsafeRawBufferPointer, method: HTTPMethod) throws(HTTPWireError) -> RequestTarget {
        let n = bytes.count
        guard n > 0 else { throw .invalidTarget }
        guard visibleBytesEnd(bytes, from: 0, to: n) == n else { throw .invalidTarget }  // only 0x21...0x7E

        if method == .connect {
            // authority-form = uri-host ":" port (RFC 9112 §3.2.3); the port is required.
            let authority = try parseAuthority(bytes, 0, n, defaultPort: nil)
            guard authority.end == n else { throw .invalidTarget }
            return RequestTarget(form: .authority, scheme: .http, host: authority.host, port: authority.port,
                                 hasExplicitPort: true, pathOffset: nil)
        }
        if bytes[0] == 0x2F {  // "/"
            return RequestTarget(form: .origin, scheme: .http, host: [], port: 0, hasExplicitPort: false,
                                 pathOffset: 0, fragmentStart: firstFragment(bytes, from: 0))
        }
        if n == 1, bytes[0] == 0x2A {  // "*"
            guard method == .options else { throw .invalidTarget }
            return RequestTarget(form: .asterisk, scheme: .http, host: [], port: 0, hasExplicitPort: false,
                                 pathOffset: nil)
        }
        // absolute-form: http and https (RFC 9112 §3.2.2), and ftp for the gateway.
        let scheme: URIScheme
        var authorityStart: Int
        if n >= 7, equalsIgnoringCase(bytes, 0, 7, "http://") {
            scheme = .http
            authorityStart = 7
        } else if n >= 8, equalsIgnoringCase(bytes, 0, 8, "https://") {
            scheme = .https
            authorityStart = 8
        } else if n >= 6, equalsIgnoringCase(bytes, 0, 6, "ftp://") {
            scheme = .ftp
            authorityStart = 6
        } else {
            throw .invalidTarget  // other schemes, and authority-form without CONNECT
        }
        var authorityEnd = authorityStart
        while authorityEnd < n, bytes[authorityEnd] != 0x2F, bytes[authorityEnd] != 0x3F, bytes[authorityEnd] != 0x23 {
            authorityEnd += 1
        }
        var userinfo: Range<Int>?
        if scheme == .ftp, let at = try userinfoEnd(bytes, authorityStart, authorityEnd) {
            userinfo = authorityStart..<at
            authorityStart = at + 1
        }
        let authority = try parseAuthority(bytes, authorityStart, authorityEnd, defaultPort: scheme.defaultPort)
        guard authority.end == authorityEnd else { throw .invalidTarget }
        return RequestTarget(form: .absolute, scheme: scheme, host: authority.host, port: authority.port,
                             hasExplicitPort: authority.explicitPort,
                             pathOffset: authorityEnd < n ? authorityEnd : nil,
                             fragmentStart: firstFragment(bytes, from: authorityEnd), userinfo: userinfo)
    }

    /// The offset of the `@` ending an ftp authority's userinfo, nil when it has none. Throws for
    /// a second `@` (which one ends the credentials is where parsers disagree) and for characters
    /// RFC 3986 §3.2.1 does not allow there.
    private static func userinfoEnd(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws(HTTPWireError) -> Int? {
        var at: Int?
        for i in start..<end where bytes[i] == 0x40 {
            guard at == nil else { throw .invalidTarget }
            at = i
        }
        guard let at else { return nil }
        for i in start..<at {
            let b = bytes[i]
            let unreserved = b &- 0x61 < 26 || b &- 0x41 < 26 || isDigit(b) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
            // sub-delims, ":" and "%" (its hex digits are checked where the credentials are decoded)
            let allowed = unreserved || b == 0x21 || b == 0x24 || (b >= 0x26 && b <= 0x2C) || b == 0x3B || b == 0x3D
                || b == 0x3A || b == 0x25
            guard allowed else { throw .invalidTarget }
        }
        return at
    }

    /// `target` without an ftp URL's `user:password@`: what is logged and echoed.
    public static func withoutUserinfo(_ target: UnsafeRawBufferPointer) -> [UInt8] {
        guard target.count >= 6, equalsIgnoringCase(target, 0, 6, "ftp://") else { return Array(target) }
        var end = 6
        while end < target.count, target[end] != 0x2F, target[end] != 0x3F, target[end] != 0x23 { end += 1 }
        var at: Int?
        for i in 6..<end where target[i] == 0x40 { at = i }
        guard let at else { return Array(target) }
        return Array(target[0..<6]) + Array(target[(at + 1)...])
    }

    private static func firstFragment(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var i = start
        while i < bytes.count {
            if bytes[i] == 0x23 { return i }  // "#"
            i += 1
        }
        return nil
    }

    /// A `Host` field value (`uri-host [":" port]`) normalised like a target's host; `port` is nil
    /// when none was given. Throws `invalidTarget` for anything a target's authority would refuse.
    public static func parseHost(_ bytes: UnsafeRawBufferPointer) throws(HTTPWireError) -> (host: [UInt8], port: Int?) {
        // `port = *DIGIT` (RFC 3986): `host:` names no port.
        let end = bytes.count > 0 && bytes[bytes.count - 1] == asciiColon ? bytes.count - 1 : bytes.count
        let authority = try parseAuthority(bytes, 0, end, defaultPort: 0)
        guard authority.end == end else { throw .invalidTarget }
        return (authority.host, authority.explicitPort ? authority.port : nil)
    }

    private struct Authority {
        var host: [UInt8]
        var port: Int
        var explicitPort: Bool
        var end: Int
    }

    /// `host [":" port]` in `bytes[start..<end]`: an IP-literal in brackets or a reg-name restricted to
    /// ALPHA / DIGIT / "-" / "." / "_" / "~" (no userinfo, no percent-encoding, no sub-delims).
    /// Without `defaultPort` the port is required.
    private static func parseAuthority(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                                       defaultPort: Int?) throws(HTTPWireError) -> Authority {
        var i = start
        var host: [UInt8] = []
        if i < end, bytes[i] == 0x5B {  // "["
            i += 1
            let literalStart = i
            while i < end, bytes[i] != 0x5D { i += 1 }
            guard i < end, isIPv6Address(bytes, literalStart, i) else { throw .invalidTarget }
            host.reserveCapacity(i - literalStart)
            for k in literalStart..<i { host.append(asciiLower(bytes[k])) }
            i += 1
        } else {
            let nameStart = i
            while i < end, bytes[i] != asciiColon {
                let b = bytes[i]
                let ok = b &- 0x61 < 26 || b &- 0x41 < 26 || isDigit(b) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
                guard ok else { throw .invalidTarget }  // "@" (userinfo) lands here too
                i += 1
            }
            guard i > nameStart else { throw .invalidTarget }
            // One trailing dot names the same host (an absolute DNS name): drop it so that
            // `intranet.test.` meets every rule written for `intranet.test`.
            let nameEnd = bytes[i - 1] == 0x2E ? i - 1 : i
            guard nameEnd > nameStart, hasOnlyNonEmptyLabels(bytes, nameStart, nameEnd) else { throw .invalidTarget }
            if IPv4Host.endsInNumber(bytes, nameStart, nameEnd), !IPv4Host.isDotted(bytes, nameStart, nameEnd) {
                // `2130706437`, `127.5`, `0x7f.0.0.5`: the address a resolver or parent proxy
                // would read, in the one spelling the rules, the key and the origin see.
                guard let address = IPv4Host.parse(bytes, nameStart, nameEnd) else { throw .invalidTarget }
                host = IPv4Host.dotted(address)
            } else {
                host.reserveCapacity(nameEnd - nameStart)
                for k in nameStart..<nameEnd { host.append(asciiLower(bytes[k])) }
            }
        }
        if i == end {
            guard let port = defaultPort else { throw .invalidTarget }
            return Authority(host: host, port: port, explicitPort: false, end: i)
        }
        guard bytes[i] == asciiColon else { throw .invalidTarget }
        i += 1
        let portStart = i
        var port = 0
        while i < end, isDigit(bytes[i]) {
            port = port * 10 + Int(bytes[i] &- 0x30)
            guard port <= 65_535 else { throw .invalidTarget }
            i += 1
        }
        guard i > portStart, port > 0 else { throw .invalidTarget }
        return Authority(host: host, port: port, explicitPort: true, end: i)
    }

    /// No empty label: not `.a`, `a..b` or (after the one trailing dot is gone) `a.`.
    private static func hasOnlyNonEmptyLabels(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        var previousWasDot = true
        for k in start..<end {
            let dot = bytes[k] == 0x2E
            if dot, previousWasDot { return false }
            previousWasDot = dot
        }
        return !previousWasDot
    }

    /// RFC 3986 §3.2.2 IPv6address (without zone identifiers or IPvFuture).
    private static func isIPv6Address(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        var i = start
        var groups = 0
        var sawDoubleColon = false
        if end - start >= 2, bytes[start] == asciiColon, bytes[start + 1] == asciiColon {
            sawDoubleColon = true
            i += 2
            if i == end { return true }  // "::"
        } else if i < end, bytes[i] == asciiColon {
            return false
        }
        while i < end {
            // One group: 1-4 hex digits, or a dotted IPv4 address as the last two groups.
            let groupStart = i
            while i < end, hexValue(bytes[i]) != nil { i += 1 }
            if i < end, bytes[i] == 0x2E {
                guard isIPv4Address(bytes, groupStart, end) else { return false }
                groups += 2
                i = end
                break
            }
            let digits = i - groupStart
            guard digits >= 1, digits <= 4 else { return false }
            groups += 1
            if i == end { break }
            guard bytes[i] == asciiColon else { return false }
            i += 1
            if i < end, bytes[i] == asciiColon {
                guard !sawDoubleColon else { return false }
                sawDoubleColon = true
                i += 1
                if i == end { break }
            } else if i == end {
                return false  // trailing single ":"
            }
        }
        return sawDoubleColon ? groups <= 7 : groups == 8
    }

    private static func isIPv4Address(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        var i = start
        for part in 0..<4 {
            let partStart = i
            var value = 0
            while i < end, isDigit(bytes[i]), i - partStart < 3 {
                value = value * 10 + Int(bytes[i] &- 0x30)
                i += 1
            }
            guard i > partStart, value <= 255 else { return false }
            if part < 3 {
                guard i < end, bytes[i] == 0x2E else { return false }
                i += 1
            }
        }
        return i == end
    }

    /// `host` as a String (for DNS, logs).
    public var hostString: String { String(decoding: host, as: UTF8.self) }
}
