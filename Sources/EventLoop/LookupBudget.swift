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

        /// Why the lookup was not started, for error bodies and logs.
        public var reason: String {
            switch self {
            case .full(let n): return "\(n) name lookups already pending on this worker"
            case .client(let n): return "\(n) name lookups already pending for this client"
            case .domain(let d, let n): return "\(n) name lookups already pending under \(d)"
            }
        }
    }

    public let total: Int
    public let perClient: Int
    public let perDomain: Int
    public private(set) var pending = 0
    private var byClient: [[UInt8]: Int] = [:]
    private var byDomain: [String: Int] = [:]

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
        if pending >= total { return .full(limit: total) }
        pending += 1
        if let client { byClient[client] = mine + 1 }
        byDomain[domain] = theirs + 1
        return nil
    }

    /// Gives back the place `admit` gave for the same client and domain.
    public mutating func release(client: [UInt8]?, domain: String) {
        guard let theirs = byDomain[domain] else { return }
        pending -= 1
        byDomain[domain] = theirs > 1 ? theirs - 1 : nil
        if let client, let mine = byClient[client] { byClient[client] = mine > 1 ? mine - 1 : nil }
    }

    public func pending(client: [UInt8]) -> Int { byClient[client, default: 0] }
    public func pending(domain: String) -> Int { byDomain[domain, default: 0] }

    /// The registered domain a name's lookups count against: its last two labels
    /// (`a.b.example.com` → `example.com`, `hole-7.test` → `hole-7.test`). Without a public
    /// suffix list this groups all of `co.uk` together: its names share one bound, which only
    /// limits lookups pending at the same moment, never cached or answered ones.
    public static func registeredDomain(of host: String) -> String {
        var utf8 = host.utf8[...]
        if utf8.last == UInt8(ascii: ".") { utf8 = utf8.dropLast() }
        var dots = 0
        var i = utf8.endIndex
        while i > utf8.startIndex {
            let before = utf8.index(before: i)
            if utf8[before] == UInt8(ascii: ".") {
                dots += 1
                if dots == 2 { return String(Substring(utf8[i...])) }
            }
            i = before
        }
        return String(Substring(utf8))
    }
}
