import CachePolicy
import HTTPWire
import SessionClient

/// Reverse (accelerator) mode: every request goes to `reverse_origin`. The Host the client names
/// is checked against `reverse_allowed_hosts`, and the cache is keyed on the Host actually sent
/// upstream, so that one client's `Host: evil.example` can never become another client's page.
extension ClientConnection {
    func forwardReverse(to reverse: OriginKey, target: RequestTarget, path: Range<Int>) {
        let named: ReverseHostName?
        switch requestedHost(target) {
        case .success(let n): named = n
        case .failure(let problem):
            reject(400, problem.reason)
            return
        }
        let allowed = worker.settings.reverseAllowedHosts
        if !allowed.isEmpty {
            guard let named, allowed.contains(where: { $0.matches(named.host) }) else {
                worker.stats.add(.deniedDestination)
                respondAndContinue(400, "Host \(named.map { String(decoding: $0.host, as: UTF8.self) } ?? "(none)") "
                                   + "is not served here (reverse_allowed_hosts)")
                return
            }
        }
        let originAuthority = authorityBytes(host: Array(reverse.host.utf8), port: reverse.port, scheme: reverse.scheme)
        var route = OutboundHead.Route(scheme: reverse.scheme, authority: originAuthority,
                                       absoluteForm: worker.session.usesParentProxy)
        var keyedAs = reverse
        if worker.settings.reverseHost == .client, let named {
            // Key and forward the same spelling: the default port elided in both (`site:80` is `site`).
            let port = named.port ?? (reverse.scheme == .https ? 443 : 80)
            route.host = authorityBytes(host: named.host, port: port, scheme: reverse.scheme)
            keyedAs = OriginKey(scheme: reverse.scheme, host: String(decoding: named.host, as: UTF8.self), port: port)
        }
        forward(to: reverse, route: route, path: path, keyedAs: keyedAs)
    }

    /// The host the client addressed: an absolute URI's authority (RFC 9112 §3.2.2: it overrides
    /// Host), else the Host field, normalised as targets are. Nil for an HTTP/1.0 request without Host.
    private func requestedHost(_ target: RequestTarget) -> Result<ReverseHostName?, HostProblem> {
        if target.form == .absolute {
            let port = target.hasExplicitPort ? target.port : nil
            return .success(ReverseHostName(host: target.host, port: port))
        }
        guard let i = request.headers.firstIndex(of: "host") else { return .success(nil) }
        return request.headers.withBytes(request.headers.fields[i].value) { bytes -> Result<ReverseHostName?, HostProblem> in
            if bytes.isEmpty { return .success(nil) }  // a target without authority (RFC 9112 §3.2)
            guard let parsed = try? RequestTarget.parseHost(bytes) else {
                return .failure(HostProblem(reason: "Host \(String(decoding: bytes, as: UTF8.self)) is not a host name or address"))
            }
            return .success(ReverseHostName(host: parsed.host, port: parsed.port))
        }
    }
}

struct HostProblem: Error {
    var reason: String
}

/// The Host a client named: normalised name or address, and the port if one was given.
struct ReverseHostName {
    var host: [UInt8]
    var port: Int?
}
