import Testing
import HTTPWire
import CachePolicy

struct StoreRow: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var requestFields: [String]
    var status: Int
    var responseFields: [String]
    var storagePolicy: StoragePolicy
    var expected: StoreDecision
    var testDescription: String { name }
}

enum StoreTable {
    static let stored = StoreDecision.store(tier: .allowed, omitFields: [])
    static let date = "Date: \(Dates.t0)"

    static func row(_ name: String, method: String = "GET", request: [String] = [], status: Int = 200,
                    _ response: [String], policy: StoragePolicy = .allowed, _ expected: StoreDecision) -> StoreRow {
        StoreRow(name: name, method: method, requestFields: request, status: status, responseFields: response,
                 storagePolicy: policy, expected: expected)
    }

    static let heuristicStatuses = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]
    static let otherStatuses = [201, 202, 205, 302, 303, 307, 400, 401, 403, 409, 500, 502, 503, 504]

    static let rows: [StoreRow] = [
        row("RFC9111 3 plain 200 stored", [date], stored),
        row("RFC9111 3 only GET responses are stored: HEAD", method: "HEAD", ["Cache-Control: max-age=60"], .doNotStore(.method)),
        row("RFC9111 3 only GET responses are stored: POST", method: "POST", ["Cache-Control: max-age=60"],
            .doNotStore(.method)),
        row("RFC9111 3 only GET responses are stored: PUT", method: "PUT", ["Cache-Control: max-age=60"], .doNotStore(.method)),
        row("RFC9111 3 only GET responses are stored: OPTIONS", method: "OPTIONS", ["Cache-Control: max-age=60"],
            .doNotStore(.method)),
        row("RFC9111 3 1xx is not final", status: 103, ["Link: </a.css>; rel=preload"], .doNotStore(.status)),
        row("RFC9111 3 304 as a final response is not stored", status: 304, ["Cache-Control: max-age=60"],
            .doNotStore(.status)),
        row("RFC9111 3.3 206 answering no Range not stored", status: 206,
            ["Content-Range: bytes 0-9/100", "Content-Length: 10", "Cache-Control: max-age=60"], .doNotStore(.partialContent)),
        row("RFC9111 3.3 206 answering its Range stored as a piece", request: ["Range: bytes=0-9"], status: 206,
            ["Content-Range: bytes 0-9/100", "Content-Length: 10", "Cache-Control: max-age=60"], stored),
        row("RFC9111 3.3 206 whose length is not its Content-Range's not stored", request: ["Range: bytes=0-9"], status: 206,
            ["Content-Range: bytes 0-9/100", "Content-Length: 5", "Cache-Control: max-age=60"], .doNotStore(.partialContent)),
        row("RFC9111 3.3 206 of unknown complete length not stored", request: ["Range: bytes=0-9"], status: 206,
            ["Content-Range: bytes 0-9/*", "Content-Length: 10", "Cache-Control: max-age=60"], .doNotStore(.partialContent)),
        row("RFC9111 3.3 a piece obeys Cache-Control like any response", request: ["Range: bytes=0-9"], status: 206,
            ["Content-Range: bytes 0-9/100", "Content-Length: 10", "Cache-Control: no-store"], .doNotStore(.responseNoStore)),
        row("RFC9110 14.4 200 with Content-Range to a ranged request: not stored (maybe a mislabelled piece)",
            request: ["Range: bytes=90-99"], ["Content-Range: bytes 90-99/100", "Cache-Control: max-age=60"],
            .doNotStore(.partialContent)),
        row("RFC9110 14.4 200 with Content-Range stored like any 200", ["Content-Range: bytes 0-9/100", "Cache-Control: max-age=60"],
            stored),
        row("RFC9111 5.2.1.5 request no-store", request: ["Cache-Control: no-store"], ["Cache-Control: max-age=60"],
            .doNotStore(.requestNoStore)),
        row("RFC9111 5.4 request Pragma: no-cache does not prevent storing", request: ["Pragma: no-cache"],
            ["Cache-Control: max-age=60"], stored),
        row("RFC9111 5.2.1.4 request no-cache does not prevent storing", request: ["Cache-Control: no-cache"],
            ["Cache-Control: max-age=60"], stored),
        row("RFC9111 5.2.2.5 response no-store", ["Cache-Control: no-store"], .doNotStore(.responseNoStore)),
        row("RFC9111 5.2.2.5 response no-store with max-age", ["Cache-Control: max-age=60, NO-STORE"],
            .doNotStore(.responseNoStore)),
        row("RFC9111 5.2.2.7 private", ["Cache-Control: private, max-age=60"], .doNotStore(.privateResponse)),
        row("RFC9111 5.2.2.7 private=\"f\": stored without the field",
            ["Cache-Control: private=\"Set-Cookie\", max-age=60", "Set-Cookie: a=b"],
            .store(tier: .allowed, omitFields: [wire("set-cookie")])),
        row("RFC9111 5.2.2.7 private=\"f1, f2\": stored without both",
            ["Cache-Control: max-age=60, private=\"Set-Cookie, X-User\""],
            .store(tier: .allowed, omitFields: [wire("set-cookie"), wire("x-user")])),
        row("RFC9111 5.2.2.4 no-cache=\"f\": stored without the field",
            ["Cache-Control: no-cache=\"X-Token\", max-age=60"], .store(tier: .allowed, omitFields: [wire("x-token")])),
        row("RFC9111 5.2.2.4 private and no-cache field lists merged without repeats",
            ["Cache-Control: private=\"A, b\", no-cache=\"B, c\""],
            .store(tier: .allowed, omitFields: [wire("a"), wire("b"), wire("c")])),
        row("RFC9111 5.2.2.4 unqualified no-cache is stored (revalidated on use)", ["Cache-Control: no-cache"], stored),
        row("RFC9111 3.5 Authorization without permission", request: ["Authorization: Basic eDp5"],
            ["Cache-Control: max-age=60"], .doNotStore(.authorization)),
        row("RFC9111 3.5 Authorization with public", request: ["Authorization: Basic eDp5"],
            ["Cache-Control: public, max-age=60"], stored),
        row("RFC9111 3.5 Authorization with s-maxage", request: ["Authorization: Basic eDp5"],
            ["Cache-Control: s-maxage=60"], stored),
        row("RFC9111 3.5 Authorization with must-revalidate", request: ["Authorization: Basic eDp5"],
            ["Cache-Control: must-revalidate, max-age=60"], stored),
        row("RFC9111 3.5 Authorization: proxy-revalidate is not enough", request: ["Authorization: Basic eDp5"],
            ["Cache-Control: proxy-revalidate, max-age=60"], .doNotStore(.authorization)),
        row("RFC9111 3.5 Authorization: no directives", request: ["Authorization: Bearer t"], [date],
            .doNotStore(.authorization)),
        row("RFC9111 3.5 Proxy-Authorization is not Authorization", request: ["Proxy-Authorization: Basic eDp5"],
            ["Cache-Control: max-age=60"], stored),
        row("RFC9111 3 302 with max-age", status: 302, ["Location: /x", "Cache-Control: max-age=60"], stored),
        row("RFC9111 3 302 with Expires", status: 302, [date, "Location: /x", "Expires: \(Dates.plus3600)"], stored),
        row("RFC9111 3 302 with s-maxage", status: 302, ["Location: /x", "Cache-Control: s-maxage=60"], stored),
        row("RFC9111 3 500 with public", status: 500, ["Cache-Control: public"], stored),
        row("RFC9111 3 302 without freshness", status: 302, ["Location: /x", "ETag: \"a\""], .doNotStore(.status)),
        row("RFC9111 3 302 max-age=0, no validator: never reusable", status: 302, ["Cache-Control: max-age=0"],
            .doNotStore(.noFreshnessOrValidator)),
        row("RFC9111 3 302 max-age=0 with ETag", status: 302, ["Cache-Control: max-age=0", "ETag: \"a\""], stored),
        row("RFC9111 3 302 max-age=0 with Last-Modified", status: 302,
            ["Cache-Control: max-age=0", "Last-Modified: \(Dates.minus1000)"], stored),
        row("RFC9111 3 503 Expires: 0, no validator", status: 503, ["Expires: 0"], .doNotStore(.noFreshnessOrValidator)),
        row("RFC9111 3 302 Expires before Date, no validator", status: 302, [date, "Expires: \(Dates.minus60)"],
            .doNotStore(.noFreshnessOrValidator)),
        row("RFC9111 3 302 conflicting max-age, no validator", status: 302, ["Cache-Control: max-age=1, max-age=2"],
            .doNotStore(.noFreshnessOrValidator)),
        row("RFC9111 3 200 with nothing is stored (heuristically cacheable)", [], stored),
        row("RFC9111 3 200 max-age=0 without validator still stored (heuristically cacheable)",
            ["Cache-Control: max-age=0"], stored),
        row("RFC9111 5.2.2.3 must-understand overrides no-store for 200",
            ["Cache-Control: must-understand, no-store, max-age=60"], stored),
        row("RFC9111 5.2.2.3 must-understand overrides no-store for understood 302",
            status: 302, ["Cache-Control: no-store, must-understand, max-age=60"], stored),
        row("RFC9111 5.2.2.3 must-understand overrides no-store for understood 307",
            status: 307, ["Cache-Control: no-store, must-understand, max-age=60"], stored),
        row("RFC9111 5.2.2.3 must-understand with an unknown status", status: 299,
            ["Cache-Control: must-understand, no-store, max-age=60"], .doNotStore(.mustUnderstand)),
        row("RFC9111 5.2.2.3 must-understand with 201", status: 201, ["Cache-Control: must-understand, max-age=60"],
            .doNotStore(.mustUnderstand)),
        row("RFC9111 5.2.2.3 must-understand with 500", status: 500, ["Cache-Control: must-understand, public"],
            .doNotStore(.mustUnderstand)),
        row("RFC9111 5.2.2.3 must-understand 302 still needs freshness", status: 302,
            ["Cache-Control: must-understand, no-store"], .doNotStore(.status)),
        row("RFC9111 5.2.2.3 must-understand does not override private",
            ["Cache-Control: must-understand, no-store, private"], .doNotStore(.privateResponse)),
        row("RFC9111 4.1 Vary: * never stored", ["Vary: *", "Cache-Control: max-age=60"], .doNotStore(.varyStar)),
        row("RFC9111 4.1 Vary with * among names", ["Vary: Accept, *", "Cache-Control: max-age=60"], .doNotStore(.varyStar)),
        row("RFC9111 4.1 Vary with names stored", ["Vary: Accept-Encoding", "Cache-Control: max-age=60"], stored),
        row("storage policy notAllowed", ["Cache-Control: max-age=60"], policy: .notAllowed, .doNotStore(.storagePolicy)),
        row("storage policy allowedInMemoryOnly", ["Cache-Control: max-age=60"], policy: .allowedInMemoryOnly,
            .store(tier: .allowedInMemoryOnly, omitFields: [])),
        row("storage policy memory-only keeps omitted fields", ["Cache-Control: private=\"x\""],
            policy: .allowedInMemoryOnly, .store(tier: .allowedInMemoryOnly, omitFields: [wire("x")])),
        row("RFC9111 3 order: method before no-store", method: "HEAD", ["Cache-Control: no-store"], .doNotStore(.method)),
        row("RFC9111 3 order: no-store before storage policy", ["Cache-Control: no-store"], policy: .notAllowed,
            .doNotStore(.responseNoStore)),
    ] + heuristicStatuses.map {
        row("RFC9110 15.1 status \($0) heuristically cacheable: stored", status: $0, [date], stored)
    } + otherStatuses.map {
        row("RFC9110 15.1 status \($0) without explicit freshness: not stored", status: $0, [date], .doNotStore(.status))
    } + otherStatuses.map {
        row("RFC9111 3 status \($0) with max-age: stored", status: $0, [date, "Cache-Control: max-age=60"], stored)
    }
}

@Suite("Storability")
struct StorabilityTests {
    @Test("decide", arguments: StoreTable.rows)
    func decide(_ row: StoreRow) {
        let req = request(row.requestFields, method: row.method)
        let res = response(row.responseFields, status: row.status, method: req.method)
        #expect(Storability.decide(request: req, response: res, storagePolicy: row.storagePolicy,
                                   settings: PolicySettings()) == row.expected)
    }

    @Test("RFC9110 15.1 heuristically cacheable statuses, exactly", arguments: Array(100...599))
    func heuristicallyCacheable(_ status: Int) {
        let expected = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501].contains(status)
        #expect(Storability.isHeuristicallyCacheable(status) == expected)
    }

    /// The head-level question skips parsing the directives when neither word is there; it must
    /// answer exactly as parsing does.
    @Test("RFC9111 5.2.2.4, 5.2.2.7 qualified fields of a head", arguments: [
        (["Cache-Control: max-age=0"], [String]()),
        (["Cache-Control: private=\"Set-Cookie\""], ["set-cookie"]),
        (["Cache-Control: PRIVATE = \"X-A, x-b\", max-age=5"], ["x-a", "x-b"]),
        (["cache-control: No-Cache=\"X-Token\""], ["x-token"]),
        (["Cache-Control: public", "Cache-Control: no-cache=a, private=b"], ["b", "a"]),
        (["Cache-Control: private, no-cache"], []),
        (["X-Note: private=\"x\"", "Cache-Control: max-age=60"], []),
        (["Cache-Control: max-age=60, privat=\"x\""], []),
        ([String](), []),
    ] as [([String], [String])])
    func qualifiedFieldsOfAHead(_ fields: [String], _ expected: [String]) {
        let head = response(fields)
        #expect(Storability.qualifiedFields(of: head.headers) == expected.map { Array($0.utf8) })
        #expect(Storability.qualifiedFields(of: head.headers)
                == Storability.qualifiedFields(CacheDirectives.parse(head.headers, isRequest: false)))
    }
}
