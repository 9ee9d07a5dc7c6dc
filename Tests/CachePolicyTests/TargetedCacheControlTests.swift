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
        // RFC 9213 §2.1: a value that is not a valid Dictionary of directives is ignored as a whole.
        Row(name: "a space before = is a parsing error: ignored", fields: ["Cache-Control: max-age=5", "CDN-Cache-Control: max-age =100"],
            targets: cdn, expected: nil),
        Row(name: "a space after = is a parsing error: ignored", fields: ["CDN-Cache-Control: max-age= 100"], targets: cdn,
            expected: nil),
        Row(name: "an upper-case key is a parsing error: ignored", fields: ["CDN-Cache-Control: MaX-aGe=3600"], targets: cdn,
            expected: nil),
        Row(name: "max-age as a String is the wrong type: ignored, not partly honoured",
            fields: ["CDN-Cache-Control: no-store, max-age=\"60\""], targets: cdn, expected: nil),
        Row(name: "a negative max-age: ignored", fields: ["CDN-Cache-Control: max-age=-1"], targets: cdn, expected: nil),
        Row(name: "public with a value: ignored", fields: ["CDN-Cache-Control: public=1, max-age=9"], targets: cdn,
            expected: nil),
        Row(name: "a trailing comma: ignored", fields: ["CDN-Cache-Control: max-age=9,"], targets: cdn, expected: nil),
        Row(name: "an invalid field gives way to the next listed one",
            fields: ["Larder-Cache-Control: max-age=x y", "CDN-Cache-Control: max-age=4"], targets: ours, expected: "max-age=4"),
        Row(name: "an extension directive is kept bare", fields: ["CDN-Cache-Control: foobar, max-age=3600"], targets: cdn,
            expected: "foobar, max-age=3600"),
        Row(name: "an extension with a parameter and a value: valid, left out",
            fields: ["CDN-Cache-Control: ext=(1 2);a=?0, max-age=5"], targets: cdn, expected: "max-age=5"),
        Row(name: "a false Boolean is no directive", fields: ["CDN-Cache-Control: no-store=?0, max-age=5"], targets: cdn,
            expected: "max-age=5"),
        Row(name: "field names for no-cache as an Inner List of Strings",
            fields: ["CDN-Cache-Control: no-cache=(\"set-cookie\" \"x-a\"), max-age=5"], targets: cdn,
            expected: "no-cache=\"set-cookie, x-a\", max-age=5"),
        Row(name: "field names for private as a String", fields: ["CDN-Cache-Control: private=\"x-a, x-b\""],
            targets: cdn, expected: "private=\"x-a, x-b\""),
        Row(name: "a quote inside the field names String: ignored", fields: ["CDN-Cache-Control: private=\"x\\\"y\""],
            targets: cdn, expected: nil),
        Row(name: "field names as a Token: the wrong type, ignored", fields: ["CDN-Cache-Control: private=x-a"],
            targets: cdn, expected: nil),
        Row(name: "a 15-digit max-age is an Integer", fields: ["CDN-Cache-Control: max-age=99999999999"], targets: cdn,
            expected: "max-age=99999999999"),
        Row(name: "a 16-digit max-age is not", fields: ["CDN-Cache-Control: max-age=9999999999999999"], targets: cdn,
            expected: nil),
        Row(name: "a key given twice keeps its last value", fields: ["CDN-Cache-Control: max-age=1, max-age=7"],
            targets: cdn, expected: "max-age=7"),
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
