import CachePolicy
import HTTPWire
import Testing

/// RFC 9213: which targeted field (if any) stands in for Cache-Control in the cache's decisions.
@Suite struct TargetedCacheControlTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var fields: [String]
        var targets: [String]
        /// The Cache-Control the decisions read; nil: the response is read as it is.
        var expected: String?
        var testDescription: String { name }
    }

    static let cdn = ["cdn-cache-control"]
    static let ours = ["larder-cache-control", "cdn-cache-control"]

    static let rows: [Row] = [
        Row(name: "no target list", fields: ["Cache-Control: no-store", "CDN-Cache-Control: max-age=60"], targets: [],
            expected: nil),
        Row(name: "no targeted field", fields: ["Cache-Control: max-age=5"], targets: cdn, expected: nil),
        Row(name: "the targeted field replaces Cache-Control",
            fields: ["Cache-Control: no-store", "CDN-Cache-Control: max-age=60"], targets: cdn, expected: "max-age=60"),
        Row(name: "field names compare without case", fields: ["cdn-CACHE-control: max-age=7"], targets: cdn,
            expected: "max-age=7"),
        Row(name: "an empty value does not count", fields: ["Cache-Control: max-age=5", "CDN-Cache-Control:   "],
            targets: cdn, expected: nil),
        Row(name: "the first listed field present wins",
            fields: ["CDN-Cache-Control: no-store", "Larder-Cache-Control: max-age=9"], targets: ours,
            expected: "max-age=9"),
        Row(name: "a later listed field when the first is absent", fields: ["CDN-Cache-Control: max-age=3"],
            targets: ours, expected: "max-age=3"),
        Row(name: "several lines of the field are one list",
            fields: ["CDN-Cache-Control: max-age=60", "CDN-Cache-Control: must-revalidate"], targets: cdn,
            expected: "max-age=60, must-revalidate"),
    ]

    @Test(arguments: rows) func chooses(_ row: Row) {
        let head = response(row.fields)
        let policy = TargetedCacheControl.policyHead(of: head, targets: row.targets.map { Array($0.utf8) })
        #expect(policy.flatMap { $0.headers.value(of: "cache-control") } == row.expected)
    }

    @Test func expiresIsIgnoredWithTheTargetedFieldAndEverythingElseKept() throws {
        let head = response(["Cache-Control: no-store", "Expires: \(Dates.minus60)", "ETag: \"v1\"",
                             "CDN-Cache-Control: max-age=60"])
        let policy = try #require(TargetedCacheControl.policyHead(of: head, targets: Self.cdn.map { Array($0.utf8) }))
        #expect(policy.headers.value(of: "expires") == nil)
        #expect(policy.headers.value(of: "etag") == "\"v1\"")
        #expect(policy.status == 200)
        let facts = EntryFacts.make(response: policy, requestTime: t0, responseTime: t0, bodyLength: 0,
                                    settings: PolicySettings(), override: nil)
        #expect(facts.freshnessLifetime == 60)
    }
}
