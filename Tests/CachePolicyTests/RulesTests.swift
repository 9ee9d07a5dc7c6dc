import Testing
import CachePolicy

struct RequestRuleRow: Sendable, CustomTestStringConvertible {
    var name: String
    var rules: [CacheRule]
    var scheme: String
    var host: String
    var path: String
    var expected: RequestCachePolicy?
    var testDescription: String { name }
}

struct StorageRuleRow: Sendable, CustomTestStringConvertible {
    var name: String
    var rules: [CacheRule]
    var path: String
    var status: Int
    var contentType: String?
    var policy: StoragePolicy
    var freshness: FreshnessOverride?
    var testDescription: String { name }
}

enum RequestRuleTable {
    static func row(_ name: String, _ rules: [CacheRule], scheme: String = "http", host: String = "example.com",
                    path: String = "/index.html", _ expected: RequestCachePolicy?) -> RequestRuleRow {
        RequestRuleRow(name: name, rules: rules, scheme: scheme, host: host, path: path, expected: expected)
    }

    static let elseLoad = RequestCachePolicy.returnCacheDataElseLoad
    static let dontLoad = RequestCachePolicy.returnCacheDataDontLoad

    static let rows: [RequestRuleRow] = [
        row("rules: none", [], nil),
        row("rules: empty rule matches everything", [CacheRule(requestPolicy: elseLoad)], elseLoad),
        row("rules: exact host", [CacheRule(host: "example.com", requestPolicy: elseLoad)], elseLoad),
        row("rules: exact host, rule in another case", [CacheRule(host: "Example.COM", requestPolicy: elseLoad)], elseLoad),
        row("rules: exact host does not match a subdomain", [CacheRule(host: "example.com", requestPolicy: elseLoad)],
            host: "www.example.com", nil),
        row("rules: other host", [CacheRule(host: "example.org", requestPolicy: elseLoad)], nil),
        row("rules: *.example.com matches a subdomain", [CacheRule(host: "*.example.com", requestPolicy: elseLoad)],
            host: "img.example.com", elseLoad),
        row("rules: *.example.com matches a deeper subdomain", [CacheRule(host: "*.example.com", requestPolicy: elseLoad)],
            host: "a.b.example.com", elseLoad),
        row("rules: *.example.com does not match example.com", [CacheRule(host: "*.example.com", requestPolicy: elseLoad)],
            host: "example.com", nil),
        row("rules: *.example.com does not match badexample.com",
            [CacheRule(host: "*.example.com", requestPolicy: elseLoad)], host: "badexample.com", nil),
        row("rules: * matches any host", [CacheRule(host: "*", requestPolicy: elseLoad)], host: "anything.test", elseLoad),
        row("rules: scheme https only, http request", [CacheRule(scheme: "https", requestPolicy: elseLoad)], nil),
        row("rules: scheme https only, https request", [CacheRule(scheme: "https", requestPolicy: elseLoad)],
            scheme: "https", elseLoad),
        row("rules: scheme compared case-insensitively", [CacheRule(scheme: "HTTP", requestPolicy: elseLoad)], elseLoad),
        row("rules: path prefix matches", [CacheRule(pathPrefix: "/static/", requestPolicy: elseLoad)],
            path: "/static/app.js", elseLoad),
        row("rules: path prefix does not match", [CacheRule(pathPrefix: "/static/", requestPolicy: elseLoad)],
            path: "/api/x", nil),
        row("rules: path prefix is case-sensitive", [CacheRule(pathPrefix: "/static/", requestPolicy: elseLoad)],
            path: "/STATIC/app.js", nil),
        row("rules: path shorter than the prefix", [CacheRule(pathPrefix: "/static/", requestPolicy: elseLoad)],
            path: "/stat", nil),
        row("rules: first matching rule wins",
            [CacheRule(host: "example.com", requestPolicy: dontLoad), CacheRule(requestPolicy: elseLoad)], dontLoad),
        row("rules: non-matching rule skipped",
            [CacheRule(host: "other.test", requestPolicy: dontLoad), CacheRule(requestPolicy: elseLoad)], elseLoad),
        row("rules: rule without a request policy skipped",
            [CacheRule(host: "example.com", storagePolicy: .notAllowed), CacheRule(requestPolicy: elseLoad)], elseLoad),
        row("rules: response criteria play no part in the request policy",
            [CacheRule(statuses: [404], contentTypePrefix: "image/", requestPolicy: dontLoad)], dontLoad),
        row("rules: every criterion together",
            [CacheRule(scheme: "https", host: "*.example.com", pathPrefix: "/v1/", requestPolicy: dontLoad)],
            scheme: "https", host: "api.example.com", path: "/v1/items", dontLoad),
    ]
}

enum StorageRuleTable {
    static func row(_ name: String, _ rules: [CacheRule], path: String = "/a", status: Int = 200,
                    contentType: String? = "text/html", _ policy: StoragePolicy,
                    _ freshness: FreshnessOverride? = nil) -> StorageRuleRow {
        StorageRuleRow(name: name, rules: rules, path: path, status: status, contentType: contentType, policy: policy,
                       freshness: freshness)
    }

    static let forced = FreshnessOverride(forcedLifetime: 600)
    static let capped = FreshnessOverride(maximumLifetime: 60)

    static let rows: [StorageRuleRow] = [
        row("storage rules: none means allowed", [], .allowed),
        row("storage rules: notAllowed for everything", [CacheRule(storagePolicy: .notAllowed)], .notAllowed),
        row("storage rules: memory only", [CacheRule(storagePolicy: .allowedInMemoryOnly)], .allowedInMemoryOnly),
        row("storage rules: status listed", [CacheRule(statuses: [200, 404], storagePolicy: .notAllowed)], .notAllowed),
        row("storage rules: status not listed", [CacheRule(statuses: [404], storagePolicy: .notAllowed)], .allowed),
        row("storage rules: content type prefix", [CacheRule(contentTypePrefix: "text/", storagePolicy: .notAllowed)],
            .notAllowed),
        row("storage rules: content type prefix case-insensitive",
            [CacheRule(contentTypePrefix: "TEXT/", storagePolicy: .notAllowed)], contentType: "Text/HTML", .notAllowed),
        row("storage rules: other content type", [CacheRule(contentTypePrefix: "image/", storagePolicy: .notAllowed)],
            .allowed),
        row("storage rules: no content type never matches a prefix",
            [CacheRule(contentTypePrefix: "text/", storagePolicy: .notAllowed)], contentType: nil, .allowed),
        row("storage rules: no content type, rule without prefix", [CacheRule(storagePolicy: .notAllowed)],
            contentType: nil, .notAllowed),
        row("storage rules: path prefix", [CacheRule(pathPrefix: "/private/", storagePolicy: .notAllowed)],
            path: "/private/me", .notAllowed),
        row("storage rules: first rule setting the policy wins",
            [CacheRule(storagePolicy: .allowedInMemoryOnly), CacheRule(storagePolicy: .notAllowed)], .allowedInMemoryOnly),
        row("storage rules: freshness override", [CacheRule(freshness: forced)], .allowed, forced),
        row("storage rules: policy and freshness from different rules",
            [CacheRule(freshness: forced), CacheRule(storagePolicy: .allowedInMemoryOnly, freshness: capped)],
            .allowedInMemoryOnly, forced),
        row("storage rules: freshness from the first matching rule that sets one",
            [CacheRule(statuses: [404], freshness: capped), CacheRule(freshness: forced)], .allowed, forced),
        row("storage rules: rule with only a request policy sets neither",
            [CacheRule(requestPolicy: .returnCacheDataElseLoad), CacheRule(storagePolicy: .notAllowed)], .notAllowed),
        row("storage rules: host pattern applies",
            [CacheRule(host: "*.cdn.test", storagePolicy: .allowedInMemoryOnly)], .allowed),
    ]
}

@Suite("CacheRules")
struct RulesTests {
    @Test("request policy", arguments: RequestRuleTable.rows)
    func requestPolicy(_ row: RequestRuleRow) {
        let policy = withBytes(row.path) {
            CacheRules(row.rules).requestPolicy(scheme: row.scheme, host: wire(row.host), path: $0)
        }
        #expect(policy == row.expected)
    }

    @Test("storage", arguments: StorageRuleTable.rows)
    func storage(_ row: StorageRuleRow) {
        let rules = CacheRules(row.rules)
        let result = withBytes(row.path) { path in
            if let contentType = row.contentType {
                return withBytes(contentType) {
                    rules.storage(scheme: "http", host: wire("example.com"), path: path, status: row.status, contentType: $0)
                }
            }
            return rules.storage(scheme: "http", host: wire("example.com"), path: path, status: row.status, contentType: nil)
        }
        #expect(result.policy == row.policy)
        #expect(result.freshness == row.freshness)
    }
}

/// `ignore_reload`: the first matching rule that says either way decides; a client's reload then
/// does not reach the lookup, while no-store and only-if-cached still do.
@Suite("Ignoring clients' reloads")
struct IgnoreReloadTests {
    @Test func theFirstMatchingRuleThatSaysDecides() {
        let rules = CacheRules([CacheRule(pathPrefix: "/dists/keep/", ignoreReload: false),
                                CacheRule(pathPrefix: "/dists/", ignoreReload: true),
                                CacheRule(pathPrefix: "/", storagePolicy: .allowed)])
        func ignores(_ path: String) -> Bool {
            withBytes(path) { rules.ignoresReload(scheme: "http", host: wire("mirror.test"), path: $0) }
        }
        #expect(ignores("/dists/stable/Release"))
        #expect(!ignores("/dists/keep/Release"))
        #expect(!ignores("/pool/a.deb"))
        #expect(!CacheRules().ignoresReload(scheme: "http", host: wire("a"), path: UnsafeRawBufferPointer(start: nil, count: 0)))
    }

    @Test("reload directives dropped, others kept", arguments: [
        (["Cache-Control: max-age=0"], false, false),
        (["Cache-Control: no-cache"], false, false),
        (["Pragma: no-cache"], false, false),
        (["Cache-Control: min-fresh=60, max-age=0"], false, false),
        (["Cache-Control: no-store, max-age=0"], true, false),
        (["Cache-Control: only-if-cached, no-cache"], false, true),
    ])
    func reloadDirectivesAreDropped(_ fields: [String], noStore: Bool, onlyIfCached: Bool) throws {
        let head = request(fields)
        let honoured = try RequestFacts.make(head, rulePolicy: nil, settings: PolicySettings())
        #expect(honoured.directives.noCache || honoured.directives.maxAge != nil || honoured.directives.noStore
                || honoured.directives.onlyIfCached)
        let facts = try RequestFacts.make(head, rulePolicy: nil, ignoreReload: true, settings: PolicySettings())
        #expect(!facts.directives.noCache)
        #expect(facts.directives.maxAge == nil)
        #expect(facts.directives.minFresh == nil)
        #expect(facts.directives.noStore == noStore)
        #expect(facts.directives.onlyIfCached == onlyIfCached)
    }
}
