import Testing
import HTTPWire
import CachePolicy

struct ConditionalFieldsRow: Sendable, CustomTestStringConvertible {
    var name: String
    var stored: [String]
    var expected: String
    var testDescription: String { name }
}

struct OutcomeRow: Sendable, CustomTestStringConvertible {
    var name: String
    var stored: [String]
    var method: RevalidationMethod
    var status: Int
    var update: [String]
    var expected: RevalidationOutcome
    var testDescription: String { name }
}

struct HeadRow: Sendable, CustomTestStringConvertible {
    var name: String
    /// Raw stored (or received) head.
    var head: String
    /// Raw update head (freshening rows only).
    var update: String?
    var omitFields: [String]
    var bodyLength: Int
    var expected: String
    var testDescription: String { name }
}

enum ConditionalFieldsTable {
    static let rows: [ConditionalFieldsRow] = [
        ConditionalFieldsRow(name: "RFC9111 4.3.1 ETag: If-None-Match", stored: ["ETag: \"v1\""],
                             expected: "If-None-Match: \"v1\"\r\n"),
        ConditionalFieldsRow(name: "RFC9111 4.3.1 weak ETag sent as stored", stored: ["ETag: W/\"v1\""],
                             expected: "If-None-Match: W/\"v1\"\r\n"),
        ConditionalFieldsRow(name: "RFC9111 4.3.1 Last-Modified: If-Modified-Since",
                             stored: ["Last-Modified: \(Dates.minus1000)"],
                             expected: "If-Modified-Since: \(Dates.minus1000)\r\n"),
        ConditionalFieldsRow(name: "RFC9111 4.3.1 both validators", stored: ["Last-Modified: \(Dates.minus1000)", "ETag: \"v1\""],
                             expected: "If-None-Match: \"v1\"\r\nIf-Modified-Since: \(Dates.minus1000)\r\n"),
        ConditionalFieldsRow(name: "RFC9110 5.6.7 obsolete Last-Modified sent as IMF-fixdate",
                             stored: ["Last-Modified: Sunday, 06-Nov-94 08:49:37 GMT"],
                             expected: "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n"),
        ConditionalFieldsRow(name: "RFC9111 4.3.1 no validators: nothing", stored: ["Cache-Control: max-age=1"], expected: ""),
        ConditionalFieldsRow(name: "RFC9111 4.3.1 invalid Last-Modified: nothing", stored: ["Last-Modified: yesterday"],
                             expected: ""),
    ]
}

enum OutcomeTable {
    static func row(_ name: String, _ stored: [String], method: RevalidationMethod = .head, status: Int = 200,
                    _ update: [String], _ expected: RevalidationOutcome) -> OutcomeRow {
        OutcomeRow(name: name, stored: stored, method: method, status: status, update: update, expected: expected)
    }

    static let lm = "Last-Modified: \(Dates.minus1000)"
    static let strong = ["ETag: \"v1\"", lm, "Content-Length: 100"]

    static let rows: [OutcomeRow] = [
        row("RFC9111 4.3.4 304 to HEAD: unchanged", strong, status: 304, ["ETag: \"v1\""], .unchanged),
        row("RFC9111 4.3.4 304 to conditional GET: unchanged", strong, method: .conditionalGet, status: 304, [], .unchanged),
        row("RFC9111 4.3.4 304 even without validators", ["Cache-Control: max-age=1"], status: 304, [], .unchanged),
        row("RFC9111 4.3.1 200 to conditional GET: changed (it is the new response)", strong, method: .conditionalGet,
            ["ETag: \"v1\"", lm, "Content-Length: 100"], .changed),
        row("RFC9111 4.3.1 206 to conditional GET: changed", strong, method: .conditionalGet, status: 206,
            ["ETag: \"v1\"", "Content-Range: bytes 0-1/100"], .changed),
        row("RFC9111 4.3.5 HEAD strong ETag equal: unchanged", strong, ["ETag: \"v1\"", "Content-Length: 100"], .unchanged),
        row("RFC9111 4.3.5 HEAD strong ETag equal, Content-Length different: changed", strong,
            ["ETag: \"v1\"", "Content-Length: 5"], .changed),
        row("RFC9111 4.3.5 HEAD strong ETag equal, Last-Modified different: the ETag decides", strong,
            ["ETag: \"v1\"", "Last-Modified: \(Dates.t0)"], .unchanged),
        row("RFC9111 4.3.5 HEAD strong ETag different: changed", strong, ["ETag: \"v2\"", lm, "Content-Length: 100"],
            .changed),
        row("RFC9111 4.3.5 HEAD ETag differs only in case: changed", strong, ["ETag: \"V1\"", lm], .changed),
        row("RFC9111 4.3.5 HEAD weak ETags never equal: no Last-Modified, changed", ["ETag: W/\"v1\""],
            ["ETag: W/\"v1\""], .changed),
        row("RFC9111 4.3.5 HEAD weak ETags same, Last-Modified and length equal: unchanged",
            ["ETag: W/\"v1\"", lm, "Content-Length: 100"], ["ETag: W/\"v1\"", lm, "Content-Length: 100"], .unchanged),
        row("RFC9111 4.3.5 HEAD weak stored, strong received, same tag: Last-Modified decides",
            ["ETag: W/\"v1\"", lm], ["ETag: \"v1\"", "Last-Modified: \(Dates.t0)"], .changed),
        row("RFC9111 4.3.5 HEAD weak ETags different: changed", ["ETag: W/\"v1\"", lm], ["ETag: W/\"v2\"", lm], .changed),
        row("RFC9111 4.3.5 HEAD without ETag, Last-Modified and length equal: unchanged", strong,
            [lm, "Content-Length: 100"], .unchanged),
        row("RFC9111 4.3.5 HEAD Last-Modified in another date form, same instant: unchanged",
            [lm], ["Last-Modified: Tue Nov 14 21:56:40 2023"], .unchanged),
        row("RFC9111 4.3.5 HEAD Last-Modified different: changed", [lm], ["Last-Modified: \(Dates.t0)"], .changed),
        row("RFC9111 4.3.5 HEAD Last-Modified equal, Content-Length different: changed", strong,
            [lm, "Content-Length: 101"], .changed),
        row("RFC9111 4.3.5 HEAD Last-Modified equal, no Content-Length received: unchanged", strong, [lm], .unchanged),
        row("RFC9111 4.3.5 HEAD Last-Modified equal, none stored: unchanged", [lm], [lm, "Content-Length: 7"], .unchanged),
        row("RFC9111 4.3.5 HEAD without Last-Modified: changed", strong, ["Content-Length: 100"], .changed),
        row("RFC9111 4.3.5 HEAD, stored had no validators: changed", ["Content-Length: 100"], [lm, "Content-Length: 100"],
            .changed),
        row("RFC9111 4.3.5 HEAD, neither has validators nor a length: unchanged", [], [], .unchanged),
        row("RFC9111 4.3.5 HEAD, neither has validators, the answer has no length: unchanged", ["Content-Length: 100"], [],
            .unchanged),
        row("RFC9111 4.3.5 HEAD, no validators, another Content-Language: changed", ["Content-Language: de"],
            ["Content-Language: en"], .changed),
        row("RFC9111 4.3.5 HEAD strong ETag equal, another Content-Type: changed (no relabelling)",
            strong + ["Content-Type: application/json"], ["ETag: \"v1\"", "Content-Type: text/html"], .changed),
        row("RFC9111 4.3.5 HEAD, no validators, another Content-Type: changed", ["Content-Length: 9", "Content-Type: text/plain"],
            ["Content-Length: 9", "Content-Type: text/html"], .changed),
        row("RFC9111 4.3.5 HEAD, the same Content-Type in other case and spacing: unchanged",
            strong + ["Content-Type: Text/HTML"], ["ETag: \"v1\"", "Content-Type:  text/html "], .unchanged),
        row("RFC9111 4.3.5 HEAD, a Content-Encoding the stored response lacks: changed", strong,
            ["ETag: \"v1\"", "Content-Encoding: gzip"], .changed),
        row("RFC9111 4.3.5 HEAD without Content-Type: unchanged (the stored one is kept)",
            strong + ["Content-Type: text/plain"], ["ETag: \"v1\""], .unchanged),
        row("RFC9111 4.3.5 HEAD, a Content-Length list of one length: unchanged", ["Content-Length: 100"],
            ["Content-Length: 100, 100"], .unchanged),
        row("RFC9111 4.3.5 HEAD, a Content-Length list of another length: changed", ["Content-Length: 6"],
            ["Content-Length: 99, 99"], .changed),
        row("RFC9111 4.3.5 HEAD, neither has validators, Content-Length equal: unchanged", ["Content-Length: 100"],
            ["Content-Length: 100", "Cache-Control: max-age=9"], .unchanged),
        row("RFC9111 4.3.5 HEAD, neither has validators, Content-Length different: changed", ["Content-Length: 100"],
            ["Content-Length: 99"], .changed),
        row("RFC9111 4.3.5 HEAD, stored had no validators, an ETag received: changed", ["Content-Length: 100"],
            ["ETag: \"v1\"", "Content-Length: 100"], .changed),
        row("RFC9111 4.3.5 HEAD, neither has validators, 410: changed", [], status: 410, [], .changed),
        row("RFC9111 4.3.5 HEAD without validators, stored weak ETag only: changed", ["ETag: W/\"v1\""], [], .changed),
        row("RFC9111 4.3.5 HEAD invalid Last-Modified received: changed", [lm], ["Last-Modified: 0"], .changed),
        row("RFC9111 4.3.5 HEAD 204 with equal strong ETag: changed (only a 200 updates)", strong, status: 204,
            ["ETag: \"v1\""], .changed),
        row("RFC9111 4.3.5 HEAD 404: changed", strong, status: 404, ["ETag: \"v1\""], .changed),
        row("RFC9111 4.3.5 HEAD 301: changed", strong, status: 301, ["ETag: \"v1\"", "Location: /x"], .changed),
        row("RFC9111 4.3.5 HEAD 500: changed", strong, status: 500, ["ETag: \"v1\""], .changed),
        row("RFC9111 4.3.5 HEAD 412: changed", strong, status: 412, [], .changed),
    ]
}

enum FreshenTable {
    static let storedHead = "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\nCache-Control: max-age=60\r\nETag: \"x\"\r\n"
        + "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n"

    static func row(_ name: String, stored: String = storedHead, _ update: String, omit: [String] = [],
                    _ expected: String) -> HeadRow {
        HeadRow(name: name, head: stored, update: update, omitFields: omit, bodyLength: 0, expected: expected)
    }

    static let rows: [HeadRow] = [
        // Names told apart by their signature (length, first and last byte) or, when those agree,
        // by their bytes eight at a time and the rest one by one, in any case.
        row("names alike at both ends and in length are still different names",
            stored: "HTTP/1.1 200 OK\r\nX-Custom-Header-Aaa-Z: 1\r\nX-Aa-Custom-Name-Z: 1\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\nX-Custom-Header-Bbb-Z: 2\r\nX-Bb-Custom-Name-Z: 2\r\n"
                + "x-custom-header-AAA-z: 3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nx-custom-header-AAA-z: 3\r\nX-Aa-Custom-Name-Z: 1\r\nContent-Length: 5\r\n"
                + "X-Custom-Header-Bbb-Z: 2\r\nX-Bb-Custom-Name-Z: 2\r\n\r\n"),
        row("RFC9111 3.2 304 replaces the fields it carries, in place",
            "HTTP/1.1 304 Not Modified\r\nDate: \(Dates.plus60)\r\nCache-Control: max-age=120\r\nETag: \"x\"\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.plus60)\r\nCache-Control: max-age=120\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 3.2 fields new to the stored head are appended",
            "HTTP/1.1 304 Not Modified\r\nX-New: 1\r\nExpires: \(Dates.plus3600)\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\nCache-Control: max-age=60\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\nX-New: 1\r\nExpires: \(Dates.plus3600)\r\n\r\n"),
        row("RFC9111 3.2 Content-Length of the update is not applied",
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nDate: \(Dates.plus60)\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.plus60)\r\nCache-Control: max-age=60\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 3.1 hop-by-hop fields of the update are not applied",
            "HTTP/1.1 304 Not Modified\r\nConnection: close, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\n"
                + "Transfer-Encoding: chunked\r\nProxy-Connection: close\r\nX-End: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\nCache-Control: max-age=60\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\nX-End: 2\r\n\r\n"),
        row("RFC9111 3.1 Set-Cookie of the update is never stored (one client's, not everyone's)",
            "HTTP/1.1 304 Not Modified\r\nSet-Cookie: s=1\r\nset-cookie2: t=2\r\nX-End: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\nCache-Control: max-age=60\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\nX-End: 2\r\n\r\n"),
        row("RFC9111 3.2: Content-Encoding describes the stored bytes, an update cannot relabel them",
            "HTTP/1.1 304 Not Modified\r\nContent-Encoding: gzip\r\nX-End: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\nCache-Control: max-age=60\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\nX-End: 2\r\n\r\n"),
        row("RFC9111 3.2 Content-Range of the update is not applied",
            "HTTP/1.1 304 Not Modified\r\nContent-Range: bytes 0-1/5\r\n\r\n",
            storedHead),
        row("RFC9111 5.1 Age of the update is not kept",
            "HTTP/1.1 304 Not Modified\r\nAge: 30\r\nCache-Control: max-age=90\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\nCache-Control: max-age=90\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 5.1 Age of the stored head is not kept",
            stored: "HTTP/1.1 200 OK\r\nAge: 10\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
            "HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 3.1 hop-by-hop fields of the stored head dropped",
            stored: "HTTP/1.1 200 OK\r\nConnection: X-Old\r\nX-Old: 1\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\n\r\n",
            "HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 3.2 several update values of a name replace one stored value",
            stored: "HTTP/1.1 200 OK\r\nLink: <a>\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\nLink: <b>\r\nX-Mid: 1\r\nLink: <c>\r\n\r\n",
            "HTTP/1.1 200 OK\r\nLink: <b>\r\nLink: <c>\r\nETag: \"x\"\r\nContent-Length: 5\r\nX-Mid: 1\r\n\r\n"),
        row("RFC9111 3.2 one update value replaces several stored values",
            stored: "HTTP/1.1 200 OK\r\nLink: <a>\r\nETag: \"x\"\r\nLink: <b>\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\nLink: <c>\r\n\r\n",
            "HTTP/1.1 200 OK\r\nLink: <c>\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 3.2 names match case-insensitively; the update's spelling is kept",
            "HTTP/1.1 304 Not Modified\r\ncache-control: max-age=5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\ncache-control: max-age=5\r\nETag: \"x\"\r\n"
                + "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 5.2.2.7 omitted fields left out from both heads",
            stored: "HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\nset-cookie: a=2\r\nX-User: u\r\nETag: \"x\"\r\n\r\n", omit: ["set-cookie", "x-user"],
            "HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 4.3.5 HEAD 200 freshens too (status line stays the stored one)",
            stored: "HTTP/1.1 203 Non-Authoritative Information\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nETag: \"x\"\r\nContent-Length: 5\r\nCache-Control: max-age=9\r\n\r\n",
            "HTTP/1.1 203 Non-Authoritative Information\r\nETag: \"x\"\r\nContent-Length: 5\r\nCache-Control: max-age=9\r\n\r\n"),
        row("RFC9110 2.5 stored HTTP/1.0 status line written as HTTP/1.1",
            stored: "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9112 4 empty reason phrase kept empty",
            stored: "HTTP/1.1 200 \r\nContent-Length: 5\r\n\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n",
            "HTTP/1.1 200 \r\nContent-Length: 5\r\n\r\n"),
    ]
}

enum StoredHeadTable {
    static func row(_ name: String, _ head: String, bodyLength: Int = 5, omit: [String] = [], _ expected: String) -> HeadRow {
        HeadRow(name: name, head: head, update: nil, omitFields: omit, bodyLength: bodyLength, expected: expected)
    }

    static let rows: [HeadRow] = [
        row("RFC9111 3.1 end-to-end fields kept in order, Content-Length rewritten",
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nETag: \"x\"\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9112 6.1 chunked body stored with its length",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: max-age=60\r\n\r\n", bodyLength: 1234,
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 1234\r\n\r\n"),
        row("RFC9112 6.3 close-delimited body stored with its length",
            "HTTP/1.0 200 OK\r\nServer: x\r\n\r\n", bodyLength: 3,
            "HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 3\r\n\r\n"),
        row("RFC9111 3.1 Connection and the fields it names dropped",
            "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Trace\r\nX-Trace: 7\r\nKeep-Alive: timeout=5\r\nVia: 1.1 a\r\n"
                + "Content-Length: 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nVia: 1.1 a\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9110 7.6.1 other hop-by-hop fields dropped",
            "HTTP/1.1 200 OK\r\nProxy-Connection: keep-alive\r\nTrailer: X-Sum\r\nUpgrade: h2c\r\n"
                + "Proxy-Authenticate: Basic\r\nTE: trailers\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 5.1 Age dropped (written per response)",
            "HTTP/1.1 200 OK\r\nAge: 30\r\nDate: \(Dates.t0)\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nDate: \(Dates.t0)\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9111 5.2.2.7 omitFields dropped, any case",
            "HTTP/1.1 200 OK\r\nSET-COOKIE: a=1\r\nSet-Cookie: b=2\r\nX-Keep: 1\r\nContent-Length: 5\r\n\r\n",
            omit: ["set-cookie"], "HTTP/1.1 200 OK\r\nX-Keep: 1\r\nContent-Length: 5\r\n\r\n"),
        row("RFC9110 8.6 204 gets no Content-Length", "HTTP/1.1 204 No Content\r\nETag: \"e\"\r\n\r\n", bodyLength: 0,
            "HTTP/1.1 204 No Content\r\nETag: \"e\"\r\n\r\n"),
        row("RFC9110 8.6 empty 200 gets Content-Length: 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", bodyLength: 0,
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        row("RFC9110 15.4.2 reason phrase and status kept", "HTTP/1.1 301 Gone Elsewhere\r\nLocation: /b\r\n\r\n",
            bodyLength: 0, "HTTP/1.1 301 Gone Elsewhere\r\nLocation: /b\r\nContent-Length: 0\r\n\r\n"),
        row("RFC9110 5.5 field values kept byte-exact",
            "HTTP/1.1 200 OK\r\nX-Odd:   spaced  value\t\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-Odd: spaced  value\r\nContent-Length: 5\r\n\r\n"),
    ]
}

@Suite("Revalidation")
struct RevalidationTests {
    @Test("RFC5861 3 which stale-while-revalidate hits start a background refresh", arguments: [
        ("GET", [String](), true),
        ("GET", ["Cache-Control: max-stale=5", "Accept-Encoding: gzip"], true),
        ("HEAD", [], false),
        ("GET", ["Cache-Control: no-store"], false),
        ("GET", ["Authorization: Bearer x"], false),
    ] as [(String, [String], Bool)])
    func backgroundRefresh(_ method: String, _ fields: [String], _ expected: Bool) throws {
        let facts = try RequestFacts.make(request(fields, method: method), rulePolicy: nil, settings: PolicySettings())
        #expect(Revalidation.mayRefreshInBackground(for: facts) == expected)
    }

    @Test("conditional fields", arguments: ConditionalFieldsTable.rows)
    func conditionalFields(_ row: ConditionalFieldsRow) {
        #expect(text(Revalidation.conditionalFields(for: entry(row.stored))) == row.expected)
    }

    @Test("outcome", arguments: OutcomeTable.rows)
    func outcome(_ row: OutcomeRow) {
        let stored = entry(row.stored)
        let method: HTTPMethod = row.method == .head ? .head : .get
        let update = response(row.update, status: row.status, method: method)
        let storedHead = response(row.stored, status: 200, method: .get)
        #expect(Revalidation.outcome(entry: stored, response: update, method: row.method, storedHead: storedHead)
                == row.expected)
    }

    @Test("freshened head", arguments: FreshenTable.rows)
    func freshened(_ row: HeadRow) {
        let stored = parseResponse(row.head)
        let update = parseResponse(row.update ?? "", method: .head)
        let head = Revalidation.freshenedHead(stored: stored, update: update, omitFields: row.omitFields.map(wire))
        #expect(text(head) == row.expected)
    }

    @Test("stored head", arguments: StoredHeadTable.rows)
    func storedHead(_ row: HeadRow) {
        let received = parseResponse(row.head)
        let head = StoredHead.make(response: received, bodyLength: row.bodyLength, omitFields: row.omitFields.map(wire))
        #expect(text(head) == row.expected)
        // What is stored must parse again, framed by its own Content-Length.
        let again = parseResponse(text(head))
        #expect(again.framing == (received.status == 204 ? .none : .contentLength(row.bodyLength)))
    }
}
