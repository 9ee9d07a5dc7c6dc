import Testing
import HTTPWire
import CachePolicy

struct VerdictRow: Sendable, CustomTestStringConvertible {
    var name: String
    var stored: [String]
    /// The client's request fields; nil when the exchange has no request facts.
    var requestFields: [String]?
    /// The client's method: a client's HEAD gets the HEAD's answer.
    var requestMethod: String = "GET"
    var policy: RequestCachePolicy?
    var method: RevalidationMethod
    /// nil: no answer (the connection failed).
    var status: Int?
    var responseFields: [String]
    var now: Int64
    var background: Bool
    var expected: RevalidationVerdict
    var testDescription: String { name }
}

enum VerdictTable {
    static func row(_ name: String, stored: [String] = sie, request: [String]? = [], clientMethod: String = "GET",
                    policy: RequestCachePolicy? = nil, method: RevalidationMethod = .head, status: Int?,
                    answer response: [String] = [], now: Int64 = t0 + 30, background: Bool = false,
                    _ expected: RevalidationVerdict) -> VerdictRow {
        VerdictRow(name: name, stored: stored, requestFields: request, requestMethod: clientMethod, policy: policy,
                   method: method, status: status, responseFields: response, now: now, background: background,
                   expected: expected)
    }

    static let date = "Date: \(Dates.t0)"
    static let lm = "Last-Modified: \(Dates.minus1000)"
    static let validators = ["ETag: \"v1\"", lm, "Content-Length: 100"]
    /// Fresh for 10 seconds, then usable on error for 60 more (until t0 + 70).
    static let sie = [date, "Cache-Control: max-age=10, stale-if-error=60"] + validators
    static let plain = [date, "Cache-Control: max-age=10"] + validators
    static let mustRevalidate = [date, "Cache-Control: max-age=10, stale-if-error=60, must-revalidate"] + validators
    static let same = ["ETag: \"v1\"", "Content-Length: 100"]
    static let other = ["ETag: \"v2\"", "Content-Length: 100"]

    static let client: [VerdictRow] = [
        row("RFC9111 4.3.4 304 to HEAD: unchanged", status: 304, answer: ["ETag: \"v1\""], .unchanged),
        row("RFC9111 4.3.4 304 to conditional GET: unchanged", method: .conditionalGet, status: 304, .unchanged),
        row("RFC9111 4.3.5 HEAD, same strong ETag: unchanged", status: 200, answer: same, .unchanged),
        row("RFC9111 4.3.5 HEAD, weak ETags, same Last-Modified and length: unchanged",
            stored: [date, "Cache-Control: max-age=10", "ETag: W/\"v1\"", lm, "Content-Length: 100"], status: 200,
            answer: ["ETag: W/\"v1\"", lm, "Content-Length: 100"], .unchanged),
        row("RFC9111 4.3.5 HEAD, other ETag: refetch with GET", status: 200, answer: other, .changedRefetch),
        row("RFC9111 4.3.1 200 to conditional GET: it is the new response", method: .conditionalGet, status: 200, answer: same,
            .changedStoreThis),
        row("404 to HEAD: refetch", status: 404, .changedRefetch),
        row("404 to conditional GET: forward and offer to the store", method: .conditionalGet, status: 404,
            .changedStoreThis),

        row("RFC5861 4 503 within stale-if-error, HEAD: serve stale", status: 503, .serveStale(.originError)),
        row("RFC5861 4 503 within stale-if-error, conditional GET: serve stale", method: .conditionalGet, status: 503,
            .serveStale(.originError)),
        row("RFC5861 4 500 within stale-if-error: serve stale", status: 500, .serveStale(.originError)),
        row("RFC5861 4 502 within stale-if-error: serve stale", status: 502, .serveStale(.originError)),
        row("RFC5861 4 504 within stale-if-error: serve stale", status: 504, .serveStale(.originError)),
        row("RFC5861 4 503 at the window's end: serve stale", status: 503, now: t0 + 70, .serveStale(.originError)),
        row("RFC5861 4 503 past the window, HEAD: refetch (the error reaches the client)", status: 503, now: t0 + 71,
            .changedRefetch),
        row("RFC5861 4 503 past the window, conditional GET: forward the error", method: .conditionalGet, status: 503,
            now: t0 + 71, .changedStoreThis),
        row("RFC5861 4 501 is not an error to hide", status: 501, .changedRefetch),
        row("RFC9111 4.2.4 must-revalidate: 503 never hidden", stored: mustRevalidate, status: 503, .changedRefetch),
        row("RFC9111 5.2.1.2 request max-stale hides a 503", stored: plain, request: ["Cache-Control: max-stale=100"],
            status: 503, .serveStale(.originError)),
        row("no window on either side: 503 not hidden", stored: plain, status: 503, .changedRefetch),
        row("no request facts: 503 never hidden", request: nil, status: 503, .changedRefetch),

        row("RFC5861 4 no answer within stale-if-error: serve stale", status: nil, .serveStale(.originUnreachable)),
        row("RFC5861 4 no answer to a conditional GET: serve stale", method: .conditionalGet, status: nil,
            .serveStale(.originUnreachable)),
        row("RFC5861 4 no answer past the window: the error", status: nil, now: t0 + 71, .forwardError),
        row("RFC9111 4.2.4 no answer, must-revalidate: the error", stored: mustRevalidate, status: nil, .forwardError),
        row("no answer, no request facts: the error", request: nil, status: nil, .forwardError),
        row("no answer, returnCacheDataElseLoad: serve stale whatever its age", stored: plain,
            policy: .returnCacheDataElseLoad, status: nil, now: t0 + 86_400, .serveStale(.originUnreachable)),

        // A client's HEAD: one round trip, its answer freshens or invalidates (RFC 9111 §4.3.5).
        row("RFC9111 4.3.5 client HEAD, same strong ETag: unchanged", clientMethod: "HEAD", status: 200, answer: same,
            .unchanged),
        row("RFC9111 4.3.4 client HEAD, 304: unchanged", clientMethod: "HEAD", status: 304, .unchanged),
        row("RFC9111 4.3.5 client HEAD, other ETag: invalidate, the answer is the client's", clientMethod: "HEAD",
            status: 200, answer: other, .changedForwardThis),
        row("RFC9111 4.3.5 client HEAD, other length: invalidate, forward",
            stored: [date, "Cache-Control: max-age=10", lm, "Content-Length: 100"], clientMethod: "HEAD", status: 200,
            answer: [lm, "Content-Length: 7"], .changedForwardThis),
        row("RFC9111 3.5 client HEAD with credentials, matching ETag: served, the shared entry not updated",
            stored: [date, "Cache-Control: max-age=10", "ETag: \"v\""], request: ["Authorization: Basic eDp5"],
            clientMethod: "HEAD", status: 200, answer: ["ETag: \"v\"", "X-User: x"], .unchangedNotShared),
        row("RFC9111 3.5 client GET with credentials, HEAD revalidation matching: served, not updated",
            stored: [date, "Cache-Control: max-age=10", "ETag: \"v\""], request: ["Authorization: Basic eDp5"],
            status: 200, answer: ["ETag: \"v\""], .unchangedNotShared),
        row("RFC9111 3.5 credentials, an answer that says public: updates",
            stored: [date, "Cache-Control: max-age=10", "ETag: \"v\""], request: ["Authorization: Basic eDp5"],
            clientMethod: "HEAD", status: 200, answer: ["ETag: \"v\"", "Cache-Control: public, max-age=60"], .unchanged),
        row("RFC9111 5.2.1.5 client HEAD with no-store: served, not updated",
            stored: [date, "Cache-Control: max-age=10", "Content-Length: 100"], request: ["Cache-Control: no-store"],
            clientMethod: "HEAD", status: 200, answer: ["Content-Length: 100"], .unchangedNotShared),
        row("client HEAD with a Cookie, no validators: served, not updated (its 200 carries every field)",
            stored: [date, "Cache-Control: max-age=10", "Content-Length: 100"], request: ["Cookie: s=alice"],
            clientMethod: "HEAD", status: 200, answer: ["Content-Length: 100", "X-User: alice"], .unchangedNotShared),
        row("RFC9111 3.5 a 304 to a request with credentials: served, the shared entry not updated",
            stored: [date, "Cache-Control: max-age=10", "ETag: \"v\""], request: ["Authorization: Basic eDp5"],
            status: 304, answer: ["ETag: \"v\"", "X-User: x"], .unchangedNotShared),
        row("RFC9111 5.2.2.7 a 304 that says private never updates the shared entry",
            stored: [date, "Cache-Control: max-age=10", "ETag: \"v\""], status: 304,
            answer: ["ETag: \"v\"", "Cache-Control: private, max-age=600"], .unchangedNotShared),
        row("RFC9111 5.2.2.5 a HEAD's 200 that says no-store never updates the shared entry",
            stored: [date, "Cache-Control: max-age=10", "Content-Length: 100"], clientMethod: "HEAD", status: 200,
            answer: ["Content-Length: 100", "Cache-Control: no-store"], .unchangedNotShared),
        row("a 304 that qualifies private=\"x-user\" still updates (the field is left out)",
            stored: [date, "Cache-Control: max-age=10", "ETag: \"v\""], status: 304,
            answer: ["ETag: \"v\"", "Cache-Control: private=\"x-user\", max-age=600"], .unchanged),
        row("RFC9111 4.3.5 client HEAD, no validator on either side: the 200 freshens the entry",
            stored: [date, "Cache-Control: max-age=10", "Content-Length: 100"], clientMethod: "HEAD", status: 200,
            answer: ["Content-Length: 100"], .unchanged),
        row("RFC9111 4.3.5 client HEAD, no validator on either side, other length: invalidate, forward",
            stored: [date, "Cache-Control: max-age=10", "Content-Length: 100"], clientMethod: "HEAD", status: 200,
            answer: ["Content-Length: 99"], .changedForwardThis),
        row("RFC9111 4.3.5 client HEAD, no validator on either side, 410: invalidate, forward",
            stored: [date, "Cache-Control: max-age=10"], clientMethod: "HEAD", status: 410, .changedForwardThis),
        row("client HEAD, 404: invalidate, forward", clientMethod: "HEAD", status: 404, .changedForwardThis),
        row("RFC5861 4 client HEAD, 503 within stale-if-error: serve stale", clientMethod: "HEAD", status: 503,
            .serveStale(.originError)),
        row("client HEAD, 503 past the window: forward the error", clientMethod: "HEAD", status: 503, now: t0 + 71,
            .changedForwardThis),
        row("RFC5861 4 client HEAD, no answer: serve stale", clientMethod: "HEAD", status: nil,
            .serveStale(.originUnreachable)),
        row("no request facts: a changed HEAD answer is refetched", request: nil, status: 200, answer: other,
            .changedRefetch),
    ]

    static let background: [VerdictRow] = [
        row("RFC5861 3 304 to HEAD: unchanged", status: 304, background: true, .unchanged),
        row("RFC5861 3 304 to conditional GET: unchanged", method: .conditionalGet, status: 304, background: true,
            .unchanged),
        row("RFC5861 3 HEAD, same ETag: unchanged", status: 200, answer: same, background: true, .unchanged),
        row("RFC5861 3 HEAD, other ETag: refetch and store", status: 200, answer: other, background: true, .changedRefetch),
        row("RFC5861 3 conditional GET 200: store it", method: .conditionalGet, status: 200, answer: other, background: true,
            .changedStoreThis),
        row("RFC5861 3 404 to conditional GET: offered to the store", method: .conditionalGet, status: 404,
            background: true, .changedStoreThis),
        row("RFC5861 3 503 within stale-if-error: the entry stays, nothing to serve", status: 503, background: true,
            .keepEntryAndGiveUp),
        row("RFC5861 3 500 without a window: the entry stays", stored: plain, status: 500, background: true,
            .keepEntryAndGiveUp),
        row("RFC5861 3 501 is a 5xx too: the entry stays", status: 501, background: true, .keepEntryAndGiveUp),
        row("RFC5861 3 5xx to a conditional GET: the entry stays", method: .conditionalGet, status: 502,
            background: true, .keepEntryAndGiveUp),
        row("RFC5861 3 must-revalidate 503: the entry stays", stored: mustRevalidate, status: 503, background: true,
            .keepEntryAndGiveUp),
        row("RFC5861 3 no answer: the entry stays", status: nil, background: true, .keepEntryAndGiveUp),
        row("RFC5861 3 no answer past every window: the entry stays", stored: plain, status: nil, now: t0 + 86_400,
            background: true, .keepEntryAndGiveUp),
        row("RFC5861 3 no request facts change nothing", request: nil, status: 304, background: true, .unchanged),
        row("RFC9111 5.2.2.7 a refresh's 304 that says private: the entry stays as it was", status: 304,
            answer: ["Cache-Control: private, max-age=600"], background: true, .keepEntryAndGiveUp),
        row("RFC5861 3 refresh for a client's HEAD, other ETag: refetch the GET and store it", clientMethod: "HEAD",
            status: 200, answer: other, background: true, .changedRefetch),
        row("RFC5861 3 plain GET for an entry without validators: store it", stored: [date, "Cache-Control: max-age=10"],
            method: .conditionalGet, status: 200, background: true, .changedStoreThis),
    ]
}

func verdict(_ row: VerdictRow) throws -> RevalidationVerdict {
    let facts = try row.requestFields.map {
        try RequestFacts.make(request($0, method: row.requestMethod), rulePolicy: row.policy, settings: PolicySettings())
    }
    let answer = row.status.map { response(row.responseFields, status: $0, method: row.method == .head ? .head : .get) }
    let cookie = row.requestFields?.contains { $0.lowercased().hasPrefix("cookie:") } ?? false
    return Revalidation.verdict(entry: entry(row.stored), request: facts, response: answer, method: row.method,
                                now: row.now, background: row.background,
                                storedHead: response(row.stored, status: 200, method: .get), requestHasCookie: cookie)
}

@Suite("Revalidation verdict")
struct RevalidationVerdictTests {
    @Test("client", arguments: VerdictTable.client)
    func client(_ row: VerdictRow) throws {
        #expect(try verdict(row) == row.expected)
    }

    @Test("background refresh", arguments: VerdictTable.background)
    func background(_ row: VerdictRow) throws {
        #expect(try verdict(row) == row.expected)
    }

    /// Each path switches only on its own cases: every final status, both methods, with and
    /// without an answer, an entry that may be served stale and one that may not.
    @Test("client and background cases never cross", arguments: [false, true])
    func casesNeverCross(background: Bool) throws {
        let statuses: [Int?] = [nil] + Array(200...599)
        for stored in [VerdictTable.sie, VerdictTable.mustRevalidate] {
            for (clientMethod, method) in [("GET", RevalidationMethod.head), ("GET", .conditionalGet), ("HEAD", .head)] {
                for status in statuses {
                    let row = VerdictTable.row("sweep", stored: stored, clientMethod: clientMethod, method: method,
                                               status: status, background: background, .unchanged)
                    let at = "\(String(describing: status)) \(clientMethod) \(method)"
                    switch try verdict(row) {
                    case .serveStale, .forwardError:
                        #expect(!background, "\(at)")
                    case .keepEntryAndGiveUp:
                        #expect(background, "\(at)")
                    case .changedRefetch:
                        #expect(method == .head && (background || clientMethod == "GET"), "\(at)")
                    case .changedForwardThis:
                        #expect(!background && clientMethod == "HEAD" && method == .head, "\(at)")
                    case .changedStoreThis:
                        #expect(method == .conditionalGet, "\(at)")
                    case .unchanged:
                        break
                    case .unchangedNotShared:
                        #expect(!background, "\(at)")
                    }
                }
            }
        }
    }

    /// The verdict follows `outcome` wherever the origin answered, except a background refresh's
    /// 5xx (the outcome rows' entries have no stale-if-error window, so a client's 5xx follows it).
    @Test("agrees with outcome", arguments: OutcomeTable.rows)
    func agreesWithOutcome(_ row: OutcomeRow) throws {
        for background in [false, true] {
            let v = try verdict(VerdictRow(name: row.name, stored: row.stored, requestFields: [], policy: nil,
                                           method: row.method, status: row.status, responseFields: row.update,
                                           now: t0, background: background, expected: .unchanged))
            if background, row.status >= 500 {
                #expect(v == .keepEntryAndGiveUp)
                continue
            }
            switch row.expected {
            case .unchanged: #expect(v == .unchanged)
            case .changed: #expect(v == (row.method == .head ? .changedRefetch : .changedStoreThis))
            }
        }
    }
}
