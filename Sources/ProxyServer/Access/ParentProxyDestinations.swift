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
/// local address either (the parent resolves it, and applies its own rules).
///
/// What a name resolved to is kept for `freshFor` seconds (at most `capacity` names, least
/// recently used out first), so a request costs a lookup only now and then; the rules are applied
/// on every use, so a reload's `deny_destinations` counts at once. One per worker, used on its loop.
final class ParentProxyDestinations {
    enum Answer: Equatable {
        case allowed
        case refused(String)
        /// The name is being resolved; `whenKnown` runs on the loop once it is, then ask again.
        case resolving
    }

    private enum Resolution {
        case addresses([SocketAddress])
        case unresolved
    }

    private struct Known {
        var resolution: Resolution
        var until: Double
    }

    private let resolver: Resolver
    private let clock: any ProxyClock
    private var known: LRUCache<String, Known>
    /// Names being resolved, with whoever waits for them: one lookup however many ask.
    private var waiting: [String: [() -> Void]] = [:]

    static let freshFor = 30.0
    static let capacity = 4_096

    init(resolver: Resolver, clock: any ProxyClock, capacity: Int = ParentProxyDestinations.capacity) {
        self.clock = clock
        self.resolver = resolver
        known = LRUCache(capacity: capacity)
    }

    /// Whether a request may go to `host` (lower case, IPv6 without brackets) on `port`.
    func check(host: String, port: Int, rules: DestinationRules, now: Double,
               whenKnown: @escaping () -> Void) -> Answer {
        if let literal = SocketAddress(ipLiteral: host, port: port) {
            return rules.refusal(address: literal, port: port).map(Answer.refused) ?? .allowed
        }
        if let entry = known.value(for: host), entry.until > now {
            return verdict(entry.resolution, host: host, port: port, rules: rules)
        }
        if waiting[host] != nil {
            waiting[host]!.append(whenKnown)
            return .resolving
        }
        waiting[host] = [whenKnown]
        // The resolver may answer before `resolve` returns (e.g. from /etc/hosts): then the answer
        // is given here rather than through `whenKnown`.
        var inline = true
        var answeredInline: Resolution?
        resolver.resolve(host: host, port: port) { [weak self] result in
            guard let self else { return }
            let resolution: Resolution
            switch result {
            case .success(let list): resolution = .addresses(list)
            case .failure: resolution = .unresolved
            }
            self.known.set(Known(resolution: resolution, until: self.clock.monotonic + ParentProxyDestinations.freshFor),
                           for: host)
            let waiters = self.waiting.removeValue(forKey: host) ?? []
            if inline {
                answeredInline = resolution
                return
            }
            for w in waiters { w() }
        }
        inline = false
        if let answeredInline { return verdict(answeredInline, host: host, port: port, rules: rules) }
        return .resolving
    }

    private func verdict(_ resolution: Resolution, host: String, port: Int, rules: DestinationRules) -> Answer {
        guard case .addresses(let list) = resolution else { return .allowed }
        for address in list {
            if let reason = rules.refusal(address: address, port: port) { return .refused("\(host): \(reason)") }
        }
        return .allowed
    }
}
