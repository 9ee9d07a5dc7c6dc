import Testing
import HTTPWire
import CachePolicy

struct CollapseRow: Sendable, CustomTestStringConvertible {
    var name: String
    var enabled: Bool
    var reason: FetchReason
    var method: String
    var requestFields: [String]
    var hasBody: Bool
    var upgradeRequested: Bool
    var expected: CollapseEligibility
    var testDescription: String { name }
}

enum CollapseTable {
    static func row(_ name: String, enabled: Bool = true, reason: FetchReason = .uriMiss, method: String = "GET",
                    request: [String] = [], hasBody: Bool = false, upgrade: Bool = false,
                    _ expected: CollapseEligibility) -> CollapseRow {
        CollapseRow(name: name, enabled: enabled, reason: reason, method: method, requestFields: request,
                    hasBody: hasBody, upgradeRequested: upgrade, expected: expected)
    }

    static let rows: [CollapseRow] = [
        row("plain GET, nothing stored: collapse", .collapse),
        row("plain GET, no matching variant: collapse", reason: .varyMiss, .collapse),
        row("plain GET, stored but unusable: collapse", reason: .miss, .collapse),
        row("Authorization does not stop collapsing (only a storable answer is shared)",
            request: ["Authorization: Basic eDp5"], .collapse),
        row("Cookie does not stop collapsing (Set-Cookie is never shared)", request: ["Cookie: a=b"], .collapse),
        row("If-Range without Range is no range", request: ["If-Range: \"v1\""], .collapse),
        row("request no-store still collapses (the answer is not stored, so not shared)",
            request: ["Cache-Control: no-store"], .collapse),

        row("setting off", enabled: false, .fetchAlone(.disabled)),
        row("setting off comes first", enabled: false, reason: .request, method: "HEAD", request: ["Range: bytes=0-1"],
            hasBody: true, upgrade: true, .fetchAlone(.disabled)),
        row("reload policy asked for the origin", reason: .request, .fetchAlone(.reload)),
        row("reload by header", reason: .request, request: ["Larder-Cache-Policy: reload-ignoring-local-cache-data"],
            .fetchAlone(.reload)),
        row("bypass", reason: .bypass, request: ["If-Match: \"v1\""], .fetchAlone(.bypass)),
        row("HEAD fetches alone", method: "HEAD", .fetchAlone(.method)),
        row("POST fetches alone", method: "POST", request: ["Content-Length: 0"], hasBody: true, .fetchAlone(.method)),
        row("RFC9110 14.2 Range", request: ["Range: bytes=0-99"], .fetchAlone(.range)),
        row("RFC9110 13.1.2 If-None-Match", request: ["If-None-Match: \"v1\""], .fetchAlone(.conditionals)),
        row("RFC9110 13.1.3 If-Modified-Since", request: ["If-Modified-Since: \(Dates.minus60)"],
            .fetchAlone(.conditionals)),
        row("range before conditionals", request: ["If-None-Match: \"v1\"", "Range: bytes=0-1"], .fetchAlone(.range)),
        row("GET with a body", hasBody: true, .fetchAlone(.body)),
        row("GET with an upgrade", upgrade: true, .fetchAlone(.upgrade)),
        row("body before upgrade", hasBody: true, upgrade: true, .fetchAlone(.body)),
    ]
}

@Suite("Collapse")
struct CollapseTests {
    @Test("eligibility", arguments: CollapseTable.rows)
    func eligibility(_ row: CollapseRow) throws {
        let facts = try RequestFacts.make(request(row.requestFields, method: row.method), rulePolicy: nil,
                                          settings: PolicySettings())
        #expect(Collapse.eligibility(enabled: row.enabled, reason: row.reason, request: facts, hasBody: row.hasBody,
                                     upgradeRequested: row.upgradeRequested) == row.expected)
    }
}
