import Testing
import HTTPWire

typealias PP = ProxyProtocolHeader

struct ProxyHeaderRow: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    /// `needMore`, `parsed` or part of the refusal's reason.
    var expected: Expected

    enum Expected: Sendable {
        case needMore
        case parsed(source: String?, destination: String?, length: Int)
        case invalid(String)
    }

    var testDescription: String { name }
}

/// A v2 header: signature, version 2 and `command`, `familyProtocol`, then `payload` (its length
/// is announced as `announced`, or the payload's own).
func version2(command: UInt8 = 1, familyProtocol: UInt8 = 0x11, payload: [UInt8], announced: Int? = nil) -> [UInt8] {
    let n = announced ?? payload.count
    return [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A, 0x20 | command, familyProtocol,
            UInt8(n >> 8), UInt8(n & 0xFF)] + payload
}

let v4Payload: [UInt8] = [10, 1, 2, 3, 192, 168, 0, 1, 0xC8, 0x22, 0x0C, 0x38]  // 10.1.2.3:51234 → 192.168.0.1:3128
let v6Payload: [UInt8] = [0x20, 0x01, 0x0D, 0xB8] + Array(repeating: 0, count: 11) + [1]
    + [0xFD, 0] + Array(repeating: 0, count: 13) + [2] + [0x04, 0xD2, 0x0C, 0x38]  // [2001:db8::1]:1234 → [fd00::2]:3128

enum ProxyHeaderTable {
    static func ok(_ name: String, _ bytes: [UInt8], _ source: String?, _ destination: String?, _ length: Int) -> ProxyHeaderRow {
        ProxyHeaderRow(name: name, bytes: bytes, expected: .parsed(source: source, destination: destination, length: length))
    }
    static func more(_ name: String, _ bytes: [UInt8]) -> ProxyHeaderRow {
        ProxyHeaderRow(name: name, bytes: bytes, expected: .needMore)
    }
    static func bad(_ name: String, _ bytes: [UInt8], _ reason: String) -> ProxyHeaderRow {
        ProxyHeaderRow(name: name, bytes: bytes, expected: .invalid(reason))
    }
    static func text(_ s: String) -> [UInt8] { Array(s.utf8) }

    static let v1Line = "PROXY TCP4 10.1.2.3 192.168.0.1 51234 3128\r\n"

    static let rows: [ProxyHeaderRow] = [
        // Version 1.
        ok("v1 TCP4", text(v1Line), "10.1.2.3:51234", "192.168.0.1:3128", v1Line.utf8.count),
        ok("v1 TCP4 with the request after it", text(v1Line + "GET / HTTP/1.1\r\n\r\n"),
           "10.1.2.3:51234", "192.168.0.1:3128", v1Line.utf8.count),
        ok("v1 TCP6", text("PROXY TCP6 2001:db8::1 fd00::2 1234 3128\r\n"), "[2001:db8:0:0:0:0:0:1]:1234",
           "[fd00:0:0:0:0:0:0:2]:3128", 42),
        ok("v1 TCP6 with an IPv4 tail", text("PROXY TCP6 ::ffff:10.1.2.3 ::1 1 2\r\n"), "[0:0:0:0:0:ffff:a01:203]:1",
           "[0:0:0:0:0:0:0:1]:2", 36),
        ok("v1 UNKNOWN", text("PROXY UNKNOWN\r\n"), nil, nil, 15),
        ok("v1 UNKNOWN ignores the rest", text("PROXY UNKNOWN whatever  goes here\r\n"), nil, nil, 35),
        ok("v1 ports 0 and 65535", text("PROXY TCP4 1.2.3.4 5.6.7.8 0 65535\r\n"), "1.2.3.4:0", "5.6.7.8:65535", 36),
        ok("v1 of exactly 107 bytes", text("PROXY UNKNOWN " + String(repeating: "x", count: 91) + "\r\n"), nil, nil, 107),
        more("nothing yet", []),
        more("one byte of v1", text("P")),
        more("v1 cut before the CR", text("PROXY TCP4 10.1.2.3 192.168.0.1 51234 3128")),
        more("v1 cut between CR and LF", text("PROXY TCP4 10.1.2.3 192.168.0.1 51234 3128\r")),
        bad("an HTTP request instead", text("GET / HTTP/1.1\r\n\r\n"), "no PROXY protocol header"),
        bad("PUT shares a first letter", text("PUT / HTTP/1.1\r\n"), "no PROXY protocol header"),
        bad("PROPFIND shares three", text("PROPFIND / HTTP/1.1\r\n"), "no PROXY protocol header"),
        bad("lower-case proxy", text("proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), "no PROXY protocol header"),
        bad("a TLS ClientHello", [0x16, 0x03, 0x01, 0x02, 0x00], "no PROXY protocol header"),
        bad("v1 longer than 107 bytes", text("PROXY UNKNOWN " + String(repeating: "x", count: 92) + "\r\n"), "longer than 107"),
        bad("v1 without an end", text("PROXY TCP4 " + String(repeating: "1", count: 200)), "longer than 107"),
        bad("v1 double space", text("PROXY TCP4  10.1.2.3 192.168.0.1 51234 3128\r\n"), "single spaces"),
        bad("v1 two spaces after PROXY", text("PROXY  TCP4 10.1.2.3 192.168.0.1 51234 3128\r\n"), "single spaces"),
        bad("v1 trailing space", text("PROXY TCP4 10.1.2.3 192.168.0.1 51234 3128 \r\n"), "single spaces"),
        bad("v1 tab", text("PROXY TCP4\t10.1.2.3 192.168.0.1 51234 3128\r\n"), "protocol"),
        bad("v1 bare LF", text("PROXY TCP4 10.1.2.3 192.168.0.1 51234 3128\n"), "bare LF"),
        bad("v1 CR without LF", text("PROXY TCP4 10.1.2.3 192.168.0.1 51234 3128\rX"), "CR not followed by LF"),
        bad("v1 UDP4", text("PROXY UDP4 10.1.2.3 192.168.0.1 51234 3128\r\n"), "protocol \"UDP4\""),
        bad("v1 too few fields", text("PROXY TCP4 10.1.2.3 192.168.0.1 51234\r\n"), "needs 4 fields"),
        bad("v1 too many fields", text("PROXY TCP4 10.1.2.3 192.168.0.1 51234 3128 9\r\n"), "needs 4 fields"),
        bad("v1 port above 65535", text("PROXY TCP4 10.1.2.3 192.168.0.1 65536 3128\r\n"), "ports"),
        bad("v1 port of six digits", text("PROXY TCP4 10.1.2.3 192.168.0.1 100000 3128\r\n"), "ports"),
        bad("v1 negative port", text("PROXY TCP4 10.1.2.3 192.168.0.1 -1 3128\r\n"), "ports"),
        bad("v1 port with a leading zero", text("PROXY TCP4 10.1.2.3 192.168.0.1 080 3128\r\n"), "ports"),
        bad("v1 octet above 255", text("PROXY TCP4 10.1.2.256 192.168.0.1 1 2\r\n"), "not an IPv4"),
        bad("v1 octet with a leading zero", text("PROXY TCP4 010.1.2.3 192.168.0.1 1 2\r\n"), "not an IPv4"),
        bad("v1 three octets", text("PROXY TCP4 10.1.2 192.168.0.1 1 2\r\n"), "not an IPv4"),
        bad("v1 a name", text("PROXY TCP4 localhost 192.168.0.1 1 2\r\n"), "not an IPv4"),
        bad("v1 IPv6 under TCP4", text("PROXY TCP4 ::1 ::1 1 2\r\n"), "not an IPv4"),
        bad("v1 IPv4 under TCP6", text("PROXY TCP6 10.1.2.3 ::1 1 2\r\n"), "not an IPv6"),
        bad("v1 IPv6 with a zone", text("PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n"), "not an IPv6"),
        bad("v1 bad destination", text("PROXY TCP4 10.1.2.3 1.2.3.4.5 1 2\r\n"), "destination"),
        bad("v1 NUL in an address", text("PROXY TCP4 10.1.2.3\u{0} 1.2.3.4 1 2\r\n"), "not an IPv4"),

        // Version 2.
        ok("v2 IPv4", version2(payload: v4Payload), "10.1.2.3:51234", "192.168.0.1:3128", 28),
        ok("v2 IPv4 with the request after it", version2(payload: v4Payload) + text("GET / HTTP/1.1\r\n\r\n"),
           "10.1.2.3:51234", "192.168.0.1:3128", 28),
        ok("v2 IPv6", version2(familyProtocol: 0x21, payload: v6Payload), "[2001:db8:0:0:0:0:0:1]:1234",
           "[fd00:0:0:0:0:0:0:2]:3128", 52),
        ok("v2 IPv4 with TLVs skipped", version2(payload: v4Payload + [0x04, 0x00, 0x03, 0xAA, 0xBB, 0xCC, 0x05, 0x00, 0x00]),
           "10.1.2.3:51234", "192.168.0.1:3128", 37),
        ok("v2 LOCAL (a health check)", version2(command: 0, familyProtocol: 0x00, payload: []), nil, nil, 16),
        ok("v2 LOCAL ignores its addresses", version2(command: 0, payload: v4Payload), nil, nil, 28),
        ok("v2 UNSPEC family", version2(familyProtocol: 0x00, payload: []), nil, nil, 16),
        ok("v2 UNIX family", version2(familyProtocol: 0x31, payload: Array(repeating: 0, count: 216)), nil, nil, 232),
        ok("v2 at the bound", version2(payload: v4Payload + [0xEE, 0x03, 0xF1] + Array(repeating: 0, count: 1_009)),
           "10.1.2.3:51234", "192.168.0.1:3128", 16 + 1_024),
        more("v2 signature only", Array(version2(payload: v4Payload).prefix(12))),
        more("v2 first byte", [0x0D]),
        more("v2 fixed part cut", Array(version2(payload: v4Payload).prefix(15))),
        more("v2 addresses cut", Array(version2(payload: v4Payload).prefix(27))),
        more("v2 TLVs still coming", version2(payload: v4Payload, announced: 40)),
        bad("v2 wrong signature", [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x55, 0x0A, 0x21, 0x11, 0, 12] + v4Payload,
            "no PROXY protocol header"),
        bad("v2 version 1 in the binary form", version2(payload: v4Payload).enumerated().map { $0.offset == 12 ? 0x11 : $0.element },
            "version 1"),
        bad("v2 version 3", version2(payload: v4Payload).enumerated().map { $0.offset == 12 ? 0x31 : $0.element }, "version 3"),
        bad("v2 command 2", version2(command: 2, payload: v4Payload), "unknown command 2"),
        bad("v2 family 4", version2(familyProtocol: 0x41, payload: v4Payload), "unknown family"),
        bad("v2 protocol 3", version2(familyProtocol: 0x13, payload: v4Payload), "unknown family"),
        bad("v2 datagram", version2(familyProtocol: 0x12, payload: v4Payload), "datagram"),
        bad("v2 IPv4 without the protocol", version2(familyProtocol: 0x10, payload: v4Payload), "unspecified protocol"),
        bad("v2 IPv4 too short", version2(payload: Array(v4Payload.prefix(11))), "too few for IPv4"),
        bad("v2 IPv6 with IPv4's length", version2(familyProtocol: 0x21, payload: v4Payload), "too few for IPv6"),
        bad("v2 length beyond the bound", version2(payload: v4Payload, announced: 1_025), "more than 1024"),
        bad("v2 length 65535", version2(payload: [], announced: 65_535), "more than 1024"),
    ]
}

@Test(arguments: ProxyHeaderTable.rows)
func proxyProtocolHeader(_ row: ProxyHeaderRow) {
    let got = PP.parse(row.bytes)
    switch (row.expected, got) {
    case (.needMore, .needMore):
        break
    case (.parsed(let source, let destination, let length), .parsed(let header)):
        #expect(header.source?.description == source)
        #expect(header.destination?.description == destination)
        #expect(header.length == length)
    case (.invalid(let reason), .invalid(let why)):
        #expect(why.contains(reason), "\(why)")
    default:
        Issue.record("expected \(row.expected), got \(got)")
    }
}

/// Every prefix of a valid header asks for more, and never claims a byte beyond the header.
@Test(arguments: [Array(ProxyHeaderTable.v1Line.utf8), version2(payload: v4Payload + [0x04, 0x00, 0x01, 0x7F]),
                  version2(familyProtocol: 0x21, payload: v6Payload)])
func proxyProtocolHeaderPrefixes(_ whole: [UInt8]) {
    for n in 0..<whole.count {
        #expect(PP.parse(Array(whole.prefix(n))) == .needMore, "prefix of \(n) bytes")
    }
    guard case .parsed(let header) = PP.parse(whole + Array("GET".utf8)) else {
        Issue.record("whole header not parsed")
        return
    }
    #expect(header.length == whole.count)
}

/// Arbitrary bytes never crash the parser, and a parsed header never claims more than it was given.
@Test func proxyProtocolHeaderNoise() {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> UInt8 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
    let starts: [[UInt8]] = [[], Array("PROXY ".utf8), Array("PROXY TCP4 ".utf8), Array(version2(payload: []).prefix(12))]
    for i in 0..<4_000 {
        let bytes = starts[i % starts.count] + (0..<Int(next() % 64)).map { _ in next() }
        if case .parsed(let h) = PP.parse(bytes) { #expect(h.length <= bytes.count) }
    }
}
