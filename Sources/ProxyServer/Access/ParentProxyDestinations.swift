import EventLoop

/// Destination checks for requests a parent proxy (`session.proxy`) carries. Larder then connects
/// only to the parent, so the address rules the session applies after DNS (`deny_destinations`
/// networks, link-local by default, this proxy's own listeners) would only ever see the parent's
/// address. Here the requested host itself is checked before the request is forwarded: an
/// address literal directly, a name by resolving it with the worker's resolver, refused when any
/// of its addresses is denied.
///
/// A name that does not resolve here is left to the parent: many parent proxies exist because
/// local DNS cannot resolve outside names, and such a name cannot lead Larder's own checks to a
/// local address either (the parent resolves it, and applies its own rules). A lookup the
/// resolver would not start (too many pending) is not such a name: the request is refused for
/// now, since the name might well lead to a denied address.
///
/// What names resolved to is the resolver's cache (within the answers' TTLs): a request whose name
/// is known costs one hash lookup; the rules are applied on every use, so a reload's
/// `deny_destinations` counts at once. Concurrent requests for one name share its lookup there.
/// One per worker, used on its loop.
final class ParentProxyDestinations {
    enum Answer: Equatable {
        case allowed
        case refused(String)
        /// The name cannot be checked now (too many lookups pending): 503.
        case unavailable(String)
        /// The name is being resolved; `whenKnown` runs on the loop with the answer.
        case resolving
    }

    private let resolver: Resolver

    init(resolver: Resolver) {
        self.resolver = resolver
    }

    /// Whether a request from `client` may go to `host` (lower case, IPv6 without brackets) on `port`.
    func check(host: String, port: Int, client: [UInt8], rules: DestinationRules,
               whenKnown: @escaping (Answer) -> Void) -> Answer {
        if let literal = SocketAddress(ipLiteral: host, port: port) {
            return rules.refusal(address: literal, port: port).map(Answer.refused) ?? .allowed
        }
        if let known = resolver.known(host) {
            guard case .addresses(let list) = known else { return .allowed }
            return verdict(list, host: host, port: port, rules: rules)
        }
        // The resolver may answer before `resolve` returns (a refusal): then the answer is given
        // here rather than through `whenKnown`.
        var inline = true
        var answeredInline: Answer?
        resolver.resolve(host: host, port: port, client: client) { [weak self] result in
            guard let self else { return }
            let answer: Answer
            switch result {
            case .success(let list): answer = self.verdict(list, host: host, port: port, rules: rules)
            case .failure(.refused(let reason)): answer = .unavailable("DNS lookup for \(host) not started: \(reason)")
            case .failure: answer = .allowed
            }
            if inline { answeredInline = answer } else { whenKnown(answer) }
        }
        inline = false
        return answeredInline ?? .resolving
    }

    private func verdict(_ list: [SocketAddress], host: String, port: Int, rules: DestinationRules) -> Answer {
        for address in list {
            if let reason = rules.refusal(address: address, port: port) { return .refused("\(host): \(reason)") }
        }
        return .allowed
    }
}
