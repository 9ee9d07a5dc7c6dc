import Testing
import HTTPWire
import CachePolicy

struct RequestFactsRow: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String = "GET"
    var fields: [String]
    var rulePolicy: RequestCachePolicy?
    var defaultPolicy: RequestCachePolicy = .useProtocolCachePolicy
    var expected: Result<RequestFacts, PolicyHeaderError>
    var testDescription: String { name }
}

struct LookupRow: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var requestFields: [String]
    var policy: RequestCachePolicy?
    var revalidation: RevalidationMethod
    /// The stored response's fields (received at t0), or nil when nothing matches.
    var stored: [String]?
    var anyStored: Bool
    var now: Int64
    var expected: LookupDecision
    var testDescription: String { name }
}

struct StaleOnErrorRow: Sendable, CustomTestStringConvertible {
    var name: String
    var requestFields: [String]
    var policy: RequestCachePolicy?
    var stored: [String]
    var status: Int?
    var now: Int64
    var expected: Bool
    var testDescription: String { name }
}

enum RequestFactsTable {
    static func facts(method: HTTPMethod = .get, directives: CacheDirectives = CacheDirectives(),
                      policy: RequestCachePolicy = .useProtocolCachePolicy, authorization: Bool = false,
                      conditionals: Bool = false, range: Bool = false,
                      preconditions: Bool = false) -> Result<RequestFacts, PolicyHeaderError> {
        .success(RequestFacts(method: method, directives: directives, policy: policy, hasAuthorization: authorization,
                              hasConditionals: conditionals, hasRange: range, hasPreconditions: preconditions))
    }

    static func row(_ name: String, method: String = "GET", _ fields: [String], rule: RequestCachePolicy? = nil,
                    defaultPolicy: RequestCachePolicy = .useProtocolCachePolicy,
                    _ expected: Result<RequestFacts, PolicyHeaderError>) -> RequestFactsRow {
        RequestFactsRow(name: name, method: method, fields: fields, rulePolicy: rule, defaultPolicy: defaultPolicy,
                        expected: expected)
    }

    static let noCache: CacheDirectives = {
        var d = CacheDirectives()
        d.noCache = true
        return d
    }()

    static let rows: [RequestFactsRow] = [
        row("useProtocolCachePolicy is the default", [], facts()),
        row("Larder-Cache-Policy use-protocol-cache-policy", ["Larder-Cache-Policy: use-protocol-cache-policy"], facts()),
        row("Larder-Cache-Policy reload-ignoring-local-cache-data",
            ["Larder-Cache-Policy: reload-ignoring-local-cache-data"], facts(policy: .reloadIgnoringLocalCacheData)),
        row("Larder-Cache-Policy reload-revalidating-cache-data",
            ["Larder-Cache-Policy: reload-revalidating-cache-data"], facts(policy: .reloadRevalidatingCacheData)),
        row("Larder-Cache-Policy return-cache-data-else-load",
            ["Larder-Cache-Policy: return-cache-data-else-load"], facts(policy: .returnCacheDataElseLoad)),
        row("Larder-Cache-Policy return-cache-data-dont-load",
            ["Larder-Cache-Policy: return-cache-data-dont-load"], facts(policy: .returnCacheDataDontLoad)),
        row("Larder-Cache-Policy name and value case-insensitive",
            ["larder-cache-policy: Return-Cache-Data-Else-Load"], facts(policy: .returnCacheDataElseLoad)),
        row("Larder-Cache-Policy unknown value is an error", ["Larder-Cache-Policy: offline"],
            .failure(PolicyHeaderError(value: "offline"))),
        row("Larder-Cache-Policy empty value is an error", ["Larder-Cache-Policy: "], .failure(PolicyHeaderError(value: ""))),
        row("Larder-Cache-Policy first field wins",
            ["Larder-Cache-Policy: return-cache-data-dont-load", "Larder-Cache-Policy: bogus"],
            facts(policy: .returnCacheDataDontLoad)),
        row("rule policy applies without the header", [], rule: .returnCacheDataElseLoad,
            facts(policy: .returnCacheDataElseLoad)),
        row("header wins over the rule", ["Larder-Cache-Policy: reload-ignoring-local-cache-data"],
            rule: .returnCacheDataElseLoad, facts(policy: .reloadIgnoringLocalCacheData)),
        row("server default (offline mode)", [], defaultPolicy: .returnCacheDataDontLoad,
            facts(policy: .returnCacheDataDontLoad)),
        row("rule wins over the server default", [], rule: .reloadRevalidatingCacheData,
            defaultPolicy: .returnCacheDataDontLoad, facts(policy: .reloadRevalidatingCacheData)),
        row("Authorization noted", ["Authorization: Basic eDp5"], facts(authorization: true)),
        row("RFC9110 13.1.2 If-None-Match is a conditional", ["If-None-Match: \"a\""], facts(conditionals: true)),
        row("RFC9110 13.1.3 If-Modified-Since is a conditional", ["If-Modified-Since: \(Dates.t0)"],
            facts(conditionals: true)),
        row("RFC9110 14.2 Range noted", ["Range: bytes=0-1"], facts(range: true)),
        row("RFC9110 13.1.1 If-Match is a precondition", ["If-Match: \"a\""], facts(preconditions: true)),
        row("RFC9110 13.1.4 If-Unmodified-Since is a precondition", ["if-unmodified-since: \(Dates.t0)"],
            facts(preconditions: true)),
        row("RFC9110 13.1.4 If-Unmodified-Since beside the policy header",
            ["Larder-Cache-Policy: return-cache-data-else-load", "If-Unmodified-Since: \(Dates.t0)"],
            facts(policy: .returnCacheDataElseLoad, preconditions: true)),
        row("RFC9110 14.2 If-Range alone is not a Range", ["If-Range: \"a\""], facts()),
        row("HEAD method kept", method: "HEAD", [], facts(method: .head)),
        row("POST method kept", method: "POST", ["Content-Length: 0"], facts(method: .post)),
        row("RFC9111 5.4 directives parsed (Pragma)", ["Pragma: no-cache"], facts(directives: noCache)),
    ]
}

enum LookupTable {
    static let revalidateHead = LookupDecision.revalidate(.head)

    static func row(_ name: String, method: String = "GET", request: [String] = [], policy: RequestCachePolicy? = nil,
                    revalidation: RevalidationMethod = .head, stored: [String]?, anyStored: Bool = true,
                    now: Int64 = t0, _ expected: LookupDecision) -> LookupRow {
        LookupRow(name: name, method: method, requestFields: request, policy: policy, revalidation: revalidation,
                  stored: stored, anyStored: anyStored, now: now, expected: expected)
    }

    static let date = "Date: \(Dates.t0)"
    /// A validator, so that HEAD can revalidate (`Revalidation.method`).
    static let etag = "ETag: \"a\""
    /// Fresh for 60 seconds from t0.
    static let fresh60 = [date, "Cache-Control: max-age=60", etag]
    static let noCache = [date, "Cache-Control: max-age=60, no-cache", etag]
    static let mustRevalidate = [date, "Cache-Control: max-age=60, must-revalidate", etag]
    static let proxyRevalidate = [date, "Cache-Control: max-age=60, proxy-revalidate", etag]
    static let sMaxAge = [date, "Cache-Control: s-maxage=60", etag]
    static let swr = [date, "Cache-Control: max-age=60, stale-while-revalidate=30", etag]
    /// Fresh for 60 seconds, with neither ETag nor Last-Modified.
    static let noValidator = [date, "Cache-Control: max-age=60"]
    static let lastModifiedOnly = [date, "Cache-Control: max-age=60", "Last-Modified: \(Dates.minus1000)"]
    static let revalidateGet = LookupDecision.revalidate(.conditionalGet)
    static let varyStar = [date, "Cache-Control: max-age=60", "Vary: *"]
    static let noFreshness = [date, "ETag: \"a\""]

    static let protocolPolicy: [LookupRow] = [
        row("RFC9111 4 POST never uses the cache", method: "POST", request: ["Content-Length: 0"], stored: fresh60,
            .fetch(.bypass)),
        row("RFC9111 4 PUT never uses the cache", method: "PUT", request: ["Content-Length: 0"], stored: fresh60,
            .fetch(.bypass)),
        row("RFC9111 4 DELETE never uses the cache", method: "DELETE", stored: fresh60, .fetch(.bypass)),
        row("RFC9110 13.1.1 If-Match goes to the origin", request: ["If-Match: \"a\""], stored: fresh60,
            .fetch(.bypass)),
        row("RFC9110 13.1.4 If-Unmodified-Since goes to the origin", request: ["If-Unmodified-Since: \(Dates.t0)"],
            stored: fresh60, .fetch(.bypass)),
        row("RFC9111 4 OPTIONS never uses the cache", method: "OPTIONS", stored: fresh60, .fetch(.bypass)),
        row("RFC9111 4 PATCH never uses the cache", method: "PATCH", request: ["Content-Length: 0"], stored: nil,
            anyStored: false, .fetch(.bypass)),
        row("RFC9111 4 unknown method never uses the cache", method: "PURGE", stored: fresh60, .fetch(.bypass)),
        row("useProtocolCachePolicy nothing stored: fetch (uri-miss)", stored: nil, anyStored: false, .fetch(.uriMiss)),
        row("useProtocolCachePolicy no variant matches: fetch (vary-miss)", stored: nil, anyStored: true, .fetch(.varyMiss)),
        row("useProtocolCachePolicy HEAD with nothing stored", method: "HEAD", stored: nil, anyStored: false,
            .fetch(.uriMiss)),
        row("useProtocolCachePolicy fresh on arrival: serve", stored: fresh60, .serve(age: 0, stale: false)),
        row("useProtocolCachePolicy fresh: serve with its age", stored: fresh60, now: t0 + 10, .serve(age: 10, stale: false)),
        row("useProtocolCachePolicy HEAD uses the stored GET", method: "HEAD", stored: fresh60, now: t0 + 10,
            .serve(age: 10, stale: false)),
        row("useProtocolCachePolicy last fresh second", stored: fresh60, now: t0 + 59, .serve(age: 59, stale: false)),
        row("useProtocolCachePolicy stale: revalidate with HEAD", stored: fresh60, now: t0 + 60, revalidateHead),
        row("useProtocolCachePolicy stale: revalidate with conditional GET when configured", revalidation: .conditionalGet,
            stored: fresh60, now: t0 + 60, .revalidate(.conditionalGet)),
        row("useProtocolCachePolicy no freshness at all: revalidate", stored: noFreshness, revalidateHead),
        row("useProtocolCachePolicy heuristic freshness: serve", stored: [date, "Last-Modified: \(Dates.minus1000)"],
            now: t0 + 99, .serve(age: 99, stale: false)),
        row("useProtocolCachePolicy heuristic freshness over: revalidate",
            stored: [date, "Last-Modified: \(Dates.minus1000)"], now: t0 + 100, revalidateHead),
        row("useProtocolCachePolicy must revalidate every time (no-cache): revalidate fresh entry", stored: noCache,
            now: t0 + 1, revalidateHead),
        row("useProtocolCachePolicy no-cache with conditional GET", revalidation: .conditionalGet, stored: noCache,
            .revalidate(.conditionalGet)),
        row("RFC9111 4.1 Vary: * never matches", stored: varyStar, .fetch(.miss)),
        row("RFC9111 4.1 HEAD and Vary: *", method: "HEAD", stored: varyStar, .fetch(.miss)),
        row("RFC9111 3.5 request Authorization may use what was stored", request: ["Authorization: Basic eDp5"],
            stored: fresh60, now: t0 + 5, .serve(age: 5, stale: false)),
        row("RFC9111 4.2.3 Age counts toward staleness", stored: [date, "Cache-Control: max-age=60", "Age: 50", etag],
            now: t0 + 10, revalidateHead),
        row("RFC9111 4.2.3 Age counts toward the age served", stored: [date, "Cache-Control: max-age=60", "Age: 50"],
            now: t0 + 9, .serve(age: 59, stale: false)),
        // The revalidation method (Revalidation.method): HEAD only where it can settle the question.
        row("HEAD revalidation: ETag only", stored: noFreshness, revalidateHead),
        row("HEAD revalidation: Last-Modified only", stored: lastModifiedOnly, now: t0 + 60, revalidateHead),
        row("no validator, stale: a plain GET, HEAD could not confirm it", stored: noValidator, now: t0 + 60,
            revalidateGet),
        row("no validator, conditional GET configured: a plain GET", revalidation: .conditionalGet,
            stored: noValidator, now: t0 + 60, revalidateGet),
        row("no validator, no-cache entry: a plain GET", stored: [date, "Cache-Control: max-age=60, no-cache"],
            now: t0 + 1, revalidateGet),
        row("no validator, request no-cache: a plain GET", request: ["Cache-Control: no-cache"], stored: noValidator,
            revalidateGet),
        row("no validator, stale past stale-while-revalidate: a plain GET",
            stored: [date, "Cache-Control: max-age=60, stale-while-revalidate=30"], now: t0 + 91, revalidateGet),
        row("RFC9111 4.3.5 client HEAD, stale: HEAD", method: "HEAD", stored: fresh60, now: t0 + 60, revalidateHead),
        row("RFC9111 4.3.5 client HEAD, conditional GET configured: HEAD all the same", method: "HEAD",
            revalidation: .conditionalGet, stored: fresh60, now: t0 + 60, revalidateHead),
        row("RFC9111 4.3.5 client HEAD, no validator: HEAD (its answer is the client's)", method: "HEAD",
            stored: noValidator, now: t0 + 60, revalidateHead),
        row("RFC9111 4.3.5 client HEAD, request no-cache: HEAD", method: "HEAD", request: ["Cache-Control: no-cache"],
            revalidation: .conditionalGet, stored: fresh60, revalidateHead),
        // Request directives, RFC 9111 §5.2.1.
        row("RFC9111 5.2.1.1 max-age=N: older entry revalidated", request: ["Cache-Control: max-age=30"], stored: fresh60,
            now: t0 + 31, revalidateHead),
        row("RFC9111 5.2.1.1 max-age=N: entry aged exactly N served", request: ["Cache-Control: max-age=30"],
            stored: fresh60, now: t0 + 30, .serve(age: 30, stale: false)),
        row("RFC9111 5.2.1.1 max-age=0 revalidates even a new entry", request: ["Cache-Control: max-age=0"],
            stored: fresh60, revalidateHead),
        row("RFC9111 5.2.1.1 invalid max-age reads as 0", request: ["Cache-Control: max-age=x"], stored: fresh60,
            revalidateHead),
        row("RFC9111 5.2.1.1 max-age with max-stale: the age bound still holds",
            request: ["Cache-Control: max-age=30, max-stale=100"], stored: fresh60, now: t0 + 70, revalidateHead),
        row("RFC9111 5.2.1.3 min-fresh satisfied", request: ["Cache-Control: min-fresh=20"], stored: fresh60,
            now: t0 + 40, .serve(age: 40, stale: false)),
        row("RFC9111 5.2.1.3 min-fresh not satisfied: fetch (miss)", request: ["Cache-Control: min-fresh=20"],
            stored: fresh60, now: t0 + 41, .fetch(.miss)),
        row("RFC9111 5.2.1.3 min-fresh on a stale entry: revalidate", request: ["Cache-Control: min-fresh=20"],
            stored: fresh60, now: t0 + 61, revalidateHead),
        row("RFC9111 5.2.1.2 max-stale=N: stale within N served", request: ["Cache-Control: max-stale=100"],
            stored: fresh60, now: t0 + 160, .serve(age: 160, stale: true)),
        row("RFC9111 5.2.1.2 max-stale=N: staler than N revalidated", request: ["Cache-Control: max-stale=100"],
            stored: fresh60, now: t0 + 161, revalidateHead),
        row("RFC9111 5.2.1.2 max-stale=N on a fresh entry: served fresh", request: ["Cache-Control: max-stale=100"],
            stored: fresh60, now: t0 + 1, .serve(age: 1, stale: false)),
        row("RFC9111 4.2.4 must-revalidate forbids max-stale", request: ["Cache-Control: max-stale=100"],
            stored: mustRevalidate, now: t0 + 61, revalidateHead),
        row("RFC9111 5.2.2.8 proxy-revalidate forbids max-stale", request: ["Cache-Control: max-stale=100"],
            stored: proxyRevalidate, now: t0 + 61, revalidateHead),
        row("RFC9111 5.2.2.10 s-maxage forbids max-stale", request: ["Cache-Control: max-stale=100"], stored: sMaxAge,
            now: t0 + 61, revalidateHead),
        row("RFC9111 5.2.2.10 s-maxage fresh is served", stored: sMaxAge, now: t0 + 59, .serve(age: 59, stale: false)),
        row("RFC9111 5.2.2.2 must-revalidate fresh is served", stored: mustRevalidate, now: t0 + 59,
            .serve(age: 59, stale: false)),
        row("RFC9111 5.2.1.4 request no-cache: revalidate", request: ["Cache-Control: no-cache"], stored: fresh60,
            revalidateHead),
        row("RFC9111 5.4 request Pragma: no-cache: revalidate", request: ["Pragma: no-cache"], stored: fresh60,
            revalidateHead),
        row("RFC9111 5.4 Pragma ignored beside Cache-Control", request: ["Pragma: no-cache", "Cache-Control: max-age=100"],
            stored: fresh60, now: t0 + 2, .serve(age: 2, stale: false)),
        row("RFC9111 5.2.1.4 request no-cache with nothing stored: uri-miss", request: ["Cache-Control: no-cache"],
            stored: nil, anyStored: false, .fetch(.uriMiss)),
        row("RFC9111 5.2.1.5 request no-store does not change the lookup", request: ["Cache-Control: no-store"],
            stored: fresh60, now: t0 + 3, .serve(age: 3, stale: false)),
        // RFC 5861 stale-while-revalidate.
        row("RFC5861 3 stale within stale-while-revalidate: serve, then revalidate", stored: swr, now: t0 + 61,
            .serveStaleThenRevalidate(age: 61)),
        row("RFC5861 3 stale at the end of the window", stored: swr, now: t0 + 90, .serveStaleThenRevalidate(age: 90)),
        row("RFC5861 3 stale past the window: revalidate", stored: swr, now: t0 + 91, revalidateHead),
        row("RFC5861 3 fresh entry with a window is simply served", stored: swr, now: t0 + 59, .serve(age: 59, stale: false)),
        row("RFC5861 3 must-revalidate beats stale-while-revalidate",
            stored: [date, "Cache-Control: max-age=60, stale-while-revalidate=30, must-revalidate", etag], now: t0 + 61,
            revalidateHead),
        row("RFC5861 3 no-cache beats stale-while-revalidate",
            stored: [date, "Cache-Control: max-age=60, stale-while-revalidate=30, no-cache", etag], now: t0 + 61,
            revalidateHead),
        row("RFC5861 3 request max-age beats stale-while-revalidate", request: ["Cache-Control: max-age=10"], stored: swr,
            now: t0 + 61, revalidateHead),
        row("RFC5861 3 request max-stale within bound served stale, not in background",
            request: ["Cache-Control: max-stale=5"], stored: swr, now: t0 + 62, .serve(age: 62, stale: true)),
        // RFC 9111 §5.2.1.7 only-if-cached.
        row("RFC9111 5.2.1.7 only-if-cached fresh: serve", request: ["Cache-Control: only-if-cached"], stored: fresh60,
            now: t0 + 1, .serve(age: 1, stale: false)),
        row("RFC9111 5.2.1.7 only-if-cached stale: serve stale", request: ["Cache-Control: only-if-cached"],
            stored: fresh60, now: t0 + 600, .serve(age: 600, stale: true)),
        row("RFC9111 5.2.1.7 only-if-cached nothing stored: 504", request: ["Cache-Control: only-if-cached"], stored: nil,
            anyStored: false, .gatewayTimeout),
        row("RFC9111 5.2.1.7 only-if-cached no matching variant: 504", request: ["Cache-Control: only-if-cached"],
            stored: nil, anyStored: true, .gatewayTimeout),
        row("RFC9111 5.2.1.7 only-if-cached Vary: *: 504", request: ["Cache-Control: only-if-cached"], stored: varyStar,
            .gatewayTimeout),
        row("RFC9111 5.2.2.2 only-if-cached must-revalidate stale: 504", request: ["Cache-Control: only-if-cached"],
            stored: mustRevalidate, now: t0 + 61, .gatewayTimeout),
        row("RFC9111 5.2.2.2 only-if-cached must-revalidate fresh: serve", request: ["Cache-Control: only-if-cached"],
            stored: mustRevalidate, now: t0 + 59, .serve(age: 59, stale: false)),
        row("RFC9111 5.2.2.4 only-if-cached no-cache entry: 504", request: ["Cache-Control: only-if-cached"],
            stored: noCache, .gatewayTimeout),
        row("RFC9111 5.2.1.7 only-if-cached with no-cache: no network, serve",
            request: ["Cache-Control: only-if-cached, no-cache"], stored: fresh60, .serve(age: 0, stale: false)),
        row("RFC9111 5.2.1.7 only-if-cached with POST is still a bypass", method: "POST",
            request: ["Cache-Control: only-if-cached", "Content-Length: 0"], stored: nil, .fetch(.bypass)),
    ]

    static let otherPolicies: [LookupRow] = [
        row("reloadIgnoringLocalCacheData fresh entry: fetch (request)", policy: .reloadIgnoringLocalCacheData,
            stored: fresh60, .fetch(.request)),
        row("reloadIgnoringLocalCacheData nothing stored: fetch (request)", policy: .reloadIgnoringLocalCacheData,
            stored: nil, anyStored: false, .fetch(.request)),
        row("reloadIgnoringLocalCacheData HEAD: fetch (request)", method: "HEAD", policy: .reloadIgnoringLocalCacheData,
            stored: fresh60, .fetch(.request)),
        row("reloadIgnoringLocalCacheData POST: bypass", method: "POST", request: ["Content-Length: 0"],
            policy: .reloadIgnoringLocalCacheData, stored: nil, .fetch(.bypass)),
        row("reloadIgnoringLocalCacheData with only-if-cached: the network is not allowed",
            request: ["Cache-Control: only-if-cached"], policy: .reloadIgnoringLocalCacheData, stored: fresh60,
            .serve(age: 0, stale: false)),
        row("reloadRevalidatingCacheData fresh entry: revalidate", policy: .reloadRevalidatingCacheData, stored: fresh60,
            revalidateHead),
        row("reloadRevalidatingCacheData stale entry: revalidate", policy: .reloadRevalidatingCacheData, stored: fresh60,
            now: t0 + 100, revalidateHead),
        row("reloadRevalidatingCacheData conditional GET", policy: .reloadRevalidatingCacheData,
            revalidation: .conditionalGet, stored: fresh60, .revalidate(.conditionalGet)),
        row("reloadRevalidatingCacheData no validator: a plain GET", policy: .reloadRevalidatingCacheData,
            stored: noValidator, revalidateGet),
        row("reloadRevalidatingCacheData client HEAD: HEAD", method: "HEAD", policy: .reloadRevalidatingCacheData,
            revalidation: .conditionalGet, stored: noValidator, revalidateHead),
        row("reloadRevalidatingCacheData nothing stored: uri-miss", policy: .reloadRevalidatingCacheData, stored: nil,
            anyStored: false, .fetch(.uriMiss)),
        row("reloadRevalidatingCacheData no variant: vary-miss", policy: .reloadRevalidatingCacheData, stored: nil,
            .fetch(.varyMiss)),
        row("reloadRevalidatingCacheData Vary: *: miss", policy: .reloadRevalidatingCacheData, stored: varyStar,
            .fetch(.miss)),
        row("returnCacheDataElseLoad fresh: serve", policy: .returnCacheDataElseLoad, stored: fresh60, now: t0 + 5,
            .serve(age: 5, stale: false)),
        row("returnCacheDataElseLoad stale: serve whatever its age", policy: .returnCacheDataElseLoad, stored: fresh60,
            now: t0 + 86_400, .serve(age: 86_400, stale: true)),
        row("returnCacheDataElseLoad no freshness: serve stale", policy: .returnCacheDataElseLoad, stored: noFreshness,
            .serve(age: 0, stale: true)),
        row("returnCacheDataElseLoad nothing stored: fetch", policy: .returnCacheDataElseLoad, stored: nil,
            anyStored: false, .fetch(.uriMiss)),
        row("returnCacheDataElseLoad no variant: fetch", policy: .returnCacheDataElseLoad, stored: nil, .fetch(.varyMiss)),
        row("returnCacheDataElseLoad Vary: *: miss", policy: .returnCacheDataElseLoad, stored: varyStar, .fetch(.miss)),
        row("returnCacheDataElseLoad must-revalidate stale: revalidate", policy: .returnCacheDataElseLoad,
            stored: mustRevalidate, now: t0 + 61, revalidateHead),
        row("returnCacheDataElseLoad must-revalidate fresh: serve", policy: .returnCacheDataElseLoad,
            stored: mustRevalidate, now: t0 + 1, .serve(age: 1, stale: false)),
        row("returnCacheDataElseLoad s-maxage stale: revalidate", policy: .returnCacheDataElseLoad, stored: sMaxAge,
            now: t0 + 61, revalidateHead),
        row("returnCacheDataElseLoad no-cache entry: revalidate (RFC9111 5.2.2.4)", policy: .returnCacheDataElseLoad,
            stored: noCache, revalidateHead),
        row("returnCacheDataElseLoad request no-cache: revalidate", request: ["Cache-Control: no-cache"],
            policy: .returnCacheDataElseLoad, stored: fresh60, revalidateHead),
        row("RFC9111 5.2.1.2 max-stale without value is returnCacheDataElseLoad",
            request: ["Cache-Control: max-stale"], stored: fresh60, now: t0 + 86_400, .serve(age: 86_400, stale: true)),
        row("RFC9111 5.2.1.2 max-stale without value, must-revalidate stale: revalidate",
            request: ["Cache-Control: max-stale"], stored: mustRevalidate, now: t0 + 61, revalidateHead),
        row("RFC9111 5.2.1.2 max-stale without value, nothing stored: fetch",
            request: ["Cache-Control: max-stale"], stored: nil, anyStored: false, .fetch(.uriMiss)),
        row("returnCacheDataDontLoad fresh: serve", policy: .returnCacheDataDontLoad, stored: fresh60, now: t0 + 5,
            .serve(age: 5, stale: false)),
        row("returnCacheDataDontLoad stale: serve whatever its age", policy: .returnCacheDataDontLoad, stored: fresh60,
            now: t0 + 86_400, .serve(age: 86_400, stale: true)),
        row("returnCacheDataDontLoad nothing stored: 504", policy: .returnCacheDataDontLoad, stored: nil,
            anyStored: false, .gatewayTimeout),
        row("returnCacheDataDontLoad no variant: 504", policy: .returnCacheDataDontLoad, stored: nil, .gatewayTimeout),
        row("returnCacheDataDontLoad never revalidates, even when asked", request: ["Cache-Control: no-cache"],
            policy: .returnCacheDataDontLoad, stored: fresh60, now: t0 + 100, .serve(age: 100, stale: true)),
        row("returnCacheDataDontLoad must-revalidate stale: 504 (RFC9111 5.2.2.2)", policy: .returnCacheDataDontLoad,
            stored: mustRevalidate, now: t0 + 61, .gatewayTimeout),
        row("returnCacheDataDontLoad HEAD: serve", method: "HEAD", policy: .returnCacheDataDontLoad, stored: fresh60,
            .serve(age: 0, stale: false)),
        row("returnCacheDataDontLoad POST: bypass", method: "POST", request: ["Content-Length: 0"],
            policy: .returnCacheDataDontLoad, stored: nil, .fetch(.bypass)),
    ]
}

struct MethodRow: Sendable, CustomTestStringConvertible {
    var name: String
    var requestMethod: HTTPMethod
    var stored: [String]
    var configured: RevalidationMethod
    var expected: RevalidationMethod
    var testDescription: String { name }
}

enum MethodTable {
    static let date = "Date: \(Dates.t0)"
    static let etag = [date, "ETag: \"a\""]
    static let weakETag = [date, "ETag: W/\"a\""]
    static let lastModified = [date, "Last-Modified: \(Dates.minus1000)"]
    static let neither = [date, "Cache-Control: max-age=60"]

    static func row(_ name: String, _ requestMethod: HTTPMethod = .get, stored: [String], configured: RevalidationMethod,
                    _ expected: RevalidationMethod) -> MethodRow {
        MethodRow(name: name, requestMethod: requestMethod, stored: stored, configured: configured, expected: expected)
    }

    static let rows: [MethodRow] = [
        row("GET, ETag, HEAD configured: HEAD", stored: etag, configured: .head, .head),
        row("GET, weak ETag, HEAD configured: HEAD", stored: weakETag, configured: .head, .head),
        row("GET, Last-Modified, HEAD configured: HEAD", stored: lastModified, configured: .head, .head),
        row("GET, ETag, conditional GET configured: conditional GET", stored: etag, configured: .conditionalGet,
            .conditionalGet),
        row("GET, no validator, HEAD configured: GET (HEAD would always need a GET too)", stored: neither,
            configured: .head, .conditionalGet),
        row("GET, no validator, conditional GET configured: GET", stored: neither, configured: .conditionalGet,
            .conditionalGet),
        row("HEAD, ETag, HEAD configured: HEAD", .head, stored: etag, configured: .head, .head),
        row("HEAD, ETag, conditional GET configured: HEAD (no body for the client)", .head, stored: etag,
            configured: .conditionalGet, .head),
        row("HEAD, no validator: HEAD (its answer is the client's)", .head, stored: neither, configured: .head, .head),
        row("HEAD, no validator, conditional GET configured: HEAD", .head, stored: neither,
            configured: .conditionalGet, .head),
    ]
}

enum StaleOnErrorTable {
    static func row(_ name: String, request: [String] = [], policy: RequestCachePolicy? = nil, stored: [String] = sie,
                    status: Int?, now: Int64 = t0 + 70, _ expected: Bool) -> StaleOnErrorRow {
        StaleOnErrorRow(name: name, requestFields: request, policy: policy, stored: stored, status: status, now: now,
                        expected: expected)
    }

    static let date = "Date: \(Dates.t0)"
    /// Fresh for 10 seconds, then usable on error for 60 more.
    static let sie = [date, "Cache-Control: max-age=10, stale-if-error=60"]
    static let plain = [date, "Cache-Control: max-age=10"]

    static let rows: [StaleOnErrorRow] = [
        row("RFC5861 4 stale-if-error on 500", status: 500, true),
        row("RFC5861 4 stale-if-error on 502", status: 502, true),
        row("RFC5861 4 stale-if-error on 503", status: 503, true),
        row("RFC5861 4 stale-if-error on 504", status: 504, true),
        row("RFC5861 4 stale-if-error on a connection failure", status: nil, true),
        row("RFC5861 4 501 is not an error to hide", status: 501, false),
        row("RFC5861 4 404 is an answer, not an error", status: 404, false),
        row("RFC5861 4 400 is an answer, not an error", status: 400, false),
        row("RFC5861 4 200 is not an error", status: 200, false),
        row("RFC5861 4 at the end of the window", status: 503, now: t0 + 70, true),
        row("RFC5861 4 past the window", status: 503, now: t0 + 71, false),
        row("RFC5861 4 fresh entry with a window", status: 503, now: t0 + 5, true),
        row("RFC5861 4 no window, no max-stale: no", stored: plain, status: 503, false),
        row("RFC9111 4.2.4 must-revalidate: never", stored: [date, "Cache-Control: max-age=10, stale-if-error=60, must-revalidate"],
            status: 503, false),
        row("RFC9111 4.2.4 proxy-revalidate: never",
            stored: [date, "Cache-Control: max-age=10, stale-if-error=60, proxy-revalidate"], status: nil, false),
        row("RFC9111 4.2.4 s-maxage: never", stored: [date, "Cache-Control: s-maxage=10, stale-if-error=60"], status: 503,
            false),
        row("RFC9111 4.2.4 no-cache: never", stored: [date, "Cache-Control: max-age=10, no-cache, stale-if-error=60"],
            status: 503, false),
        row("RFC9111 4.2.4 must-revalidate beats request max-stale", request: ["Cache-Control: max-stale"],
            stored: [date, "Cache-Control: max-age=10, must-revalidate"], status: 503, false),
        row("RFC9111 5.2.1.2 request max-stale=N allows", request: ["Cache-Control: max-stale=100"], stored: plain,
            status: 503, now: t0 + 110, true),
        row("RFC9111 5.2.1.2 request max-stale=N: staler than N", request: ["Cache-Control: max-stale=100"],
            stored: plain, status: 503, now: t0 + 111, false),
        row("RFC9111 5.2.1.2 request max-stale without value allows any", request: ["Cache-Control: max-stale"],
            stored: plain, status: nil, now: t0 + 86_400, true),
        row("RFC9111 5.2.1.2 request max-stale still needs an error", request: ["Cache-Control: max-stale"],
            stored: plain, status: 404, false),
        row("RFC5861 4 request stale-if-error allows", request: ["Cache-Control: stale-if-error=100"], stored: plain,
            status: 502, now: t0 + 110, true),
        row("RFC5861 4 request stale-if-error: past its window", request: ["Cache-Control: stale-if-error=100"],
            stored: plain, status: 502, now: t0 + 111, false),
        row("returnCacheDataElseLoad accepts any age on error", policy: .returnCacheDataElseLoad, stored: plain,
            status: 503, now: t0 + 86_400, true),
        row("useProtocolCachePolicy without windows: no", policy: .useProtocolCachePolicy, stored: plain, status: 503,
            now: t0 + 11, false),
    ]
}

func lookupEntry(_ stored: [String]?) -> EntryFacts? {
    stored.map { entry($0) }
}

@Suite("Lookup")
struct LookupTests {
    @Test("RequestFacts.make", arguments: RequestFactsTable.rows)
    func requestFacts(_ row: RequestFactsRow) {
        var settings = PolicySettings()
        settings.defaultRequestPolicy = row.defaultPolicy
        let head = request(row.fields, method: row.method)
        let result: Result<RequestFacts, PolicyHeaderError>
        do throws(PolicyHeaderError) {
            result = .success(try RequestFacts.make(head, rulePolicy: row.rulePolicy, settings: settings))
        } catch {
            result = .failure(error)
        }
        #expect(result == row.expected)
    }

    @Test("RequestCachePolicy raw values are the header's spelling", arguments: RequestCachePolicy.allCases)
    func policyNames(_ policy: RequestCachePolicy) throws {
        let head = request(["Larder-Cache-Policy: \(policy.rawValue)"])
        #expect(try RequestFacts.make(head, rulePolicy: nil, settings: PolicySettings()).policy == policy)
    }

    @Test("decide: useProtocolCachePolicy and request directives", arguments: LookupTable.protocolPolicy)
    func protocolPolicy(_ row: LookupRow) throws {
        try check(row)
    }

    @Test("decide: the other documented policies", arguments: LookupTable.otherPolicies)
    func otherPolicies(_ row: LookupRow) throws {
        try check(row)
    }

    private func check(_ row: LookupRow) throws {
        var settings = PolicySettings()
        settings.revalidation = row.revalidation
        let facts = try RequestFacts.make(request(row.requestFields, method: row.method), rulePolicy: row.policy,
                                          settings: settings)
        let decision = Lookup.decide(request: facts, entry: lookupEntry(row.stored), anyStored: row.anyStored,
                                     now: row.now, settings: settings)
        #expect(decision == row.expected)
    }

    @Test("Revalidation.method", arguments: MethodTable.rows)
    func revalidationMethod(_ row: MethodRow) {
        #expect(Revalidation.method(for: row.requestMethod, entry: entry(row.stored), configured: row.configured)
                == row.expected)
    }

    @Test("mayServeStaleOnError", arguments: StaleOnErrorTable.rows)
    func staleOnError(_ row: StaleOnErrorRow) throws {
        let facts = try RequestFacts.make(request(row.requestFields), rulePolicy: row.policy, settings: PolicySettings())
        let stored = entry(row.stored)
        #expect(Lookup.mayServeStaleOnError(request: facts, entry: stored, status: row.status, now: row.now) == row.expected)
    }
}
