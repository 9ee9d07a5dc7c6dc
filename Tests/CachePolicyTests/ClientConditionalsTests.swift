import Testing
import HTTPWire
import CachePolicy

struct NotModifiedRow: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var requestFields: [String]
    var status: Int
    var stored: [String]
    var expected: Bool
    var testDescription: String { name }
}

struct RangeRow: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var requestFields: [String]
    var length: Int
    var status: Int
    var stored: [String]
    var expected: RangeDecision
    var testDescription: String { name }
}

enum NotModifiedTable {
    static let lm = "Last-Modified: \(Dates.minus1000)"
    static let validators = ["ETag: \"v1\"", lm, "Date: \(Dates.t0)"]

    static func row(_ name: String, method: String = "GET", _ fields: [String], status: Int = 200,
                    stored: [String] = validators, _ expected: Bool) -> NotModifiedRow {
        NotModifiedRow(name: name, method: method, requestFields: fields, status: status, stored: stored, expected: expected)
    }

    static let rows: [NotModifiedRow] = [
        row("RFC9110 13.1.2 If-None-Match equal strong tag", ["If-None-Match: \"v1\""], true),
        row("RFC9110 13.1.2 If-None-Match different tag", ["If-None-Match: \"v2\""], false),
        row("RFC9110 13.1.2 If-None-Match list with the tag", ["If-None-Match: \"v0\", \"v1\""], true),
        row("RFC9110 13.1.2 If-None-Match in a second field", ["If-None-Match: \"v0\"", "If-None-Match: \"v1\""], true),
        row("RFC9110 8.8.3.2 weak comparison: W/ request tag matches strong stored", ["If-None-Match: W/\"v1\""], true),
        row("RFC9110 8.8.3.2 weak comparison: both weak", ["If-None-Match: W/\"v1\""], stored: ["ETag: W/\"v1\""], true),
        row("RFC9110 8.8.3.2 weak comparison: strong request tag matches weak stored", ["If-None-Match: \"v1\""],
            stored: ["ETag: W/\"v1\""], true),
        row("RFC9110 8.8.3 tags are case-sensitive", ["If-None-Match: \"V1\""], false),
        row("RFC9110 8.8.3 tag containing a comma", ["If-None-Match: \"a,b\""], stored: ["ETag: \"a,b\""], true),
        row("RFC9110 13.1.2 If-None-Match: * matches any stored representation", ["If-None-Match: *"], true),
        row("RFC9110 13.1.2 If-None-Match: * without a stored ETag", ["If-None-Match: *"], stored: [lm], true),
        row("RFC9110 13.1.2 If-None-Match with no stored ETag", ["If-None-Match: \"v1\""], stored: [lm], false),
        row("RFC9110 13.1.3 If-Modified-Since ignored when If-None-Match fails",
            ["If-None-Match: \"v2\"", "If-Modified-Since: \(Dates.t0)"], false),
        row("RFC9110 13.1.3 If-Modified-Since later than Last-Modified", ["If-Modified-Since: \(Dates.t0)"], true),
        row("RFC9110 13.1.3 If-Modified-Since equal to Last-Modified", ["If-Modified-Since: \(Dates.minus1000)"], true),
        row("RFC9110 13.1.3 If-Modified-Since earlier than Last-Modified", ["If-Modified-Since: \(Dates.minus10Days)"], false),
        row("RFC9110 13.1.3 If-Modified-Since in asctime form", ["If-Modified-Since: Tue Nov 14 21:56:40 2023"], true),
        row("RFC9110 13.1.3 invalid If-Modified-Since ignored", ["If-Modified-Since: yesterday"], false),
        row("RFC9111 4.3.2 If-Modified-Since without Last-Modified uses Date",
            ["If-Modified-Since: \(Dates.minus30)"], stored: ["Date: \(Dates.minus60)"], true),
        row("RFC9111 4.3.2 If-Modified-Since before Date",
            ["If-Modified-Since: \(Dates.minus60)"], stored: ["Date: \(Dates.minus30)"], false),
        row("RFC9111 4.3.2 If-Modified-Since without Last-Modified or Date: time received",
            ["If-Modified-Since: \(Dates.t0)"], stored: [], true),
        row("RFC9110 13.1.3 HEAD", method: "HEAD", ["If-None-Match: \"v1\""], true),
        row("RFC9110 13.1.3 POST is never answered 304", method: "POST", ["If-None-Match: \"v1\"", "Content-Length: 0"],
            false),
        row("RFC9110 13.2.1 stored 404 is not answered 304", ["If-None-Match: \"v1\""], status: 404, false),
        row("RFC9110 13.2.1 stored 301 is not answered 304", ["If-Modified-Since: \(Dates.t0)"], status: 301, false),
        row("RFC9110 13.1 no conditionals", [], false),
    ]
}

enum RangeTable {
    static let stored = ["ETag: \"v1\"", "Last-Modified: \(Dates.minus1000)", "Date: \(Dates.t0)"]

    static func row(_ name: String, method: String = "GET", _ fields: [String], length: Int = 1000, status: Int = 200,
                    stored: [String] = stored, _ expected: RangeDecision) -> RangeRow {
        RangeRow(name: name, method: method, requestFields: fields, length: length, status: status, stored: stored,
                 expected: expected)
    }

    static let rows: [RangeRow] = [
        row("RFC9110 14.2 no Range: full", [], .full),
        row("RFC9110 14.1.2 first-last", ["Range: bytes=0-99"], .single(start: 0, end: 99)),
        row("RFC9110 14.1.2 first byte only", ["Range: bytes=0-0"], .single(start: 0, end: 0)),
        row("RFC9110 14.1.2 last byte by position", ["Range: bytes=999-999"], .single(start: 999, end: 999)),
        row("RFC9110 14.1.2 first- (open end)", ["Range: bytes=100-"], .single(start: 100, end: 999)),
        row("RFC9110 14.1.2 -suffix", ["Range: bytes=-50"], .single(start: 950, end: 999)),
        row("RFC9110 14.1.2 suffix longer than the body: whole body", ["Range: bytes=-5000"], .single(start: 0, end: 999)),
        row("RFC9110 14.1.2 last beyond the end clamped", ["Range: bytes=500-5000"], .single(start: 500, end: 999)),
        row("RFC9110 14.1.2 huge last clamped", ["Range: bytes=0-99999999999999999999999"], .single(start: 0, end: 999)),
        row("RFC9110 14.1.1 first at the length: unsatisfiable", ["Range: bytes=1000-"], .unsatisfiable),
        row("RFC9110 14.1.1 first beyond the length: unsatisfiable", ["Range: bytes=2000-2100"], .unsatisfiable),
        row("RFC9110 14.1.1 huge first: unsatisfiable", ["Range: bytes=99999999999999999999999-"], .unsatisfiable),
        row("RFC9110 14.1.1 suffix of zero: unsatisfiable", ["Range: bytes=-0"], .unsatisfiable),
        row("RFC9110 14.1.1 range on an empty body: unsatisfiable", ["Range: bytes=0-0"], length: 0, .unsatisfiable),
        row("RFC9110 14.1.1 suffix on an empty body: unsatisfiable", ["Range: bytes=-5"], length: 0, .unsatisfiable),
        row("RFC9110 14.1.2 several ranges: pass to origin", ["Range: bytes=0-9,20-29"], .passToOrigin),
        row("RFC9110 14.1.2 several ranges with whitespace: pass to origin", ["Range: bytes=0-9, -5"], .passToOrigin),
        row("RFC9110 5.6.1 empty list elements do not count", ["Range: bytes=0-9,"], .single(start: 0, end: 9)),
        row("RFC9110 14.1 range unit case-insensitive", ["Range: BYTES=0-9"], .single(start: 0, end: 9)),
        row("RFC9110 14.2 other unit ignored", ["Range: items=0-9"], .full),
        row("RFC9110 14.1.1 last before first: ignored", ["Range: bytes=9-0"], .full),
        row("RFC9110 14.2 malformed: letters", ["Range: bytes=a-b"], .full),
        row("RFC9110 14.2 malformed: empty set", ["Range: bytes="], .full),
        row("RFC9110 14.2 malformed: dash only", ["Range: bytes=-"], .full),
        row("RFC9110 14.2 malformed: two dashes", ["Range: bytes=1-2-3"], .full),
        row("RFC9110 14.2 malformed: no dash", ["Range: bytes=5"], .full),
        row("RFC9110 14.2 malformed: space before =", ["Range: bytes =0-9"], .full),
        row("RFC9110 14.2 malformed: negative first", ["Range: bytes=--5"], .full),
        row("RFC9110 14.2 one malformed range among several: ignored", ["Range: bytes=0-9,x"], .full),
        row("RFC9110 13.1.5 If-Range strong ETag matches", ["Range: bytes=0-9", "If-Range: \"v1\""],
            .single(start: 0, end: 9)),
        row("RFC9110 13.1.5 If-Range different ETag: full", ["Range: bytes=0-9", "If-Range: \"v2\""], .full),
        row("RFC9110 13.1.5 If-Range weak ETag never matches", ["Range: bytes=0-9", "If-Range: W/\"v1\""], .full),
        row("RFC9110 13.1.5 If-Range against a weak stored ETag: full", ["Range: bytes=0-9", "If-Range: \"v1\""],
            stored: ["ETag: W/\"v1\""], .full),
        row("RFC9110 13.1.5 If-Range ETag with nothing stored: full", ["Range: bytes=0-9", "If-Range: \"v1\""],
            stored: [], .full),
        row("RFC9110 13.1.5 If-Range date equal to Last-Modified", ["Range: bytes=0-9", "If-Range: \(Dates.minus1000)"],
            .single(start: 0, end: 9)),
        row("RFC9110 13.1.5 If-Range date (a Wednesday) equal to Last-Modified", ["Range: bytes=5-", "If-Range: \(Dates.plus1Day)"],
            stored: ["Last-Modified: \(Dates.plus1Day)"], .single(start: 5, end: 999)),
        row("RFC9110 13.1.5 If-Range date later than Last-Modified: full",
            ["Range: bytes=0-9", "If-Range: \(Dates.t0)"], .full),
        row("RFC9110 13.1.5 If-Range date without Last-Modified: full", ["Range: bytes=0-9", "If-Range: \(Dates.t0)"],
            stored: ["ETag: \"v1\""], .full),
        row("RFC9110 13.1.5 If-Range invalid: full", ["Range: bytes=0-9", "If-Range: soon"], .full),
        row("RFC9110 13.1.5 If-Range without Range: full", ["If-Range: \"v1\""], .full),
        row("RFC9110 14.2 Range on HEAD ignored", method: "HEAD", ["Range: bytes=0-9"], .full),
        row("RFC9110 14.2 Range on a stored 404 ignored", ["Range: bytes=0-9"], status: 404, .full),
    ]
}

@Suite("ClientConditionals")
struct ClientConditionalsTests {
    @Test("not modified", arguments: NotModifiedTable.rows)
    func notModified(_ row: NotModifiedRow) {
        let stored = entry(row.stored, status: row.status)
        let head = request(row.requestFields, method: row.method)
        #expect(ClientConditionals.notModified(request: head, entry: stored) == row.expected)
    }

    @Test("range", arguments: RangeTable.rows)
    func range(_ row: RangeRow) {
        let stored = entry(row.stored, status: row.status)
        let head = request(row.requestFields, method: row.method)
        #expect(RangeRequest.decide(request: head, length: row.length, entry: stored) == row.expected)
    }
}
