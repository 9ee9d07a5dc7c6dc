import EventLoop
import HTTPWire
import LarderConfig

/// Which requests the admin endpoint answers at all, judged from the request head before the token
/// and the routes. It defends against browsers, which any web page can point at a loopback address:
///
/// * DNS rebinding: a page on `evil.example` re-points its name at 127.0.0.1, then reads the admin
///   endpoint as if it were its own origin. Its requests say `Host: evil.example`, so `Host` must
///   name this endpoint: the address the connection arrived on (with the listener's port, or no
///   port), `localhost` (likewise) when that address is loopback, or a name in `admin_hosts` (any
///   port: a front proxy may publish the endpoint elsewhere). A request without `Host` (HTTP/1.0)
///   passes: browsers always send one.
/// * Cross-site requests: any page can make a browser POST a form (no CORS preflight) to
///   `http://127.0.0.1:9090/config/reload`. A state-changing request (anything but GET and HEAD) is
///   refused when its `Origin` is not this endpoint, when it carries one of the content types a
///   form can send without a preflight, or when `Sec-Fetch-Site` says another site or origin sent it.
///
/// `/healthz` is exempt: orchestrators probe it by pod address or service name, and it says nothing
/// but "ok".
struct AdminRequestGuard {
    /// The address the connection arrived on (IPv4-mapped IPv6 as IPv4).
    let localAddress: [UInt8]
    /// The listener's real port (known only after bind when 0 was configured).
    let port: Int
    /// `http`, or `https` with `tls.admin`.
    let scheme: String
    /// `admin_hosts`: lowercased, IPv6 without brackets.
    let names: [String]
    /// `127.0.0.1:9090` or `[::1]:9090`, for messages.
    private let ownAuthority: String

    init(local: SocketAddress, scheme: String, names: [String]) {
        localAddress = AddressRange.unmapped(local.addressBytes)
        port = local.port
        self.scheme = scheme
        self.names = names
        ownAuthority = localAddress.count == 4
            ? localAddress.map(String.init).joined(separator: ".") + ":\(local.port)" : local.description
    }

    /// What the guard reads of a request.
    struct Request {
        var method: HTTPMethod
        var path: String
        var host: String? = nil
        var origin: String? = nil
        var contentType: String? = nil
        var fetchSite: String? = nil
    }

    struct Refusal: Equatable {
        let status: Int
        let reason: String
    }

    /// nil when the request may go on to the token check and the routes.
    func refusal(_ r: Request) -> Refusal? {
        if r.path == "/healthz" { return nil }
        if let host = r.host, !acceptsHost(host) {
            return Refusal(status: 421, reason: "Host \(host) is not this admin endpoint: use \(ownAuthority)"
                           + "\(isLoopback ? " or localhost:\(port)" : ""), or add the name to admin_hosts")
        }
        if r.method == .get || r.method == .head { return nil }
        return crossSiteRefusal(r)
    }

    private func crossSiteRefusal(_ r: Request) -> Refusal? {
        if let origin = r.origin, !acceptsOrigin(origin) {
            return Refusal(status: 403, reason: "Origin \(origin) is not this admin endpoint (\(scheme)://\(ownAuthority)): "
                           + "state-changing requests are taken only from the endpoint's own pages and from tools")
        }
        if let type = r.contentType.map(AdminRequestGuard.mediaType), AdminRequestGuard.formTypes.contains(type) {
            return Refusal(status: 403, reason: "a \(type) body is what a cross-site form sends; "
                           + "state-changing admin requests need no body (POST /warm: send its list as text/uri-list)")
        }
        if let site = r.fetchSite.map({ String($0.trimmingOptionalWhitespace()).lowercased() }), site != "same-origin", site != "none" {
            return Refusal(status: 403, reason: "Sec-Fetch-Site: \(site): the browser says another site sent this "
                           + "state-changing request")
        }
        return nil
    }

    /// Content types a page may send cross-site without a CORS preflight (the Fetch standard's
    /// CORS-safelisted request content types).
    static let formTypes: Set<String> = ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"]

    /// `text/plain` of `Text/Plain; charset=utf-8`.
    static func mediaType(_ field: String) -> String {
        String(field.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0].trimmingOptionalWhitespace()).lowercased()
    }

    func acceptsHost(_ field: String) -> Bool {
        guard let a = HostAndPort(Substring(field)) else { return false }
        return isOwn(a.host, port: a.port) || isNamed(a.host)
    }

    /// `Origin: scheme://host[:port]`; the port, when left out, is the scheme's default.
    func acceptsOrigin(_ field: String) -> Bool {
        let t = field.trimmingOptionalWhitespace()
        let lower = t.lowercased()
        let originScheme = lower.hasPrefix("https://") ? "https" : lower.hasPrefix("http://") ? "http" : nil
        guard let originScheme else { return false }  // `null` (opaque origins) included
        guard let a = HostAndPort(t.dropFirst(originScheme.count + 3)) else { return false }
        if isNamed(a.host) { return true }
        return originScheme == scheme && isOwn(a.host, port: a.port ?? (originScheme == "https" ? 443 : 80))
    }

    /// The listener's own address, or `localhost` when it is loopback; the port, if any, its own.
    private func isOwn(_ host: String, port: Int?) -> Bool {
        guard port == nil || port == self.port else { return false }
        if host == "localhost" { return isLoopback }
        return ConfigLoader.addressBytes(host).map(AddressRange.unmapped) == localAddress
    }

    private func isNamed(_ host: String) -> Bool {
        names.contains { AdminRequestGuard.sameHost($0, host) }
    }

    /// Addresses compare as addresses (`::ffff:10.0.0.5` is `10.0.0.5`), names as lowercase text.
    private static func sameHost(_ a: String, _ b: String) -> Bool {
        if let x = ConfigLoader.addressBytes(a), let y = ConfigLoader.addressBytes(b) {
            return AddressRange.unmapped(x) == AddressRange.unmapped(y)
        }
        return a == b
    }

    private var isLoopback: Bool { AddressRange.loopback.contains { $0.contains(localAddress) } }
}

/// `host[:port]` or `[IPv6]:port` as `Host` and `Origin` carry it: the host lowercased and without
/// brackets, the port when one is given.
struct HostAndPort: Equatable {
    var host: String
    var port: Int?

    init?(_ text: Substring) {
        let t = text.trimmingOptionalWhitespace()
        let portText: Substring
        if t.hasPrefix("[") {
            guard let close = t.firstIndex(of: "]") else { return nil }
            host = String(t[t.index(after: t.startIndex)..<close]).lowercased()
            let rest = t[t.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            let parts = t.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }  // a bare IPv6 address is not a Host
            host = String(parts[0]).lowercased()
            portText = parts.count == 2 ? parts[1] : ""
        }
        guard !host.isEmpty else { return nil }
        if portText.isEmpty {
            port = nil  // RFC 3986 §3.2.3: an empty port is the scheme's default
        } else {
            guard portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let p = Int(portText), p <= 65_535 else { return nil }
            port = p
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    fileprivate func trimmingOptionalWhitespace() -> SubSequence {
        var s = self[...]
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return s
    }
}
