import HTTPWire

/// What decides a stored response's freshness lifetime under a set of rules: a rule, or the
/// response's own fields (max-age, Expires, the heuristic). Worked out again from the stored head
/// and times, for the admin endpoint's description of an entry: the rules in force now may differ
/// from those the entry was stored under, and the lifetime given here is the one they give.
public struct LifetimeSource: Sendable, Equatable {
    /// The index in `CacheRules.rules` of the rule that sets the lifetime; nil when the
    /// response's own fields do.
    public var rule: Int?
    /// When the response's own fields decide although a rule with a lifetime matches: that rule,
    /// and why it does not apply.
    public var unused: UnusedRule?
    /// The freshness lifetime these rules give, in seconds.
    public var lifetime: Int64
    public var heuristic: Bool

    public struct UnusedRule: Sendable, Equatable {
        public var rule: Int
        public var why: Unused
        public init(rule: Int, why: Unused) { self.rule = rule; self.why = why }
    }

    public enum Unused: Sendable, Equatable {
        /// A preset's lifetime yields to the response's own fields (`SharingGuard`).
        case yielded(SharingGuard.Refusal)
        /// The rule's lifetimes change nothing here (a `default` meets an explicit lifetime, a
        /// `maximum` above it).
        case noEffect
    }
}

extension CacheRules {
    /// The first rule with a lifetime that matches the URL and the response (the one `storage`
    /// takes its freshness from).
    public func freshnessRule(scheme: String, host: [UInt8], path: UnsafeRawBufferPointer, status: Int,
                              contentType: UnsafeRawBufferPointer?) -> Int? {
        rules.indices.first { i in
            rules[i].freshness != nil && rules[i].matchesURL(scheme: scheme, host: host, path: path)
                && rules[i].matchesResponse(status: status, contentType: contentType)
        }
    }

    /// What decides the lifetime of `response` (as stored: after any targeted field took the place
    /// of `Cache-Control`), received at `responseTime` for a request sent at `requestTime`.
    /// `matched` is `freshnessRule` for it. The request's own fields are not at hand: a preset
    /// that yielded to its `Cookie` or `Authorization` is not seen here.
    public func lifetimeSource(matched: Int?, response: ResponseHead, requestTime: Int64, responseTime: Int64,
                               bodyLength: Int?, settings: PolicySettings) -> LifetimeSource {
        let own = EntryFacts.make(response: response, requestTime: requestTime, responseTime: responseTime,
                                  bodyLength: bodyLength, settings: settings, override: nil)
        var source = LifetimeSource(rule: nil, unused: nil, lifetime: own.freshnessLifetime, heuristic: own.heuristic)
        guard let matched, let override = rules[matched].freshness else { return source }
        if override.guarded, let refusal = SharingGuard.refusal(override, requestHeaders: nil, response: response) {
            source.unused = LifetimeSource.UnusedRule(rule: matched, why: .yielded(refusal))
            return source
        }
        let ruled = EntryFacts.make(response: response, requestTime: requestTime, responseTime: responseTime,
                                    bodyLength: bodyLength, settings: settings, override: override)
        guard ruled.freshnessLifetime != own.freshnessLifetime || ruled.heuristic != own.heuristic else {
            source.unused = LifetimeSource.UnusedRule(rule: matched, why: .noEffect)
            return source
        }
        return LifetimeSource(rule: matched, unused: nil, lifetime: ruled.freshnessLifetime, heuristic: ruled.heuristic)
    }
}
