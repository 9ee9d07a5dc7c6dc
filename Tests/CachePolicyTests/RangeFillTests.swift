import CachePolicy
import HTTPWire
import Testing

/// Which ranged misses fetch the whole object to fill the cache (`RangeRequest.fillsCache`).
@Suite struct RangeFillTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var method = "GET"
        var fields: [String]
        var fills: Bool
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "first-last", fields: ["Range: bytes=0-99"], fills: true),
        Row(name: "open-ended", fields: ["Range: bytes=1000-"], fills: true),
        Row(name: "suffix", fields: ["Range: bytes=-500"], fills: true),
        Row(name: "unit in another case", fields: ["Range: Bytes=0-1"], fills: true),
        Row(name: "no Range", fields: [], fills: false),
        Row(name: "several ranges", fields: ["Range: bytes=0-1,5-9"], fills: false),
        Row(name: "malformed", fields: ["Range: bytes=9-1"], fills: false),
        Row(name: "another unit", fields: ["Range: items=0-1"], fills: false),
        Row(name: "HEAD", method: "HEAD", fields: ["Range: bytes=0-1"], fills: false),
        Row(name: "If-Range", fields: ["Range: bytes=0-1", "If-Range: \"v1\""], fills: false),
        Row(name: "a conditional", fields: ["Range: bytes=0-1", "If-None-Match: \"v1\""], fills: false),
        Row(name: "a precondition", fields: ["Range: bytes=0-1", "If-Match: \"v1\""], fills: false),
    ]

    @Test(arguments: rows) func fills(_ row: Row) throws {
        let head = request(row.fields, method: row.method)
        let facts = try RequestFacts.make(head, rulePolicy: nil, settings: PolicySettings())
        #expect(RangeRequest.fillsCache(head, facts: facts) == row.fills)
    }
}
