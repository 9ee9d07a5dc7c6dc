import Testing
import HTTPWire
import CachePolicy

struct NetworkAccessRow: Sendable, CustomTestStringConvertible {
    var name: String
    var offline: Bool
    var method: HTTPMethod
    var hasBody: Bool
    var upgrade: Bool
    var intercepted: Bool
    /// nil: allowed; 0: cache only; else the refusal's status.
    var expected: Int?
    var testDescription: String { name }
}

enum NetworkAccessTable {
    static func row(_ name: String, offline: Bool = true, _ method: HTTPMethod, body: Bool = false, upgrade: Bool = false,
                    intercepted: Bool = false, _ expected: Int?) -> NetworkAccessRow {
        NetworkAccessRow(name: name, offline: offline, method: method, hasBody: body, upgrade: upgrade,
                         intercepted: intercepted, expected: expected)
    }

    static let cacheOnly = 0

    static let rows: [NetworkAccessRow] = [
        row("online GET", offline: false, .get, nil),
        row("online POST with a body", offline: false, .post, body: true, nil),
        row("online CONNECT", offline: false, .connect, nil),
        row("online WebSocket upgrade", offline: false, .get, upgrade: true, nil),
        row("online OPTIONS", offline: false, .options, nil),
        row("offline GET: the cache only", .get, cacheOnly),
        row("offline HEAD: the cache only", .head, cacheOnly),
        row("offline GET with a body: never answered from the cache", .get, body: true, 503),
        row("offline HEAD with a body", .head, body: true, 503),
        row("offline WebSocket upgrade: would become a tunnel", .get, upgrade: true, 503),
        row("offline CONNECT: no tunnel", .connect, 503),
        row("offline intercepted CONNECT: answered here, its requests judged one by one", .connect, intercepted: true,
            cacheOnly),
        row("offline POST", .post, body: true, 503),
        row("offline POST without a body", .post, 503),
        row("offline PUT", .put, body: true, 503),
        row("offline DELETE", .delete, 503),
        row("offline PATCH", .patch, body: true, 503),
        row("offline OPTIONS", .options, 503),
        row("offline TRACE", .trace, 503),
        row("offline unknown method", .other, 503),
    ]
}

@Suite("NetworkAccess")
struct NetworkAccessTests {
    @Test("decide", arguments: NetworkAccessTable.rows)
    func decide(_ row: NetworkAccessRow) {
        let verdict = NetworkAccess.decide(offline: row.offline, method: row.method, hasBody: row.hasBody,
                                           upgrade: row.upgrade, intercepted: row.intercepted)
        switch (verdict, row.expected) {
        case (.allowed, nil): break
        case (.cacheOnly, .some(NetworkAccessTable.cacheOnly)): break
        case (.refused(let status, let reason), .some(let expected)):
            #expect(status == expected)
            #expect(reason.contains("offline"))
        default:
            Issue.record("\(verdict), expected \(String(describing: row.expected))")
        }
    }

    /// Offline, no header, rule or directive reaches the network: each policy is "don't load".
    @Test("offline overrides every policy", arguments: RequestCachePolicy.allCases)
    func offlineOverridesPolicies(_ policy: RequestCachePolicy) throws {
        var settings = PolicySettings()
        settings.offline = true
        let byHeader = try RequestFacts.make(request(["Larder-Cache-Policy: \(policy.rawValue)"]), rulePolicy: nil,
                                             settings: settings)
        let byRule = try RequestFacts.make(request([]), rulePolicy: policy, settings: settings)
        #expect(byHeader.policy == .returnCacheDataDontLoad)
        #expect(byRule.policy == .returnCacheDataDontLoad)
        for facts in [byHeader, byRule] {
            #expect(Lookup.decide(request: facts, entry: entry(LookupTable.fresh60), anyStored: true, now: t0 + 5,
                                  settings: settings) == .serve(age: 5, stale: false))
            #expect(Lookup.decide(request: facts, entry: entry(LookupTable.fresh60), anyStored: true, now: t0 + 600,
                                  settings: settings) == .serve(age: 600, stale: true))
            #expect(Lookup.decide(request: facts, entry: nil, anyStored: false, now: t0, settings: settings)
                    == .gatewayTimeout)
        }
    }

    @Test("offline lookups never use the network", arguments: OfflineLookupTable.rows)
    func offlineLookup(_ row: LookupRow) throws {
        var settings = PolicySettings()
        settings.offline = true
        settings.revalidation = row.revalidation
        let facts = try RequestFacts.make(request(row.requestFields, method: row.method), rulePolicy: row.policy,
                                          settings: settings)
        let decision = Lookup.decide(request: facts, entry: lookupEntry(row.stored), anyStored: row.anyStored,
                                     now: row.now, settings: settings)
        #expect(decision == row.expected)
    }
}

enum OfflineLookupTable {
    static let fresh60 = LookupTable.fresh60

    static let rows: [LookupRow] = [
        LookupTable.row("fresh: served", stored: fresh60, now: t0 + 1, .serve(age: 1, stale: false)),
        LookupTable.row("stale: served stale, not revalidated", stored: fresh60, now: t0 + 61, .serve(age: 61, stale: true)),
        LookupTable.row("stale-while-revalidate: served stale, no background refresh", stored: LookupTable.swr, now: t0 + 61,
            .serve(age: 61, stale: true)),
        LookupTable.row("request no-cache: served, not revalidated", request: ["Cache-Control: no-cache"],
            revalidation: .conditionalGet, stored: fresh60, now: t0 + 1, .serve(age: 1, stale: false)),
        LookupTable.row("request max-age=0: served", request: ["Cache-Control: max-age=0"], stored: fresh60, now: t0 + 1,
            .serve(age: 1, stale: false)),
        LookupTable.row("min-fresh not met: served, not fetched", request: ["Cache-Control: min-fresh=100"], stored: fresh60,
            now: t0 + 1, .serve(age: 1, stale: false)),
        LookupTable.row("reload rule: served", policy: .reloadIgnoringLocalCacheData, stored: fresh60, now: t0 + 1,
            .serve(age: 1, stale: false)),
        LookupTable.row("else-load rule, nothing stored: 504", policy: .returnCacheDataElseLoad, stored: nil, anyStored: false,
            .gatewayTimeout),
        LookupTable.row("no variant: 504", stored: nil, .gatewayTimeout),
        LookupTable.row("Vary: *: 504", stored: LookupTable.varyStar, .gatewayTimeout),
        LookupTable.row("no-cache entry: 504 (RFC9111 5.2.2.4)", stored: LookupTable.noCache, .gatewayTimeout),
        LookupTable.row("must-revalidate stale: 504 (RFC9111 5.2.2.2)", stored: LookupTable.mustRevalidate, now: t0 + 61,
            .gatewayTimeout),
        LookupTable.row("RFC9110 13.1.1 If-Match: 504, not a bypass", request: ["If-Match: \"a\""], stored: fresh60,
            .gatewayTimeout),
        LookupTable.row("RFC9110 13.1.4 If-Unmodified-Since: 504", request: ["If-Unmodified-Since: \(Dates.t0)"], stored: fresh60,
            .gatewayTimeout),
        LookupTable.row("HEAD stale: served", method: "HEAD", stored: fresh60, now: t0 + 100, .serve(age: 100, stale: true)),
    ]
}
