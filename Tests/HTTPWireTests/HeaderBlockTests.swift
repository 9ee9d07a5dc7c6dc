import Testing
@testable import HTTPWire

struct HopRow: Sendable, CustomTestStringConvertible {
    var name: String
    var field: String
    var hopByHop: Bool
    var testDescription: String { name }
}

enum HopTable {
    /// One request carrying every kind of field; rows look fields up by name.
    static let request = "GET / HTTP/1.1\r\nHost: a\r\n"
        + "Connection: keep-alive, X-Listed ,x-second\r\nconnection: X-Third\r\n"
        + "Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nProxy-Authenticate: Basic\r\n"
        + "Proxy-Authorization: Basic eA==\r\nTE: trailers\r\nTrailer: Expires\r\nTransfer-Encoding: chunked\r\n"
        + "Upgrade: websocket\r\nX-Listed: 1\r\nX-Second: 2\r\nx-third: 3\r\nX-Listed-Not: 4\r\nAccept: */*\r\n"
        + "Content-Type: text/plain\r\nAuthorization: Basic eA==\r\nTEE: x\r\nExpires: 0\r\n\r\n"

    static let rows: [HopRow] = [
        HopRow(name: "RFC 9110 §7.6.1 Connection", field: "Connection", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 connection (second field, lowercase)", field: "connection", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 Keep-Alive", field: "Keep-Alive", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 Proxy-Connection", field: "Proxy-Connection", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 Proxy-Authenticate", field: "Proxy-Authenticate", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 Proxy-Authorization", field: "Proxy-Authorization", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 TE", field: "TE", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 Trailer", field: "Trailer", hopByHop: true),
        HopRow(name: "RFC 9112 §6.1 Transfer-Encoding", field: "Transfer-Encoding", hopByHop: true),
        HopRow(name: "RFC 9110 §7.8 Upgrade", field: "Upgrade", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 listed in Connection (with OWS)", field: "X-Listed", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 listed in Connection, other case", field: "X-Second", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 listed in a second Connection field", field: "x-third", hopByHop: true),
        HopRow(name: "RFC 9110 §7.6.1 prefix of a listed name is end-to-end", field: "X-Listed-Not", hopByHop: false),
        HopRow(name: "end-to-end Host", field: "Host", hopByHop: false),
        HopRow(name: "end-to-end Accept", field: "Accept", hopByHop: false),
        HopRow(name: "end-to-end Content-Type", field: "Content-Type", hopByHop: false),
        HopRow(name: "end-to-end Authorization", field: "Authorization", hopByHop: false),
        HopRow(name: "end-to-end TEE (not TE)", field: "TEE", hopByHop: false),
        HopRow(name: "end-to-end Expires (named in Trailer, not Connection)", field: "Expires", hopByHop: false),
    ]

    static func parsed() -> RequestHead {
        var head = RequestHead()
        _ = parseRequest(wire(request), into: &head)
        return head
    }
}

@Suite("HeaderBlock")
struct HeaderBlockTests {
    @Test("hop-by-hop", arguments: HopTable.rows)
    func hopByHop(_ row: HopRow) throws {
        let head = HopTable.parsed()
        let headers = head.headers
        let index = try #require((0..<headers.count).first { headers.nameString(at: $0) == row.field })
        #expect(headers.isHopByHop(at: index) == row.hopByHop)
    }

    @Test("Smuggling: Connection never makes Host or Content-Length hop-by-hop",
          arguments: ["Content-Length", "content-length, Host", "HOST", "close, Content-Length, X-A"])
    func framingNeverNominated(_ listed: String) throws {
        var head = RequestHead()
        _ = parseRequest(wire("POST / HTTP/1.1\r\nHost: a\r\nConnection: \(listed)\r\nContent-Length: 3\r\nX-A: 1\r\n\r\n"),
                         into: &head)
        let headers = head.headers
        for name in ["Host", "Content-Length"] {
            let index = try #require((0..<headers.count).first { headers.nameString(at: $0) == name })
            #expect(!headers.isHopByHop(at: index), "\(name) with Connection: \(listed)")
        }
    }

    @Test("Fields named in Connection are removed before the request is read; the ones the proxy reads stay")
    func nominatedFieldsRemoved() {
        var head = RequestHead()
        _ = parseRequest(wire("GET / HTTP/1.1\r\nHost: a\r\nConnection: Cache-Control, Expect, Content-Length, Upgrade\r\n"
                              + "Cache-Control: no-cache\r\nExpect: 100-continue\r\nUpgrade: websocket\r\n"
                              + "Content-Length: 0\r\nAccept: */*\r\n\r\n"), into: &head)
        #expect(head.expectsContinue)
        head.removeFieldsNominatedByConnection()
        let names = (0..<head.headers.count).map { head.headers.nameString(at: $0) }
        #expect(names == ["Host", "Connection", "Upgrade", "Content-Length", "Accept"])
        #expect(!head.expectsContinue)
    }

    @Test("Only an upgrade to WebSocket alone is relayed (h2c smuggling)",
          arguments: [("websocket", true), ("WebSocket", true), ("h2c", false), ("websocket, h2c", false),
                      ("h2c, websocket", false), ("websocket/13", false)])
    func upgradesToWebSocket(_ upgrade: String, _ relayed: Bool) {
        var head = RequestHead()
        _ = parseRequest(wire("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: \(upgrade)\r\n\r\n"), into: &head)
        #expect(head.upgradeRequested)
        #expect(head.upgradesToWebSocket == relayed)
    }

    @Test("hop-by-hop with the Connection field read once", arguments: HopTable.rows)
    func hopByHopWithConnectionReadOnce(_ row: HopRow) throws {
        let headers = HopTable.parsed().headers
        #expect(headers.connectionListsOtherFields)
        let index = try #require((0..<headers.count).first { headers.nameString(at: $0) == row.field })
        #expect(headers.isHopByHop(at: index, connectionListsOtherFields: headers.connectionListsOtherFields)
                == row.hopByHop)
    }

    @Test("a Connection field listing only close, keep-alive or hop-by-hop names names no other field",
          arguments: [("keep-alive", false), ("close", false), ("Keep-Alive, Upgrade", false), ("TE, trailer", false),
                      ("", false), ("close, X-Custom", true), ("x-custom", true)])
    func connectionListsOtherFields(_ value: String, _ expected: Bool) {
        var head = RequestHead()
        _ = parseRequest(wire("GET / HTTP/1.1\r\nHost: a\r\nConnection: \(value)\r\nX-Custom: 1\r\n\r\n"), into: &head)
        #expect(head.headers.connectionListsOtherFields == expected)
        let custom = head.headers.count - 1
        #expect(head.headers.isHopByHop(at: custom) == expected)
    }

    @Test("the hop-by-hop request parses")
    func parses() {
        var head = RequestHead()
        #expect(parseRequest(wire(HopTable.request), into: &head) == .success(HopTable.request.utf8.count))
        #expect(head.framing == .chunked)
    }

    @Test("name lookups are case-insensitive")
    func lookups() {
        let headers = HopTable.parsed().headers
        #expect(headers.firstIndex(of: "host") == 0)
        #expect(headers.firstIndex(of: "HOST") == 0)
        #expect(headers.firstIndex(of: "connection") == 1)
        #expect(headers.firstIndex(of: "x-missing") == nil)
        #expect(headers.nameEquals(at: 0, "hOsT"))
        #expect(!headers.nameEquals(at: 0, "hos"))
        #expect(!headers.nameEquals(at: 0, "hosts"))
        #expect(headers.value(of: "trailer") == "Expires")
        #expect(headers.value(of: "Content-type") == "text/plain")
    }

    @Test("containsToken")
    func tokens() {
        let headers = HopTable.parsed().headers
        #expect(headers.containsToken("keep-alive", inFieldsNamed: "connection"))
        #expect(headers.containsToken("KEEP-ALIVE", inFieldsNamed: "Connection"))
        #expect(headers.containsToken("x-listed", inFieldsNamed: "connection"))
        #expect(headers.containsToken("x-second", inFieldsNamed: "connection"))
        #expect(headers.containsToken("x-third", inFieldsNamed: "connection"))
        #expect(!headers.containsToken("x-list", inFieldsNamed: "connection"))
        #expect(!headers.containsToken("close", inFieldsNamed: "connection"))
        #expect(headers.containsToken("chunked", inFieldsNamed: "transfer-encoding"))
        #expect(!headers.containsToken("keep-alive", inFieldsNamed: "x-missing"))
        #expect(!headers.containsToken("timeout", inFieldsNamed: "keep-alive"))
        #expect(headers.containsToken("timeout=5", inFieldsNamed: "keep-alive"))
    }

    @Test("empty block")
    func empty() {
        let headers = HeaderBlock()
        #expect(headers.count == 0)
        #expect(headers.firstIndex(of: "host") == nil)
        #expect(!headers.containsToken("close", inFieldsNamed: "connection"))
        #expect(headers.value(of: "host") == nil)
        #expect(headers.withBytes(.empty) { $0.count } == 0)
    }

    @Test("tchar table matches RFC 9110 §5.6.2 for every byte")
    func tcharTable() {
        let punctuation = Array("!#$%&'*+-.^_`|~".utf8)
        for b in 0...255 {
            let byte = UInt8(b)
            let expected = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                || (byte >= 0x61 && byte <= 0x7A) || punctuation.contains(byte)
            #expect(isTchar(byte) == expected, "byte \(b)")
        }
    }
}
