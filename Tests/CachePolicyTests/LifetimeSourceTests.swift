import Testing
import HTTPWire
import CachePolicy

/// What decides a stored response's lifetime (`GET /cache?url=`'s `lifetime_from_current_rules`):
/// rules of the user's and of presets (guarded) in front of responses with and without freshness
/// of their own.
struct LifetimeSourceRow: Sendable, CustomTestStringConvertible {
    var name: String
    var rules: [CacheRule]
    var path: String
    var response: String
    var rule: Int?
    var unused: LifetimeSource.UnusedRule?
    var lifetime: Int64
    var heuristic = false
    var testDescription: String { name }
}

enum LifetimeSourceTable {
    static func head(_ fields: String, status: String = "200 OK") -> String {
        "HTTP/1.1 \(status)\r\nDate: \(Dates.t0)\r\n\(fields)Content-Length: 1\r\n\r\n"
    }

    static let wheels = try! PathGlob(parsing: "**/packages/**.whl")
    static let preset = CacheRule(path: wheels, statuses: [200],
                                  freshness: FreshnessOverride(forcedLifetime: 31_536_000, guarded: true))
    static let index = CacheRule(pathPrefix: "/simple/",
                                 freshness: FreshnessOverride(maximumLifetime: 300, defaultLifetime: 300, guarded: true))
    static let own = CacheRule(pathPrefix: "/static/", freshness: FreshnessOverride(forcedLifetime: 60))
    static let storageOnly = CacheRule(pathPrefix: "/static/", storagePolicy: .allowedInMemoryOnly)

    static func row(_ name: String, _ rules: [CacheRule], _ path: String, _ response: String, rule: Int?,
                    unused: LifetimeSource.UnusedRule? = nil, lifetime: Int64, heuristic: Bool = false) -> LifetimeSourceRow {
        LifetimeSourceRow(name: name, rules: rules, path: path, response: response, rule: rule, unused: unused,
                          lifetime: lifetime, heuristic: heuristic)
    }

    static let rows: [LifetimeSourceRow] = [
        row("no rules: the response's max-age", [], "/a", head("Cache-Control: max-age=600\r\n"), rule: nil, lifetime: 600),
        row("no rules, no freshness: none", [], "/a", head(""), rule: nil, lifetime: 0),
        row("no rules: the heuristic", [], "/a", head("Last-Modified: \(Dates.minus10Days)\r\n"), rule: nil,
            lifetime: 86_400, heuristic: true),
        row("a preset forces a wheel's lifetime", [own, preset], "/packages/aa/x-1.0-py3-none-any.whl", head(""),
            rule: 1, lifetime: 31_536_000),
        row("the user's own rule comes first", [own, preset], "/static/app.js", head("Cache-Control: max-age=5\r\n"),
            rule: 0, lifetime: 60),
        row("a rule that sets only storage is not the lifetime's", [storageOnly, own], "/static/app.js", head(""),
            rule: 1, lifetime: 60),
        row("a preset yields to a cookie set", [preset], "/packages/aa/x.whl",
            head("Set-Cookie: s=1\r\nCache-Control: max-age=10\r\n"), rule: nil,
            unused: .init(rule: 0, why: .yielded(.setCookie)), lifetime: 10),
        row("a preset yields to no-cache", [preset], "/packages/aa/x.whl", head("Cache-Control: no-cache\r\n"),
            rule: nil, unused: .init(rule: 0, why: .yielded(.responseDirective)), lifetime: 0),
        row("a preset's forced lifetime never meets a page", [preset], "/packages/aa/x.whl",
            head("Content-Type: text/html\r\n"), rule: nil, unused: .init(rule: 0, why: .yielded(.htmlForArtifact)),
            lifetime: 0),
        row("a default lifetime meets an explicit one: the response's", [index], "/simple/x/",
            head("Cache-Control: max-age=60\r\n"), rule: nil, unused: .init(rule: 0, why: .noEffect), lifetime: 60),
        row("a maximum brings an explicit lifetime down", [index], "/simple/x/",
            head("Cache-Control: max-age=3600\r\n"), rule: 0, lifetime: 300),
        row("a default lifetime for a response without one", [index], "/simple/x/", head(""), rule: 0, lifetime: 300,
            heuristic: true),
        row("the status decides: a preset's rule for 200 only", [preset], "/packages/aa/x.whl",
            head("", status: "404 Not Found"), rule: nil, lifetime: 0),
        row("a query plays no part in a path pattern", [preset], "/packages/aa/x.whl?v=1", head(""), rule: 0,
            lifetime: 31_536_000),
    ]
}

@Suite struct LifetimeSourceTests {
    @Test(arguments: LifetimeSourceTable.rows) func decides(_ row: LifetimeSourceRow) {
        let rules = CacheRules(row.rules)
        let response = parseResponse(row.response)
        let host = Array("files.example".utf8)
        let matched = Array(row.path.utf8).withUnsafeBytes { path in
            response.headers.firstIndex(of: "content-type").map { i in
                response.headers.withBytes(response.headers.fields[i].value) {
                    rules.freshnessRule(scheme: "https", host: host, path: path, status: response.status, contentType: $0)
                }
            } ?? rules.freshnessRule(scheme: "https", host: host, path: path, status: response.status, contentType: nil)
        }
        let source = rules.lifetimeSource(matched: matched, response: response, requestTime: t0, responseTime: t0,
                                          bodyLength: 1, settings: PolicySettings())
        #expect(source.rule == row.rule)
        #expect(source.unused == row.unused)
        #expect(source.lifetime == row.lifetime)
        #expect(source.heuristic == row.heuristic)
    }

    /// Whatever the rules say, their verdict on lifetimes agrees with the one the store uses.
    @Test(arguments: LifetimeSourceTable.rows) func agreesWithStorage(_ row: LifetimeSourceRow) {
        let rules = CacheRules(row.rules)
        let response = parseResponse(row.response)
        let host = Array("files.example".utf8)
        Array(row.path.utf8).withUnsafeBytes { path in
            let matched = rules.freshnessRule(scheme: "https", host: host, path: path, status: response.status,
                                              contentType: nil)
            let stored = rules.storage(scheme: "https", host: host, path: path, status: response.status, contentType: nil)
            #expect(matched.flatMap { row.rules[$0].freshness } == stored.freshness)
        }
    }
}
