import CachePolicy
import HTTPWire
import LarderConfig
import Statistics

/// `lifetime_from_current_rules` in `GET /cache?url=`: which rule sets a stored response's
/// freshness lifetime, the user's own (`cache.rules`) or a preset's, or that the response's own
/// fields do. Worked out from the rules in force now rather than recorded when the entry was
/// stored: nothing is added to every stored record, and after a reload the answer says what the
/// rules now in force make of the entry (its `lifetime` here may then differ from the
/// `freshness_lifetime` it was stored with, which is itself a finding).
struct EntryLifetimes {
    let url: AdminContext.KeyedURL
    let setup: CacheSetup
    /// Where each of `setup.rules` is written, and how.
    let sources: [RuleSource]
    let rules: [CacheRuleConfig]

    init(_ config: Config, url: AdminContext.KeyedURL) {
        self.url = url
        setup = CacheSetup(config)
        // The same list CacheSetup's rules are made from, in the same order.
        let inForce = config.rulesInForce
        sources = inForce.map(\.source)
        rules = inForce.map(\.rule)
    }

    /// `{"source": "preset", "preset": "pypi", "rule": 2, …, "lifetime": 31536000}`,
    /// `{"source": "rules", "rule": 0, …}` or `{"source": "origin", …}`.
    func json(head: ResponseHead, facts: EntryFacts, bodyLength: Int) -> String {
        let matched = url.path.withUnsafeBytes { path in
            let scheme = url.scheme, host = url.host, rules = setup.rules
            guard let ct = head.headers.firstIndex(of: "content-type").map({ head.headers.fields[$0].value }) else {
                return rules.freshnessRule(scheme: scheme, host: host, path: path, status: head.status, contentType: nil)
            }
            return head.headers.withBytes(ct) {
                rules.freshnessRule(scheme: scheme, host: host, path: path, status: head.status, contentType: $0)
            }
        }
        // As the store judged it: a targeted field addressed to this cache stands for Cache-Control.
        let policyHead = TargetedCacheControl.policyHead(of: head, targets: setup.targetedFields) ?? head
        let source = setup.rules.lifetimeSource(matched: matched, response: policyHead, requestTime: facts.requestTime,
                                                responseTime: facts.responseTime, bodyLength: bodyLength,
                                                settings: setup.policy)
        var out = "{"
        if let rule = source.rule {
            out += describe(rule)
        } else {
            out += "\"source\":\"origin\""
            if let unused = source.unused {
                out += ",\"unused_rule\":{" + describe(unused.rule) + ",\"why\":" + jsonString(Self.why(unused.why)) + "}"
            }
        }
        return out + ",\"lifetime\":\(source.lifetime),\"heuristic\":\(source.heuristic)}"
    }

    /// The members naming the rule at `index` of the rules in force.
    private func describe(_ index: Int) -> String {
        // Both lists are made from one configuration, as CacheSetup's rules are: never out of step.
        guard sources.indices.contains(index), rules.indices.contains(index) else {
            return "\"source\":\"unknown\",\"rule\":\(index)"
        }
        let place = sources[index]
        var out = place.preset.map { "\"source\":\"preset\",\"preset\":" + jsonString($0) } ?? "\"source\":\"rules\""
        out += ",\"rule\":\(place.index)"
        if let path = rules[index].path { out += ",\"path\":" + jsonString(path.description) }
        return out + ",\"as_written\":" + jsonString(rules[index].written)
    }

    static func why(_ unused: LifetimeSource.Unused) -> String {
        switch unused {
        case .noEffect: return "its lifetimes change nothing for this response"
        case .yielded(let refusal):
            let because: String
            switch refusal {
            case .requestCookie: because = "the request carried Cookie"
            case .requestAuthorization: because = "the request carried Authorization"
            case .setCookie: because = "the response sets a cookie"
            case .responseDirective: because = "the response's own Cache-Control or Expires asks otherwise"
            case .htmlForArtifact: because = "an HTML page is no package file"
            }
            return "a preset's lifetime yields to the response: " + because
        }
    }
}
