import Testing
import HTTPWire
import CachePolicy

/// What a row expects; for stored rows the facts are also checked against `EntryFacts.make`.
enum StoreExpectation: Sendable, Equatable {
    case stored(tier: StoragePolicy, omit: [String], lifetime: Int64, expectedLength: Int?)
    case refused(NotStoredReason)
}

struct StoreVerdictRow: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var requestFields: [String]
    var status: Int
    var responseFields: [String]
    var storagePolicy: StoragePolicy
    var override: FreshnessOverride?
    var requestTime: Int64
    var expected: StoreExpectation
    var testDescription: String { name }
}

enum StoreVerdictTable {
    static func row(_ name: String, method: String = "GET", request: [String] = [], status: Int = 200,
                    _ response: [String], policy: StoragePolicy = .allowed, override: FreshnessOverride? = nil,
                    requestTime: Int64 = t0, _ expected: StoreExpectation) -> StoreVerdictRow {
        StoreVerdictRow(name: name, method: method, requestFields: request, status: status, responseFields: response,
                        storagePolicy: policy, override: override, requestTime: requestTime, expected: expected)
    }

    static func stored(_ lifetime: Int64, length: Int? = 5, tier: StoragePolicy = .allowed,
                       omit: [String] = []) -> StoreExpectation {
        .stored(tier: tier, omit: omit, lifetime: lifetime, expectedLength: length)
    }

    static let date = "Date: \(Dates.t0)"
    static let length = "Content-Length: 5"
    static let etag = "ETag: \"v1\""

    static let rows: [StoreVerdictRow] = [
        // The method comes first.
        row("GET with max-age: stored", [date, "Cache-Control: max-age=60", length], stored(60)),
        row("HEAD is never stored, not even with max-age", method: "HEAD", [date, "Cache-Control: max-age=60", length],
            .refused(.method)),
        row("POST is never stored", method: "POST", request: ["Content-Length: 0"], [date, "Cache-Control: max-age=60"],
            .refused(.method)),
        row("method before no-store", method: "HEAD", ["Cache-Control: no-store"], .refused(.method)),

        // Storability.decide's reasons come through unchanged.
        row("RFC9111 5.2.2.5 no-store", ["Cache-Control: no-store, max-age=60"], .refused(.responseNoStore)),
        row("RFC9111 5.2.1.5 request no-store", request: ["Cache-Control: no-store"], ["Cache-Control: max-age=60"],
            .refused(.requestNoStore)),
        row("RFC9111 5.2.2.7 private", ["Cache-Control: private, max-age=60"], .refused(.privateResponse)),
        row("RFC9111 3.5 Authorization without public", request: ["Authorization: Basic eDp5"],
            ["Cache-Control: max-age=60"], .refused(.authorization)),
        row("RFC9111 3.3 206 answering no Range", status: 206, ["Content-Range: bytes 0-4/10", "Cache-Control: max-age=60", length],
            .refused(.partialContent)),
        row("RFC9111 4.1 Vary: *", ["Cache-Control: max-age=60", "Vary: *"], .refused(.varyStar)),
        row("storage policy not-allowed", [date, "Cache-Control: max-age=60"], policy: .notAllowed,
            .refused(.storagePolicy)),
        row("302 without explicit freshness", status: 302, [date, "Location: /x"], .refused(.status)),
        row("500 with max-age=0 and no validator: refused by decide", status: 500, [date, "Cache-Control: max-age=0"],
            .refused(.noFreshnessOrValidator)),

        // The plan: tier, omitted fields, facts, expected length.
        row("memory-only tier kept", [date, "Cache-Control: max-age=60", length], policy: .allowedInMemoryOnly,
            stored(60, tier: .allowedInMemoryOnly)),
        row("RFC9111 5.2.2.7 private=\"f\" fields omitted",
            [date, "Cache-Control: max-age=60, private=\"X-User\", no-cache=\"X-Trace\"", length],
            stored(60, omit: ["x-user", "x-trace"])),
        row("chunked body: no expected length", [date, "Cache-Control: max-age=60", "Transfer-Encoding: chunked"],
            stored(60, length: nil)),
        row("close-delimited body: no expected length", [date, "Cache-Control: max-age=60"], stored(60, length: nil)),
        row("204 has no body to expect", status: 204, [date, "Cache-Control: max-age=60"], stored(60, length: nil)),
        row("RFC9111 4.2.3 Age and response delay count against the lifetime, not for it",
            [date, "Cache-Control: max-age=60", "Age: 10", length], requestTime: t0 - 2, stored(60)),

        // Stale at once with nothing to revalidate by.
        row("200 with only Date: never fresh, no validator", [date, length], .refused(.noFreshnessOrValidator)),
        row("200 with max-age=0 and no validator", [date, "Cache-Control: max-age=0", length],
            .refused(.noFreshnessOrValidator)),
        row("200 with Expires in the past and no validator", [date, "Expires: \(Dates.minus60)", length],
            .refused(.noFreshnessOrValidator)),
        row("200 with max-age=0 and an ETag: stored to revalidate", [date, "Cache-Control: max-age=0", etag, length],
            stored(0)),
        row("200 with only an ETag: stored to revalidate", [date, etag, length], stored(0)),
        row("RFC9111 4.2.2 Last-Modified alone: heuristic lifetime",
            [date, "Last-Modified: \(Dates.minus1000)", length], stored(100)),
        row("no-cache with a validator: stored, revalidated on use",
            [date, "Cache-Control: no-cache", etag, length], stored(0)),

        // Rule overrides go into the facts, and can make or unmake an entry.
        row("rule default lifetime rescues a bare 200", [date, length],
            override: FreshnessOverride(defaultLifetime: 300), stored(300)),
        row("rule forced lifetime over max-age=0", [date, "Cache-Control: max-age=0", length],
            override: FreshnessOverride(forcedLifetime: 120), stored(120)),
        row("rule maximum lifetime 0, no validator: refused", [date, "Cache-Control: max-age=60", length],
            override: FreshnessOverride(maximumLifetime: 0), .refused(.noFreshnessOrValidator)),
        row("rule maximum lifetime 0 with Last-Modified: stored to revalidate",
            [date, "Cache-Control: max-age=60", "Last-Modified: \(Dates.minus1000)", length],
            override: FreshnessOverride(maximumLifetime: 0), stored(0)),
        row("rule maximum lifetime caps max-age", [date, "Cache-Control: max-age=600", length],
            override: FreshnessOverride(maximumLifetime: 30), stored(30)),

        // A preset's (guarded) lifetime never makes shareable what would not be without it: the
        // personal page behind `/account.php/pool/main/x.deb` stays out of the cache.
        row("preset year for a bare package", [date, "Content-Type: application/octet-stream", length],
            override: year, stored(31_536_000)),
        row("preset year yields to a request's Cookie", request: ["Cookie: sid=1"], [date, length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year yields to a request's Authorization: refused as any authorised answer",
            request: ["Authorization: Basic eDp5"], [date, length], override: year, .refused(.authorization)),
        row("preset year yields to Set-Cookie", [date, "Set-Cookie: sid=1", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year yields to max-age=0", [date, "Cache-Control: max-age=0", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year yields to must-revalidate, max-age=0 with a validator: stored stale",
            [date, "Cache-Control: max-age=0, must-revalidate", etag, length], override: year, stored(0)),
        row("preset year yields to no-cache", [date, "Cache-Control: no-cache", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year yields to s-maxage=0", [date, "Cache-Control: s-maxage=0", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year yields to an Expires no later than Date", [date, "Expires: \(Dates.t0)", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year yields to an invalid Expires", [date, "Expires: 0", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year yields to proxy-revalidate", [date, "Cache-Control: proxy-revalidate", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year never for an HTML page", [date, "Content-Type: text/html; charset=utf-8", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset year never for an XHTML page", [date, "Content-Type:  Application/XHTML+XML", length],
            override: year, .refused(.noFreshnessOrValidator)),
        row("preset index lifetime for an HTML index", [date, "Content-Type: text/html", length],
            override: FreshnessOverride(maximumLifetime: 300, defaultLifetime: 300, guarded: true), stored(300)),
        row("preset index lifetime yields to Set-Cookie",
            [date, "Content-Type: text/html", "Set-Cookie: sid=1", length],
            override: FreshnessOverride(maximumLifetime: 300, defaultLifetime: 300, guarded: true),
            .refused(.noFreshnessOrValidator)),
        row("a user's own forced lifetime applies as written, Cookie or not", request: ["Cookie: sid=1"],
            [date, "Cache-Control: max-age=0", "Content-Type: text/html", length],
            override: FreshnessOverride(forcedLifetime: 120), stored(120)),
    ]

    static let year = FreshnessOverride(forcedLifetime: 31_536_000, guarded: true)
}

@Suite("Store verdict")
struct StoreVerdictTests {
    @Test("verdict", arguments: StoreVerdictTable.rows)
    func verdict(_ row: StoreVerdictRow) {
        let req = request(row.requestFields, method: row.method)
        let res = response(row.responseFields, status: row.status, method: req.method)
        let verdict = Storability.verdict(request: req, response: res, storagePolicy: row.storagePolicy,
                                          override: row.override, requestTime: row.requestTime, responseTime: t0,
                                          settings: PolicySettings())
        switch verdict {
        case .doNotStore(let reason):
            #expect(StoreExpectation.refused(reason) == row.expected)
        case .store(let plan):
            #expect(StoreExpectation.stored(tier: plan.tier, omit: plan.omitFields.map(text),
                                            lifetime: plan.facts.freshnessLifetime,
                                            expectedLength: plan.expectedLength) == row.expected)
            let override = SharingGuard.applicable(row.override, requestHeaders: req.headers, response: res)
            let facts = EntryFacts.make(response: res, requestTime: row.requestTime, responseTime: t0,
                                        bodyLength: plan.expectedLength, settings: PolicySettings(),
                                        override: override)
            #expect(plan.facts == facts)
        }
    }

    @Test("agrees with Storability.decide wherever decide refuses", arguments: StoreTable.rows)
    func agreesWithDecide(_ row: StoreRow) {
        let req = request(row.requestFields, method: row.method)
        let res = response(row.responseFields, status: row.status, method: req.method)
        let decision = Storability.decide(request: req, response: res, storagePolicy: row.storagePolicy,
                                          settings: PolicySettings())
        let verdict = Storability.verdict(request: req, response: res, storagePolicy: row.storagePolicy, override: nil,
                                          requestTime: t0, responseTime: t0, settings: PolicySettings())
        switch (decision, verdict) {
        case (.doNotStore(let a), .doNotStore(let b)):
            #expect(a == b)
        case (.store(let tier, let omit), .store(let plan)):
            #expect(plan.tier == tier && plan.omitFields == omit)
        case (.store, .doNotStore(let reason)):
            #expect(reason == .noFreshnessOrValidator, "only the facts check may refuse what decide stores")
        case (.doNotStore, .store):
            Issue.record("stored what decide refused")
        }
    }
}
