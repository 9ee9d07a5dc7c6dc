/// How many name lookups may be pending at once on one worker's resolver: in all, per client
/// address, and per registered domain, so that one client, or names under one domain whose name
/// server never answers, cannot take every query slot while the rest wait behind them. A lookup
/// holds its place until its answer or its timeout, even when whoever asked has gone: a client
/// that asks and hangs up cannot start more. Pure: the resolver calls `admit` and `release`.
public struct LookupBudget: Sendable {
    public enum Refusal: Sendable, Equatable {
        case full(limit: Int)
        case client(limit: Int)
        case domain(String, limit: Int)
        case clientInDomain(String, limit: Int)

        /// Why the lookup was not started, for error bodies and logs.
        public var reason: String {
            switch self {
            case .full(let n): return "\(n) name lookups already pending on this worker"
            case .client(let n): return "\(n) name lookups already pending for this client"
            case .domain(let d, let n): return "\(n) name lookups already pending under \(d)"
            case .clientInDomain(let d, let n): return "\(n) name lookups already pending under \(d) for this client"
            }
        }
    }

    public let total: Int
    public let perClient: Int
    public let perDomain: Int
    public private(set) var pending = 0
    private var byClient: [[UInt8]: Int] = [:]
    private var byDomain: [String: Int] = [:]
    /// One client's lookups under one domain: at most half the domain's bound, so a client whose
    /// names under a shared domain never answer leaves room for everyone else's names there.
    private var byClientInDomain: [ClientInDomain: Int] = [:]

    private struct ClientInDomain: Hashable {
        let client: [UInt8]
        let domain: String
    }

    /// A lookup is two queries (A and AAAA) and evdns takes `Resolver.maxInflightQueries`:
    /// the total leaves room for its probes, so no query ever waits inside evdns untimed.
    public static let defaultTotal = 500
    public static let defaultPerClient = 64
    public static let defaultPerDomain = 32

    public init(total: Int = LookupBudget.defaultTotal, perClient: Int = LookupBudget.defaultPerClient,
                perDomain: Int = LookupBudget.defaultPerDomain) {
        self.total = max(1, total)
        self.perClient = max(1, perClient)
        self.perDomain = max(1, perDomain)
    }

    /// Takes a place for one more lookup under `domain` for `client` (nil: Larder's own, such as
    /// a background refresh, bound only by the domain and the total), or says why there is none.
    public mutating func admit(client: [UInt8]?, domain: String) -> Refusal? {
        let mine = client.map { byClient[$0, default: 0] } ?? 0
        if mine >= perClient { return .client(limit: perClient) }
        let theirs = byDomain[domain, default: 0]
        if theirs >= perDomain { return .domain(domain, limit: perDomain) }
        let share = max(1, perDomain / 2)
        let key = client.map { ClientInDomain(client: $0, domain: domain) }
        let mineHere = key.map { byClientInDomain[$0, default: 0] } ?? 0
        if mineHere >= share { return .clientInDomain(domain, limit: share) }
        if pending >= total { return .full(limit: total) }
        pending += 1
        if let client { byClient[client] = mine + 1 }
        if let key { byClientInDomain[key] = mineHere + 1 }
        byDomain[domain] = theirs + 1
        return nil
    }

    /// Gives back the place `admit` gave for the same client and domain.
    public mutating func release(client: [UInt8]?, domain: String) {
        guard let theirs = byDomain[domain] else { return }
        pending -= 1
        byDomain[domain] = theirs > 1 ? theirs - 1 : nil
        if let client, let mine = byClient[client] { byClient[client] = mine > 1 ? mine - 1 : nil }
        if let client {
            let key = ClientInDomain(client: client, domain: domain)
            if let n = byClientInDomain[key] { byClientInDomain[key] = n > 1 ? n - 1 : nil }
        }
    }

    public func pending(client: [UInt8]) -> Int { byClient[client, default: 0] }
    public func pending(domain: String) -> Int { byDomain[domain, default: 0] }

    /// The registered domain a name's lookups count against: its last two labels
    /// (`a.b.example.com` → `example.com`, `hole-7.test` → `hole-7.test`), or three under a
    /// country's second level (`www.good.co.uk` → `good.co.uk`, `shop.example.com.au` →
    /// `example.com.au`): without a public suffix list, a two-letter top level whose second
    /// label is short or a common registry category counts as a suffix, so one client's dead
    /// names under `co.uk` cannot hold the lookups of every other `co.uk` site. Guessing wrong
    /// only makes a bound finer or coarser for lookups pending at the same moment.
    public static func registeredDomain(of host: String) -> String {
        var labels = host.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: true)
        let take = labels.count >= 3 && isSecondLevelSuffix(labels[labels.count - 2], under: labels[labels.count - 1]) ? 3 : 2
        if labels.count > take { labels.removeFirst(labels.count - take) }
        return labels.map { String(Substring($0)) }.joined(separator: ".")
    }

    private static let registryCategories: Set<String> = ["com", "net", "org", "gov", "edu", "ac", "co", "or", "ne",
                                                          "go", "gob", "mil", "nic", "ltd", "plc", "sch", "nhs"]

    private static func isSecondLevelSuffix(_ label: Substring.UTF8View, under top: Substring.UTF8View) -> Bool {
        guard top.count == 2 else { return false }
        return label.count <= 2 || registryCategories.contains(String(Substring(label)).lowercased())
    }
}
