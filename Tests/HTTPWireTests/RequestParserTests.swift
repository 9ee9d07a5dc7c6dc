import Testing
import HTTPWire

/// What a request row expects the parser to produce.
struct RequestExpectation: Sendable, Equatable, CustomStringConvertible {
    var length: Int
    var method: HTTPMethod
    var methodText: String
    var target: String
    var version: HTTPVersion
    var framing: BodyFraming
    var keepAlive: Bool
    var expectsContinue: Bool
    var upgradeRequested: Bool
    /// "name: value" per field line, or nil when the row does not care.
    var fields: [String]?

    var description: String {
        "\(length) bytes, \(method) \(methodText) \(target) \(version.major).\(version.minor) \(framing) "
            + "keepAlive=\(keepAlive) continue=\(expectsContinue) upgrade=\(upgradeRequested) \(fields ?? [])"
    }
}

struct RequestRow: Sendable, CustomTestStringConvertible {
    enum Expected: Sendable {
        case head(RequestExpectation)
        case error(HTTPWireError)
    }

    var name: String
    var input: String
    var limits: HeadLimits
    var expected: Expected

    var testDescription: String { name }
}

/// A row whose input is a valid head, followed by `body` (which the head length excludes).
func accept(_ name: String, _ input: String, method: HTTPMethod = .get, methodText: String? = nil,
            target: String = "/", version: HTTPVersion = .http11, framing: BodyFraming = .none,
            keepAlive: Bool? = nil, expectsContinue: Bool = false, upgrade: Bool = false,
            fields: [String]? = nil, body: String = "", limits: HeadLimits = HeadLimits()) -> RequestRow {
    let text: String
    switch method {
    case .get: text = "GET"
    case .head: text = "HEAD"
    case .post: text = "POST"
    case .put: text = "PUT"
    case .delete: text = "DELETE"
    case .connect: text = "CONNECT"
    case .options: text = "OPTIONS"
    case .trace: text = "TRACE"
    case .patch: text = "PATCH"
    case .other: text = "?"
    }
    let expectation = RequestExpectation(
        length: input.utf8.count, method: method, methodText: methodText ?? text, target: target,
        version: version, framing: framing, keepAlive: keepAlive ?? (version == .http11),
        expectsContinue: expectsContinue, upgradeRequested: upgrade, fields: fields)
    return RequestRow(name: name, input: input + body, limits: limits, expected: .head(expectation))
}

func reject(_ name: String, _ input: String, _ error: HTTPWireError, limits: HeadLimits = HeadLimits()) -> RequestRow {
    RequestRow(name: name, input: input, limits: limits, expected: .error(error))
}

func summary(_ head: RequestHead, length: Int, fields: Bool) -> RequestExpectation {
    RequestExpectation(length: length, method: head.method, methodText: string(head.headers, head.methodRange),
                       target: string(head.headers, head.target), version: head.version, framing: head.framing,
                       keepAlive: head.keepAlive, expectsContinue: head.expectsContinue,
                       upgradeRequested: head.upgradeRequested, fields: fields ? fieldLines(head.headers) : nil)
}

enum RequestTable {
    static let h = "Host: example.com\r\n"

    static let valid: [RequestRow] = [
        // §3 request line
        accept("§3 origin-form GET", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", fields: ["Host: example.com"]),
        accept("§3 HEAD", "HEAD /x HTTP/1.1\r\n\(h)\r\n", method: .head, target: "/x"),
        accept("§3 POST", "POST /p HTTP/1.1\r\n\(h)\r\n", method: .post, target: "/p"),
        accept("§3 PUT", "PUT /p HTTP/1.1\r\n\(h)\r\n", method: .put, target: "/p"),
        accept("§3 DELETE", "DELETE /p HTTP/1.1\r\n\(h)\r\n", method: .delete, target: "/p"),
        accept("§3 PATCH", "PATCH /p HTTP/1.1\r\n\(h)\r\n", method: .patch, target: "/p"),
        accept("§3 TRACE", "TRACE / HTTP/1.1\r\n\(h)\r\n", method: .trace),
        accept("§3.2.4 OPTIONS asterisk-form", "OPTIONS * HTTP/1.1\r\n\(h)\r\n", method: .options, target: "*"),
        accept("§3.2.3 CONNECT authority-form", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
               method: .connect, target: "example.com:443"),
        accept("§3.2.2 absolute-form", "GET http://example.com/a?b HTTP/1.1\r\n\(h)\r\n",
               target: "http://example.com/a?b"),
        accept("§3.1 methods are case-sensitive: get is .other", "get / HTTP/1.1\r\n\(h)\r\n",
               method: .other, methodText: "get"),
        accept("§3.1 extension method PROPFIND", "PROPFIND /d HTTP/1.1\r\n\(h)\r\n", method: .other,
               methodText: "PROPFIND", target: "/d"),
        accept("§3.1 method of every tchar", "!#$%&'*+-.^_`|~09AZaz / HTTP/1.1\r\n\(h)\r\n", method: .other,
               methodText: "!#$%&'*+-.^_`|~09AZaz"),
        accept("§3.2 target with every allowed punctuation",
               "GET /a-._~!$&'()*+,;=:@/?q=%20[]{}|\\^`\"<># HTTP/1.1\r\n\(h)\r\n",
               target: "/a-._~!$&'()*+,;=:@/?q=%20[]{}|\\^`\"<>#"),
        accept("§2.3 HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n", version: .http10, fields: []),
        accept("§2.2 leading empty lines are skipped and counted", "\r\n\r\nGET / HTTP/1.1\r\n\(h)\r\n"),
        accept("§2.2 eight leading empty lines", String(repeating: "\r\n", count: 8) + "GET / HTTP/1.1\r\n\(h)\r\n"),
        accept("§2.1 head length excludes the body",
               "POST / HTTP/1.1\r\n\(h)Content-Length: 5\r\n\r\n", method: .post,
               framing: .contentLength(5), body: "hello"),
        accept("§2.1 pipelined requests: only the first head",
               "GET /1 HTTP/1.1\r\n\(h)\r\n", target: "/1", body: "GET /2 HTTP/1.1\r\n\(h)\r\n"),

        // §5 field lines
        accept("§5 field value OWS trimmed", "GET / HTTP/1.1\r\n\(h)X-A:   a b  \t\r\n\r\n",
               fields: ["Host: example.com", "X-A: a b"]),
        accept("§5 no OWS after colon", "GET / HTTP/1.1\r\nHost:example.com\r\nX-A:b\r\n\r\n",
               fields: ["Host: example.com", "X-A: b"]),
        accept("§5 empty field value", "GET / HTTP/1.1\r\n\(h)X-Empty:\r\nX-Blank:   \r\n\r\n",
               fields: ["Host: example.com", "X-Empty: ", "X-Blank: "]),
        accept("§5.5 obs-text in value", "GET / HTTP/1.1\r\n\(h)X-Name: José\r\n\r\n",
               fields: ["Host: example.com", "X-Name: José"]),
        accept("§5.5 HTAB inside value", "GET / HTTP/1.1\r\n\(h)X-T: a\tb\r\n\r\n",
               fields: ["Host: example.com", "X-T: a\tb"]),
        accept("§5.1 field name of every tchar", "GET / HTTP/1.1\r\n\(h)!#$%&'*+-.^_`|~09AZaz: v\r\n\r\n",
               fields: ["Host: example.com", "!#$%&'*+-.^_`|~09AZaz: v"]),
        accept("§5 colon inside value", "GET / HTTP/1.1\r\n\(h)X-Url: http://a:1/\r\n\r\n",
               fields: ["Host: example.com", "X-Url: http://a:1/"]),
        accept("RFC 9110 §7.2 empty Host value is allowed", "GET / HTTP/1.1\r\nHost:\r\n\r\n", fields: ["Host: "]),
        accept("§3.2 host field name is case-insensitive", "GET / HTTP/1.1\r\nhOsT: a\r\n\r\n"),
        accept("§3.2 Host with port", "GET / HTTP/1.1\r\nHost: example.com:8080\r\n\r\n"),
        accept("§3.2 Host IPv4 with port", "GET / HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n"),
        accept("§3.2 Host IPv6 literal with port", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"),
        accept("§3.2 Host with empty port", "GET / HTTP/1.1\r\nHost: a:\r\n\r\n"),
        accept("§3.2 Host reg-name of unreserved, sub-delims and pct-encoded",
               "GET / HTTP/1.1\r\nHost: a-b.c_d~e!$&'()*+,;=%41%7e\r\n\r\n"),
        accept("§3.2 Host with trailing dot, OWS trimmed", "GET / HTTP/1.1\r\nHost:  example.com. \r\n\r\n"),

        // §9 connection management
        accept("§9.3 HTTP/1.1 is persistent by default", "GET / HTTP/1.1\r\n\(h)\r\n", keepAlive: true),
        accept("§9.6 HTTP/1.1 Connection: close", "GET / HTTP/1.1\r\n\(h)Connection: close\r\n\r\n", keepAlive: false),
        accept("§9.6 close token in a list, any case", "GET / HTTP/1.1\r\n\(h)Connection: foo , CLOSE\r\n\r\n",
               keepAlive: false),
        accept("§9.6 close token in a second Connection field",
               "GET / HTTP/1.1\r\n\(h)Connection: foo\r\nConnection: close\r\n\r\n", keepAlive: false),
        accept("§9.6 'closed' is not close", "GET / HTTP/1.1\r\n\(h)Connection: closed\r\n\r\n", keepAlive: true),
        accept("§9.3 HTTP/1.1 keep-alive token", "GET / HTTP/1.1\r\n\(h)Connection: keep-alive\r\n\r\n", keepAlive: true),
        accept("§9.3 HTTP/1.0 closes by default", "GET / HTTP/1.0\r\n\(h)\r\n", version: .http10, keepAlive: false),
        accept("§9.3 HTTP/1.0 with keep-alive", "GET / HTTP/1.0\r\n\(h)Connection: keep-alive\r\n\r\n",
               version: .http10, keepAlive: true),
        accept("§9.3 HTTP/1.0 with Keep-Alive any case", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
               version: .http10, keepAlive: true),
        accept("§9.3 HTTP/1.0 keep-alive and close: close wins",
               "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", version: .http10, keepAlive: false),
        accept("§9.3 HTTP/1.0 Keep-Alive field alone is not enough", "GET / HTTP/1.0\r\nKeep-Alive: timeout=5\r\n\r\n",
               version: .http10, keepAlive: false),
        accept("§6.1 HTTP/1.0 with chunked: framing kept, connection closed",
               "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n", method: .post,
               version: .http10, framing: .chunked, keepAlive: false),

        // RFC 9110 §10.1.1 Expect, §7.8 Upgrade
        accept("RFC 9110 §10.1.1 Expect: 100-continue", "PUT / HTTP/1.1\r\n\(h)Expect: 100-continue\r\n\r\n",
               method: .put, expectsContinue: true),
        accept("RFC 9110 §10.1.1 Expect compared case-insensitively", "PUT / HTTP/1.1\r\n\(h)Expect: 100-Continue\r\n\r\n",
               method: .put, expectsContinue: true),
        accept("RFC 9110 §10.1.1 other expectation", "PUT / HTTP/1.1\r\n\(h)Expect: 100-continue-x\r\n\r\n",
               method: .put, expectsContinue: false),
        accept("RFC 9110 §7.8 Connection: Upgrade with Upgrade",
               "GET /ws HTTP/1.1\r\n\(h)Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", target: "/ws", upgrade: true),
        accept("RFC 9110 §7.8 upgrade token in a list",
               "GET /ws HTTP/1.1\r\n\(h)Upgrade: h2c\r\nConnection: keep-alive, upgrade\r\n\r\n", target: "/ws",
               upgrade: true),
        accept("RFC 9110 §7.8 Upgrade without the Connection token", "GET / HTTP/1.1\r\n\(h)Upgrade: websocket\r\n\r\n",
               upgrade: false),
        accept("RFC 9110 §7.8 Connection: upgrade without Upgrade", "GET / HTTP/1.1\r\n\(h)Connection: upgrade\r\n\r\n",
               upgrade: false),

        // §6 framing
        accept("§6.3 no framing fields: no body", "POST / HTTP/1.1\r\n\(h)\r\n", method: .post, framing: .none),
        accept("§6.3 Content-Length", "POST / HTTP/1.1\r\n\(h)Content-Length: 42\r\n\r\n", method: .post,
               framing: .contentLength(42)),
        accept("§6.3 Content-Length: 0", "POST / HTTP/1.1\r\n\(h)Content-Length: 0\r\n\r\n", method: .post,
               framing: .contentLength(0)),
        accept("§6.3 Content-Length with leading zeros", "POST / HTTP/1.1\r\n\(h)Content-Length: 007\r\n\r\n",
               method: .post, framing: .contentLength(7)),
        accept("§6.3 Content-Length without OWS", "POST / HTTP/1.1\r\n\(h)content-length:5\r\n\r\n", method: .post,
               framing: .contentLength(5)),
        accept("§6.3 Content-Length with trailing OWS", "POST / HTTP/1.1\r\n\(h)Content-Length: 5 \t\r\n\r\n",
               method: .post, framing: .contentLength(5)),
        accept("§6.3 Content-Length of 2^62", "POST / HTTP/1.1\r\n\(h)Content-Length: 4611686018427387904\r\n\r\n",
               method: .post, framing: .contentLength(1 << 62)),
        accept("§6.3 Content-Length with 30 leading zeros",
               "POST / HTTP/1.1\r\n\(h)Content-Length: 0000000000000000000000000000005\r\n\r\n", method: .post,
               framing: .contentLength(5)),
        accept("§6.1 Transfer-Encoding: chunked", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: chunked\r\n\r\n",
               method: .post, framing: .chunked),
        accept("§6.1 chunked is case-insensitive", "POST / HTTP/1.1\r\n\(h)transfer-encoding: CHUNKED\r\n\r\n",
               method: .post, framing: .chunked),
        accept("§6.1 chunked with trailing OWS", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: chunked \t \r\n\r\n",
               method: .post, framing: .chunked),
        accept("RFC 9110 §5.6.1.2 empty list elements ignored", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: , chunked ,\r\n\r\n",
               method: .post, framing: .chunked),

        // Limits (exactly at the bound is fine)
        accept("limits: head of exactly maxHeadBytes", "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
               limits: HeadLimits(maxHeadBytes: 27)),
        accept("limits: exactly maxHeaderCount fields", "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n",
               limits: HeadLimits(maxHeaderCount: 3)),
        accept("limits: request line of exactly maxRequestLineBytes", "GET /abc HTTP/1.1\r\nHost: a\r\n\r\n",
               target: "/abc", limits: HeadLimits(maxRequestLineBytes: 19)),
    ]

    static let invalid: [RequestRow] = [
        // §3 request line
        reject("§3 two spaces after method", "GET  / HTTP/1.1\r\n\(h)\r\n", .malformedRequestLine),
        reject("§3 two spaces before version", "GET /  HTTP/1.1\r\n\(h)\r\n", .malformedRequestLine),
        reject("§3 trailing space after version", "GET / HTTP/1.1 \r\n\(h)\r\n", .malformedRequestLine),
        reject("§3 missing version", "GET /\r\n\(h)\r\n", .malformedRequestLine),
        reject("§3 missing version after space", "GET / \r\n\(h)\r\n", .malformedRequestLine),
        reject("§3 method only", "GET\r\n\(h)\r\n", .malformedRequestLine),
        reject("§3 extra part after version", "GET / HTTP/1.1 x\r\n\(h)\r\n", .malformedRequestLine),
        reject("§3 space inside the target", "GET /a b HTTP/1.1\r\n\(h)\r\n", .malformedRequestLine),
        reject("§2.3 version with trailing garbage HTTP/1.1x", "GET / HTTP/1.1x\r\n\(h)\r\n", .malformedRequestLine),
        reject("§2.3 version is case-sensitive http/1.1", "GET / http/1.1\r\n\(h)\r\n", .malformedRequestLine),
        reject("§2.3 two-digit minor HTTP/1.10", "GET / HTTP/1.10\r\n\(h)\r\n", .malformedRequestLine),
        reject("§2.3 version without minor HTTP/1", "GET / HTTP/1\r\n\(h)\r\n", .malformedRequestLine),
        reject("§2.3 version HTTP/2 without minor", "GET / HTTP/2\r\n\(h)\r\n", .malformedRequestLine),
        reject("§2.3 version HTTP/1.1 spelled HTTP 1.1", "GET / HTTP 1.1\r\n\(h)\r\n", .malformedRequestLine),
        reject("§2.2 more than eight leading empty lines", String(repeating: "\r\n", count: 9) + "GET / HTTP/1.1\r\n\(h)\r\n",
               .malformedRequestLine),
        reject("§2.3 HTTP/1.2 unsupported", "GET / HTTP/1.2\r\n\(h)\r\n", .unsupportedVersion),
        reject("§2.3 HTTP/2.0 unsupported", "GET / HTTP/2.0\r\n\(h)\r\n", .unsupportedVersion),
        reject("§2.3 HTTP/0.9 unsupported", "GET / HTTP/0.9\r\n\(h)\r\n", .unsupportedVersion),
        reject("§2.3 HTTP/3.1 unsupported", "GET / HTTP/3.1\r\n\(h)\r\n", .unsupportedVersion),
        reject("§3.1 method with '@'", "G@T / HTTP/1.1\r\n\(h)\r\n", .invalidMethod),
        reject("§3.1 method with '('", "GET( / HTTP/1.1\r\n\(h)\r\n", .invalidMethod),
        reject("§3.1 empty method (leading space)", " GET / HTTP/1.1\r\n\(h)\r\n", .invalidMethod),
        reject("§3 HTAB is not the separator", "GET\t/ HTTP/1.1\r\n\(h)\r\n", .invalidMethod),
        reject("§3.1 non-ASCII method", "GÉT / HTTP/1.1\r\n\(h)\r\n", .invalidMethod),
        reject("§3.1 TLS handshake bytes", "\u{16}\u{03}\u{01}\u{02}\u{00}", .invalidMethod),
        reject("§3.2 HTAB in target", "GET /a\tb HTTP/1.1\r\n\(h)\r\n", .invalidTarget),
        reject("§3.2 DEL in target", "GET /a\u{7F} HTTP/1.1\r\n\(h)\r\n", .invalidTarget),
        reject("§3.2 control in target", "GET /\u{01} HTTP/1.1\r\n\(h)\r\n", .invalidTarget),
        reject("§3.2 non-ASCII in target", "GET /é HTTP/1.1\r\n\(h)\r\n", .invalidTarget),
        reject("§3.2 ESC in target", "GET /\u{1B}[0m HTTP/1.1\r\n\(h)\r\n", .invalidTarget),

        // §5 field lines
        reject("§5.1 field name with '@'", "GET / HTTP/1.1\r\n\(h)X@Y: 1\r\n\r\n", .invalidFieldName),
        reject("§5.1 field name with '('", "GET / HTTP/1.1\r\n\(h)X(Y): 1\r\n\r\n", .invalidFieldName),
        reject("§5.1 field name with '/'", "GET / HTTP/1.1\r\n\(h)X/Y: 1\r\n\r\n", .invalidFieldName),
        reject("§5.1 empty field name", "GET / HTTP/1.1\r\n\(h): 1\r\n\r\n", .invalidFieldName),
        reject("§5.1 field line without colon", "GET / HTTP/1.1\r\n\(h)NoColon\r\n\r\n", .invalidFieldName),
        reject("§5.1 space inside field name", "GET / HTTP/1.1\r\n\(h)X Y: 1\r\n\r\n", .invalidFieldName),
        reject("§5.1 control in field name", "GET / HTTP/1.1\r\n\(h)X\u{01}Y: 1\r\n\r\n", .invalidFieldName),
        reject("§5.1 non-ASCII field name", "GET / HTTP/1.1\r\n\(h)Naïve: 1\r\n\r\n", .invalidFieldName),
        reject("§5.1 whitespace before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", .whitespaceBeforeColon),
        reject("§5.1 HTAB before colon", "GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", .whitespaceBeforeColon),
        reject("§5.2 obs-fold continuation line", "GET / HTTP/1.1\r\n\(h)X-A: a\r\n b\r\n\r\n", .obsoleteLineFolding),
        reject("§5.2 obs-fold with HTAB", "GET / HTTP/1.1\r\n\(h)X-A: a\r\n\tb\r\n\r\n", .obsoleteLineFolding),
        reject("§2.2 whitespace before the first field line", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", .obsoleteLineFolding),
        reject("§5.5 control in field value", "GET / HTTP/1.1\r\n\(h)X-A: a\u{01}b\r\n\r\n", .invalidFieldValue),
        reject("§5.5 DEL in field value", "GET / HTTP/1.1\r\n\(h)X-A: a\u{7F}\r\n\r\n", .invalidFieldValue),
        reject("§5.5 VT in field value", "GET / HTTP/1.1\r\n\(h)X-A: \u{0B}\r\n\r\n", .invalidFieldValue),
        reject("§5.5 ESC in field value", "GET / HTTP/1.1\r\n\(h)X-A: \u{1B}[31m\r\n\r\n", .invalidFieldValue),
        reject("§5.5 form feed in field value", "GET / HTTP/1.1\r\n\(h)X-A: a\u{0C}\r\n\r\n", .invalidFieldValue),
        // Long values are checked eight bytes at a time: a bad byte deep inside, at and across
        // word boundaries, is still found, and a bare LF or NUL after a long run still ends it.
        reject("§5.5 DEL after 8 printable bytes", "GET / HTTP/1.1\r\n\(h)X-A: abcdefgh\u{7F}\r\n\r\n", .invalidFieldValue),
        reject("§5.5 control at byte 17 of a value", "GET / HTTP/1.1\r\n\(h)X-A: 0123456789abcdef\u{01}x\r\n\r\n",
               .invalidFieldValue),
        reject("§5.5 VT after a HTAB in a long value", "GET / HTTP/1.1\r\n\(h)X-A: 01234567\t89abcdef\u{0B}\r\n\r\n",
               .invalidFieldValue),
        reject("§2.2 bare LF after a long value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 0123456789abcdef\n\r\n", .bareLineFeed),
        reject("§2.2 NUL after a long value", "GET / HTTP/1.1\r\n\(h)X-A: 0123456789abcdef\u{00}\r\n\r\n", .nulByte),

        // §2.2 line endings, NUL
        reject("§2.2 bare CR in field value", "GET / HTTP/1.1\r\n\(h)X-A: a\rb\r\n\r\n", .bareCarriageReturn),
        reject("§2.2 bare CR ending the request line", "GET / HTTP/1.1\rHost: a\r\n\r\n", .bareCarriageReturn),
        reject("§2.2 bare CR before the request line", "\rGET / HTTP/1.1\r\n\(h)\r\n", .bareCarriageReturn),
        reject("§2.2 bare CR instead of the empty line", "GET / HTTP/1.1\r\n\(h)\rX", .bareCarriageReturn),
        reject("§2.2 CR CR LF", "GET / HTTP/1.1\r\n\(h)X-A: a\r\r\n\r\n", .bareCarriageReturn),
        reject("§2.2 bare LF everywhere", "GET / HTTP/1.1\nHost: a\n\n", .bareLineFeed),
        reject("§2.2 bare LF ending a field line", "GET / HTTP/1.1\r\nHost: a\n\r\n", .bareLineFeed),
        reject("§2.2 bare LF as the empty line", "GET / HTTP/1.1\r\nHost: a\r\n\n", .bareLineFeed),
        reject("§2.2 bare LF before the request line", "\nGET / HTTP/1.1\r\n\(h)\r\n", .bareLineFeed),
        reject("§2.2 bare LF after a short request line", "GET /\n", .bareLineFeed),
        reject("§2.2 NUL in field value", "GET / HTTP/1.1\r\n\(h)X-A: a\0b\r\n\r\n", .nulByte),
        reject("§2.2 NUL in field name", "GET / HTTP/1.1\r\n\(h)X\0A: 1\r\n\r\n", .nulByte),
        reject("§2.2 NUL starting a field line", "GET / HTTP/1.1\r\n\(h)\0X: 1\r\n\r\n", .nulByte),
        reject("§2.2 NUL in target", "GET /\0 HTTP/1.1\r\n\(h)\r\n", .nulByte),
        reject("§2.2 NUL in method", "G\0ET / HTTP/1.1\r\n\(h)\r\n", .nulByte),
        reject("§2.2 NUL in version", "GET / HTTP/1.\0\r\n\(h)\r\n", .nulByte),
        reject("§2.2 NUL after version", "GET / HTTP/1.1\0\r\n\(h)\r\n", .nulByte),

        // §3.2 Host
        reject("§3.2 HTTP/1.1 without Host", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", .invalidHost),
        reject("§3.2 HTTP/1.1 with two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", .invalidHost),
        reject("§3.2 HTTP/1.1 with two identical Host fields", "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", .invalidHost),
        reject("§3.2 HTTP/1.0 with two Host fields", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", .invalidHost),
        // RFC 9112 §3.2: "a Host header field with an invalid field value" is a 400 too.
        reject("§3.2 Host with userinfo", "GET / HTTP/1.1\r\nHost: user@example.com\r\n\r\n", .invalidHost),
        reject("§3.2 Host that is a list", "GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a query", "GET / HTTP/1.1\r\nHost: a?b\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a fragment", "GET / HTTP/1.1\r\nHost: a#b\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a quote", "GET / HTTP/1.1\r\nHost: \"a\"\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a backslash", "GET / HTTP/1.1\r\nHost: a\\b\r\n\r\n", .invalidHost),
        reject("§3.2 Host with obs-text", "GET / HTTP/1.1\r\nHost: exämple.com\r\n\r\n", .invalidHost),
        reject("§3.2 Host with HTAB inside", "GET / HTTP/1.1\r\nHost: a\tb\r\n\r\n", .invalidHost),
        reject("§3.2 Host port with a letter", "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n", .invalidHost),
        reject("§3.2 Host with two ports", "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a bad percent-encoding", "GET / HTTP/1.1\r\nHost: a%4\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a non-hex percent-encoding", "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", .invalidHost),
        reject("§3.2 Host IPv6 literal not closed", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", .invalidHost),
        reject("§3.2 Host empty IPv6 literal", "GET / HTTP/1.1\r\nHost: []\r\n\r\n", .invalidHost),
        reject("§3.2 Host text after IPv6 literal", "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", .invalidHost),
        reject("§3.2 Host with a bracket in a reg-name", "GET / HTTP/1.1\r\nHost: a]b\r\n\r\n", .invalidHost),
        reject("§3.2 HTTP/1.0 with an invalid Host", "GET / HTTP/1.0\r\nHost: u@a\r\n\r\n", .invalidHost),
        reject("§3.2 Host checked after framing", "POST / HTTP/1.1\r\nHost: u@a\r\nContent-Length: x\r\n\r\n",
               .invalidContentLength),

        // §6.3 Content-Length
        reject("§6.3 Content-Length not a number", "POST / HTTP/1.1\r\n\(h)Content-Length: abc\r\n\r\n", .invalidContentLength),
        reject("§6.3 Content-Length negative", "POST / HTTP/1.1\r\n\(h)Content-Length: -1\r\n\r\n", .invalidContentLength),
        reject("§6.3 Content-Length empty", "POST / HTTP/1.1\r\n\(h)Content-Length:\r\n\r\n", .invalidContentLength),
        reject("§6.3 Content-Length decimal point", "POST / HTTP/1.1\r\n\(h)Content-Length: 5.0\r\n\r\n", .invalidContentLength),
        reject("§6.3 Content-Length exponent", "POST / HTTP/1.1\r\n\(h)Content-Length: 1e3\r\n\r\n", .invalidContentLength),
        reject("§6.3 Content-Length above 2^62", "POST / HTTP/1.1\r\n\(h)Content-Length: 4611686018427387905\r\n\r\n",
               .invalidContentLength),
        reject("§6.3 Content-Length overflowing Int64",
               "POST / HTTP/1.1\r\n\(h)Content-Length: 99999999999999999999999\r\n\r\n", .invalidContentLength),
        reject("§6.3 Content-Length list with an empty element", "POST / HTTP/1.1\r\n\(h)Content-Length: 5,\r\n\r\n",
               .invalidContentLength),
        reject("§6.3 Content-Length list with a bad element", "POST / HTTP/1.1\r\n\(h)Content-Length: 5, x\r\n\r\n",
               .invalidContentLength),
        reject("§6.3 repeated Content-Length fields that differ",
               "POST / HTTP/1.1\r\n\(h)Content-Length: 5\r\nContent-Length: 6\r\n\r\n", .conflictingContentLength),
        reject("§6.3 repeated identical Content-Length fields (refused)",
               "POST / HTTP/1.1\r\n\(h)Content-Length: 5\r\nContent-Length: 5\r\n\r\n", .conflictingContentLength),
        reject("§6.3 Content-Length list of different values", "POST / HTTP/1.1\r\n\(h)Content-Length: 5, 6\r\n\r\n",
               .conflictingContentLength),

        // §6.1 Transfer-Encoding
        reject("§6.1 gzip alone", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: gzip\r\n\r\n", .unsupportedTransferEncoding),
        reject("§6.1 gzip, chunked (coding we do not decode)", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: gzip, chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.1 chunked not final", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: chunked, gzip\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.1 chunked twice", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: chunked, chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.1 chunked twice in two fields",
               "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.1 identity", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: identity\r\n\r\n", .unsupportedTransferEncoding),
        reject("§6.1 chunked with a parameter", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: chunked;q=1\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.1 empty Transfer-Encoding", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding:\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.1 list of only commas", "POST / HTTP/1.1\r\n\(h)Transfer-Encoding: , ,\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.1 Content-Length and Transfer-Encoding",
               "POST / HTTP/1.1\r\n\(h)Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
               .contentLengthWithTransferEncoding),

        // Limits
        reject("limits: head one byte over maxHeadBytes", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", .headTooLarge,
               limits: HeadLimits(maxHeadBytes: 26)),
        reject("limits: head without end reaches maxHeadBytes", "GET / HTTP/1.1\r\nHost: a\r\nX-Long: aaaaaaaaaaaaaaaaaa",
               .headTooLarge, limits: HeadLimits(maxHeadBytes: 40)),
        reject("limits: leading empty lines count towards maxHeadBytes", "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
               .headTooLarge, limits: HeadLimits(maxHeadBytes: 30)),
        reject("limits: one field over maxHeaderCount", "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n",
               .tooManyHeaderFields, limits: HeadLimits(maxHeaderCount: 2)),
        reject("limits: maxHeaderCount 0", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", .tooManyHeaderFields,
               limits: HeadLimits(maxHeaderCount: 0)),
        reject("limits: request line one byte over", "GET /abcd HTTP/1.1\r\nHost: a\r\n\r\n", .requestLineTooLong,
               limits: HeadLimits(maxRequestLineBytes: 19)),
        reject("limits: request line too long before its CRLF arrives", "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
               .requestLineTooLong, limits: HeadLimits(maxRequestLineBytes: 20)),
        reject("limits: request line limit beats head limit", "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
               .requestLineTooLong, limits: HeadLimits(maxHeadBytes: 30, maxRequestLineBytes: 20)),
        reject("limits: bad byte before the line limit wins", "GET /\u{01}aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
               .invalidTarget, limits: HeadLimits(maxRequestLineBytes: 20)),
    ]

    static let rows = valid + invalid
}

@Suite("RequestParser")
struct RequestParserTests {
    @Test("request head", arguments: RequestTable.rows)
    func requestHead(_ row: RequestRow) { checkRequestRow(row) }

    /// Every prefix of a valid head is incomplete (nil); every prefix of an invalid one is incomplete
    /// or already fails with the row's error, never something else.
    @Test("every prefix", arguments: RequestTable.rows)
    func prefixes(_ row: RequestRow) { checkRequestPrefixes(row) }

    @Test("reused head keeps no stale state")
    func reuse() {
        var head = RequestHead()
        let first = wire("POST http://a/x HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nConnection: upgrade\r\n"
                         + "Upgrade: ws\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc")
        let second = wire("GET / HTTP/1.0\r\nX: y\r\n\r\n")
        #expect(parseRequest(first, into: &head) == .success(first.count - 3))
        #expect(head.headers.count == 8)
        #expect(head.upgradeRequested && head.expectsContinue && head.framing == .contentLength(3))

        // A failed and an incomplete parse in between must not leak into the next result.
        #expect(parseRequest(wire("GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n"), into: &head)
                == .failure(.invalidFieldName))
        #expect(head.headers.count == 0 && head.headers.storage.isEmpty && head.target == .empty)
        #expect(parseRequest(wire("GET / HTTP/1.1\r\nHost: a\r\nZ: 1\r\n"), into: &head) == .success(nil))
        // Incomplete: left empty, not half-filled with ranges into old storage.
        #expect(head.headers.count == 0 && head.headers.storage.isEmpty && head.methodRange == .empty)
        #expect(head.framing == .none && !head.upgradeRequested && !head.expectsContinue)

        #expect(parseRequest(second, into: &head) == .success(second.count))
        #expect(fieldLines(head.headers) == ["X: y"])
        #expect(head.headers.storage == second)
        #expect(head.method == .get && string(head.headers, head.methodRange) == "GET")
        #expect(string(head.headers, head.target) == "/")
        #expect(head.version == .http10)
        #expect(head.framing == .none)
        #expect(head.keepAlive == false)
        #expect(head.expectsContinue == false)
        #expect(head.upgradeRequested == false)
        #expect(head.headers.firstIndex(of: "content-length") == nil)
        #expect(head.headers.value(of: "host") == nil)
    }

    @Test("steady-state parsing reuses storage")
    func noReallocation() {
        var head = RequestHead()
        let message = wire("GET /a HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nUser-Agent: t\r\n\r\n")
        let other = wire("PUT /bb HTTP/1.1\r\nHost: bb\r\nContent-Length: 2\r\nX: y\r\n\r\n")
        #expect(parseRequest(message, into: &head) == .success(message.count))
        let storage = head.headers.storage.withUnsafeBufferPointer { $0.baseAddress }
        let fields = head.headers.fields.withUnsafeBufferPointer { $0.baseAddress }
        for _ in 0..<100 {
            #expect(parseRequest(other, into: &head) == .success(other.count))
            #expect(parseRequest(message, into: &head) == .success(message.count))
        }
        #expect(head.headers.storage.withUnsafeBufferPointer { $0.baseAddress } == storage)
        #expect(head.headers.fields.withUnsafeBufferPointer { $0.baseAddress } == fields)
    }

    @Test("ranges point into storage")
    func ranges() {
        var head = RequestHead()
        let message = wire("\r\nOPTIONS * HTTP/1.1\r\nHost: h\r\nX-Y:  v w \r\n\r\n")
        #expect(parseRequest(message, into: &head) == .success(message.count))
        #expect(string(head.headers, head.methodRange) == "OPTIONS")
        #expect(string(head.headers, head.target) == "*")
        #expect(head.headers.nameString(at: 1) == "X-Y")
        #expect(head.headers.valueString(at: 1) == "v w")
        #expect(head.headers.value(of: "x-y") == "v w")
        #expect(head.headers.value(of: "X-Z") == nil)
    }
}

func checkRequestRow(_ row: RequestRow, sourceLocation: SourceLocation = #_sourceLocation) {
    var head = RequestHead()
    let result = parseRequest(wire(row.input), limits: row.limits, into: &head)
    switch row.expected {
    case .error(let error):
        #expect(result == .failure(error), sourceLocation: sourceLocation)
    case .head(let expected):
        #expect(result == .success(expected.length), sourceLocation: sourceLocation)
        if case .success(.some) = result {
            #expect(summary(head, length: expected.length, fields: expected.fields != nil) == expected,
                    sourceLocation: sourceLocation)
            #expect(head.headers.storage.count <= expected.length, sourceLocation: sourceLocation)
        }
    }
}

func checkRequestPrefixes(_ row: RequestRow, sourceLocation: SourceLocation = #_sourceLocation) {
    let bytes = wire(row.input)
    var head = RequestHead()
    switch row.expected {
    case .head(let expected):
        for k in 0..<expected.length {
            let result = parseRequest(Array(bytes[0..<k]), limits: row.limits, into: &head)
            #expect(result == .success(nil), "prefix of \(k) bytes", sourceLocation: sourceLocation)
        }
        #expect(parseRequest(Array(bytes[0..<expected.length]), limits: row.limits, into: &head)
                == .success(expected.length), sourceLocation: sourceLocation)
    case .error(let error):
        for k in 0..<bytes.count {
            let result = parseRequest(Array(bytes[0..<k]), limits: row.limits, into: &head)
            #expect(result == .success(nil) || result == .failure(error), "prefix of \(k) bytes: \(result)",
                    sourceLocation: sourceLocation)
        }
    }
}

/// A byte a target cannot hold, smuggled into a long target (where the request line is read eight
/// bytes at a time) at any place, absolute or origin form: refused as it is in a short one (NUL
/// as a NUL, the rest as a bad target), never read as a shorter target or a second token.
@Test func aBadByteAnywhereInALongTargetIsRefused() {
    for prefix in ["/", "http://example.com/"] {
        let clean = Array((prefix + String(repeating: "a", count: 30)).utf8)
        for place in prefix.utf8.count..<clean.count {
            for bad: UInt8 in [0x00, 0x09, 0x0B, 0x7F, 0x80, 0xC3, 0xFF] {
                var target = clean
                target[place] = bad
                let bytes = Array("GET ".utf8) + target + Array(" HTTP/1.1\r\nHost: example.com\r\n\r\n".utf8)
                var head = RequestHead()
                #expect(parseRequest(bytes, into: &head) == .failure(bad == 0 ? .nulByte : .invalidTarget),
                        "\(bad) at \(place) of \(prefix)")
            }
        }
    }
}
