import Testing
import HTTPWire

struct ResponseExpectation: Sendable, Equatable, CustomStringConvertible {
    var length: Int
    var status: Int
    var reason: String
    var version: HTTPVersion
    var framing: BodyFraming
    var keepAlive: Bool
    var fields: [String]?

    var description: String {
        "\(length) bytes, \(version.major).\(version.minor) \(status) \(reason.debugDescription) \(framing) "
            + "keepAlive=\(keepAlive) \(fields ?? [])"
    }
}

struct ResponseRow: Sendable, CustomTestStringConvertible {
    enum Expected: Sendable {
        case head(ResponseExpectation)
        case error(HTTPWireError)
    }

    var name: String
    var input: String
    var method: HTTPMethod
    var limits: HeadLimits
    var expected: Expected

    var testDescription: String { name }
}

enum ResponseTable {
    /// A valid response head followed by `body` (not part of the head).
    static func accept(_ name: String, _ input: String, method: HTTPMethod = .get, status: Int = 200,
                       reason: String = "OK", version: HTTPVersion = .http11, framing: BodyFraming,
                       keepAlive: Bool? = nil, fields: [String]? = nil, body: String = "",
                       limits: HeadLimits = HeadLimits()) -> ResponseRow {
        let expectation = ResponseExpectation(
            length: input.utf8.count, status: status, reason: reason, version: version, framing: framing,
            keepAlive: keepAlive ?? (version == .http11 && framing != .untilClose), fields: fields)
        return ResponseRow(name: name, input: input + body, method: method, limits: limits,
                           expected: .head(expectation))
    }

    static func reject(_ name: String, _ input: String, _ error: HTTPWireError, method: HTTPMethod = .get,
                       limits: HeadLimits = HeadLimits()) -> ResponseRow {
        ResponseRow(name: name, input: input, method: method, limits: limits, expected: .error(error))
    }

    static let cl = "Content-Length: 10\r\n"
    static let te = "Transfer-Encoding: chunked\r\n"

    static let valid: [ResponseRow] = [
        // §6.3 framing by status and request method
        accept("§6.3 200 with Content-Length", "HTTP/1.1 200 OK\r\n\(cl)\r\n", framing: .contentLength(10),
               fields: ["Content-Length: 10"], body: "0123456789"),
        accept("§6.3 200 chunked", "HTTP/1.1 200 OK\r\n\(te)\r\n", framing: .chunked),
        accept("§6.3 200 without framing: until close", "HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", framing: .untilClose),
        accept("§6.3 200 Content-Length: 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", framing: .contentLength(0)),
        // Compression codings cannot be relayed without un-applying them: refused.
        reject("§6.3 TE gzip, chunked: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.3 TE gzip then chunked in two fields: refused",
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.3 TE chunked, gzip: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.3 TE gzip alone: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.3 TE x-gzip alone: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: x-gzip\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.3 TE br, chunked: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: br, chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.3 TE deflate;q=1 (parameters): refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: deflate;q=1\r\n\r\n",
               .unsupportedTransferEncoding),
        // §6.3 item 4: a final coding other than chunked is read until the connection closes (never reused).
        accept("§6.3 TE xchunked: until close", "HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n",
               framing: .untilClose, keepAlive: false),
        accept("§6.3 TE an unknown coding: until close", "HTTP/1.1 200 OK\r\nTransfer-Encoding: abc123\r\n\r\n",
               framing: .untilClose, keepAlive: false),
        accept("§6.3 TE identity: until close", "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
               framing: .untilClose, keepAlive: false),
        reject("§6.1 TE chunked, then another coding: refused (its framing could not be read)",
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, foo\r\n\r\n", .unsupportedTransferEncoding),
        reject("§6.1 TE chunked with a parameter, then chunked: refused",
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;x=1, chunked\r\n\r\n", .unsupportedTransferEncoding),
        reject("§6.1 TE a quoted coding: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: \"gzip\", chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        reject("§6.3 TE xz, chunked: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: xz, chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        accept("§6.1 TE chunked with a parameter: chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;x=1\r\n\r\n",
               framing: .chunked),
        accept("§6.3 TE an unknown coding, then chunked: chunked",
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: foo, chunked\r\n\r\n", framing: .chunked),
        reject("§6.1 TE chunked twice: refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
               .unsupportedTransferEncoding),
        accept("§6.3 TE gzip, chunked on a 304: no body, nothing to relay",
               "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 304,
               reason: "Not Modified", framing: .none),
        accept("§6.3 TE CHUNKED any case", "HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\n\r\n", framing: .chunked),
        accept("§6.3 HEAD response with Content-Length has no body", "HTTP/1.1 200 OK\r\n\(cl)\r\n", method: .head,
               framing: .none),
        accept("§6.3 HEAD response with chunked has no body", "HTTP/1.1 200 OK\r\n\(te)\r\n", method: .head,
               framing: .none),
        accept("§6.3 HEAD response without framing has no body", "HTTP/1.1 200 OK\r\n\r\n", method: .head, framing: .none),
        accept("§6.3 HEAD 404 has no body", "HTTP/1.1 404 Not Found\r\n\(cl)\r\n", method: .head, status: 404,
               reason: "Not Found", framing: .none),
        accept("§6.3 204 has no body", "HTTP/1.1 204 No Content\r\n\r\n", status: 204, reason: "No Content", framing: .none),
        accept("§6.3 204 with Content-Length: 0", "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", status: 204,
               reason: "No Content", framing: .none),
        accept("§6.3 304 with Content-Length has no body", "HTTP/1.1 304 Not Modified\r\n\(cl)\r\n", status: 304,
               reason: "Not Modified", framing: .none),
        accept("§6.3 100 Continue", "HTTP/1.1 100 Continue\r\n\r\n", status: 100, reason: "Continue", framing: .none),
        accept("§6.3 101 Switching Protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
               status: 101, reason: "Switching Protocols", framing: .none),
        accept("§6.3 103 Early Hints", "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n", status: 103,
               reason: "Early Hints", framing: .none),
        accept("§6.3 1xx with chunked still has no body", "HTTP/1.1 102 Processing\r\n\(te)\r\n", status: 102,
               reason: "Processing", framing: .none),
        accept("§6.3 2xx to CONNECT is a tunnel", "HTTP/1.1 200 Connection Established\r\n\r\n", method: .connect,
               reason: "Connection Established", framing: .none),
        accept("§6.3 407 to CONNECT has a body", "HTTP/1.1 407 Proxy Authentication Required\r\n\(cl)\r\n",
               method: .connect, status: 407, reason: "Proxy Authentication Required", framing: .contentLength(10)),
        accept("§6.3 POST response with Content-Length", "HTTP/1.1 201 Created\r\n\(cl)\r\n", method: .post, status: 201,
               reason: "Created", framing: .contentLength(10)),
        accept("§6.3 repeated identical Content-Length accepted", "HTTP/1.1 200 OK\r\n\(cl)\(cl)\r\n",
               framing: .contentLength(10)),
        accept("§6.3 identical Content-Length list accepted", "HTTP/1.1 200 OK\r\nContent-Length: 10, 10\r\n\r\n",
               framing: .contentLength(10)),

        // §4 status line
        accept("§4 unregistered 299 passes through", "HTTP/1.1 299 Whatever\r\n\(cl)\r\n", status: 299,
               reason: "Whatever", framing: .contentLength(10)),
        accept("§4 unregistered 499 passes through", "HTTP/1.1 499 Client Closed\r\n\(cl)\r\n", status: 499,
               reason: "Client Closed", framing: .contentLength(10)),
        accept("§4 unregistered 599 passes through", "HTTP/1.1 599 Timeout\r\n\(cl)\r\n", status: 599,
               reason: "Timeout", framing: .contentLength(10)),
        accept("§4 999 passes through", "HTTP/1.1 999 Odd\r\n\(cl)\r\n", status: 999, reason: "Odd",
               framing: .contentLength(10)),
        accept("§4 empty reason after SP", "HTTP/1.1 200 \r\n\(cl)\r\n", reason: "", framing: .contentLength(10)),
        accept("§4 missing SP and reason tolerated", "HTTP/1.1 200\r\n\(cl)\r\n", reason: "", framing: .contentLength(10)),
        accept("§4 reason with spaces, HTAB and obs-text", "HTTP/1.1 200 Très\tbien  OK\r\n\(cl)\r\n",
               reason: "Très\tbien  OK", framing: .contentLength(10)),
        accept("RFC 9110 §2.5 HTTP/1.2 processed as HTTP/1.1", "HTTP/1.2 200 OK\r\n\(cl)\r\n", framing: .contentLength(10)),

        // §9 connection management
        accept("§9.3 HTTP/1.0 closes by default", "HTTP/1.0 200 OK\r\n\(cl)\r\n", version: .http10,
               framing: .contentLength(10), keepAlive: false),
        accept("§9.3 HTTP/1.0 with keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\(cl)\r\n",
               version: .http10, framing: .contentLength(10), keepAlive: true),
        accept("§9.6 HTTP/1.1 Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\n\(cl)\r\n",
               framing: .contentLength(10), keepAlive: false),
        accept("§9.6 close-delimited body cannot keep the connection",
               "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n", framing: .untilClose, keepAlive: false),
        accept("§6.1 HTTP/1.0 response with chunked closes",
               "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\(te)\r\n", version: .http10, framing: .chunked,
               keepAlive: false),

        // §2.2 bare LF tolerated in responses
        accept("§2.2 response with bare LF line endings", "HTTP/1.1 200 OK\nContent-Length: 10\n\n",
               framing: .contentLength(10), fields: ["Content-Length: 10"], body: "0123456789"),
        accept("§2.2 response mixing LF and CRLF", "HTTP/1.1 200 OK\r\nA: 1\nContent-Length: 10\r\n\n",
               framing: .contentLength(10), fields: ["A: 1", "Content-Length: 10"]),
        accept("§5 value trimmed in responses", "HTTP/1.1 200 OK\r\nX-A:  a  \r\n\(cl)\r\n", framing: .contentLength(10),
               fields: ["X-A: a", "Content-Length: 10"]),
        accept("limits: response of exactly maxHeadBytes", "HTTP/1.1 204 No Content\r\n\r\n", status: 204,
               reason: "No Content", framing: .none, limits: HeadLimits(maxHeadBytes: 27)),
    ]

    static let invalid: [ResponseRow] = [
        reject("§4 two-digit status", "HTTP/1.1 20 OK\r\n\r\n", .malformedStatusLine),
        reject("§4 four-digit status", "HTTP/1.1 2000 OK\r\n\r\n", .malformedStatusLine),
        reject("§4 status below 100", "HTTP/1.1 099 Low\r\n\r\n", .malformedStatusLine),
        reject("§4 status 000", "HTTP/1.1 000 Zero\r\n\r\n", .malformedStatusLine),
        reject("§4 status not digits", "HTTP/1.1 2x0 OK\r\n\r\n", .malformedStatusLine),
        reject("§4 reason without status", "HTTP/1.1 OK\r\n\r\n", .malformedStatusLine),
        reject("§4 no SP between status and reason", "HTTP/1.1 200OK\r\n\r\n", .malformedStatusLine),
        reject("§4 two spaces before status", "HTTP/1.1  200 OK\r\n\r\n", .malformedStatusLine),
        reject("§4 version is case-sensitive", "http/1.1 200 OK\r\n\r\n", .malformedStatusLine),
        reject("§4 version only", "HTTP/1.1\r\n\r\n", .malformedStatusLine),
        reject("§4 not HTTP at all", "SSH-2.0-OpenSSH_9.6\r\n", .malformedStatusLine),
        reject("§4 control in reason", "HTTP/1.1 200 O\u{01}K\r\n\r\n", .malformedStatusLine),
        reject("§4 DEL in reason", "HTTP/1.1 200 OK\u{7F}\r\n\r\n", .malformedStatusLine),
        reject("§4 empty line before the status line", "\r\nHTTP/1.1 200 OK\r\n\r\n", .malformedStatusLine),
        reject("§2.3 HTTP/2.0 status line", "HTTP/2.0 200 OK\r\n\r\n", .unsupportedVersion),
        reject("§2.3 HTTP/0.9 status line", "HTTP/0.9 200 OK\r\n\r\n", .unsupportedVersion),
        reject("§2.2 bare CR in status line", "HTTP/1.1 200 OK\rX\r\n\r\n", .bareCarriageReturn),
        reject("§2.2 bare CR in field value", "HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", .bareCarriageReturn),
        reject("§2.2 NUL in status line", "HTTP/1.1 200 O\0K\r\n\r\n", .nulByte),
        reject("§2.2 NUL in field value", "HTTP/1.1 200 OK\r\nA: \0\r\n\r\n", .nulByte),
        reject("§5.2 obs-fold in response", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", .obsoleteLineFolding),
        reject("§5.2 obs-fold with bare LF", "HTTP/1.1 200 OK\nA: b\n\tc\n\n", .obsoleteLineFolding),
        reject("§5.1 whitespace before colon in response", "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n",
               .whitespaceBeforeColon),
        reject("§5.1 invalid field name in response", "HTTP/1.1 200 OK\r\nA{B}: c\r\n\r\n", .invalidFieldName),
        reject("§5.5 control in response field value", "HTTP/1.1 200 OK\r\nA: \u{01}\r\n\r\n", .invalidFieldValue),
        reject("§6.3 response with Content-Length and Transfer-Encoding", "HTTP/1.1 200 OK\r\n\(cl)\(te)\r\n",
               .contentLengthWithTransferEncoding),
        reject("§6.3 CL and TE rejected even for HEAD", "HTTP/1.1 200 OK\r\n\(te)\(cl)\r\n",
               .contentLengthWithTransferEncoding, method: .head),
        reject("§6.3 CL with non-chunked TE", "HTTP/1.1 200 OK\r\n\(cl)Transfer-Encoding: gzip\r\n\r\n",
               .contentLengthWithTransferEncoding),
        reject("§6.3 conflicting Content-Length fields", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
               .conflictingContentLength),
        reject("§6.3 conflicting Content-Length list", "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
               .conflictingContentLength),
        reject("§6.3 invalid Content-Length in response", "HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\n",
               .invalidContentLength),
        reject("§6.3 Content-Length +5 in response", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
               .invalidContentLength),
        reject("limits: response head over maxHeadBytes", "HTTP/1.1 200 OK\r\nServer: a long server name\r\n\r\n",
               .headTooLarge, limits: HeadLimits(maxHeadBytes: 32)),
        reject("limits: response status line alone over maxHeadBytes", "HTTP/1.1 200 OK with a long reason",
               .headTooLarge, limits: HeadLimits(maxHeadBytes: 16)),
        reject("limits: too many response fields", "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n", .tooManyHeaderFields,
               limits: HeadLimits(maxHeaderCount: 1)),
    ]

    static let rows = valid + invalid
}

@Suite("ResponseParser")
struct ResponseParserTests {
    @Test("response head", arguments: ResponseTable.rows)
    func responseHead(_ row: ResponseRow) {
        var head = ResponseHead()
        let result = parseResponse(wire(row.input), method: row.method, limits: row.limits, into: &head)
        switch row.expected {
        case .error(let error):
            #expect(result == .failure(error))
        case .head(let expected):
            #expect(result == .success(expected.length))
            if case .success(.some) = result {
                let actual = ResponseExpectation(
                    length: expected.length, status: head.status, reason: string(head.headers, head.reason),
                    version: head.version, framing: head.framing, keepAlive: head.keepAlive,
                    fields: expected.fields == nil ? nil : fieldLines(head.headers))
                #expect(actual == expected)
                #expect(head.isInformational == (expected.status < 200))
            }
        }
    }

    @Test("every prefix", arguments: ResponseTable.rows)
    func prefixes(_ row: ResponseRow) {
        let bytes = wire(row.input)
        var head = ResponseHead()
        switch row.expected {
        case .head(let expected):
            for k in 0..<expected.length {
                let result = parseResponse(Array(bytes[0..<k]), method: row.method, limits: row.limits, into: &head)
                #expect(result == .success(nil), "prefix of \(k) bytes")
            }
        case .error(let error):
            for k in 0..<bytes.count {
                let result = parseResponse(Array(bytes[0..<k]), method: row.method, limits: row.limits, into: &head)
                #expect(result == .success(nil) || result == .failure(error), "prefix of \(k) bytes: \(result)")
            }
        }
    }

    @Test("reused response head keeps no stale state")
    func reuse() {
        var head = ResponseHead()
        let first = wire("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 3\r\n\r\nabc")
        #expect(parseResponse(first, method: .get, into: &head) == .success(first.count - 3))
        #expect(parseResponse(wire("HTTP/1.1 200 OK\r\nA: 1\r\nB"), method: .get, into: &head) == .success(nil))
        #expect(head.headers.count == 0 && head.headers.storage.isEmpty && head.status == 0)
        #expect(parseResponse(wire("HTTP/1.1 200 OK\r\nA: 1\r\nB : 2\r\n"), method: .get, into: &head)
                == .failure(.whitespaceBeforeColon))
        #expect(head.headers.count == 0 && head.reason == .empty)
        let second = wire("HTTP/1.0 304 \r\nETag: \"x\"\r\n\r\n")
        #expect(parseResponse(second, method: .get, into: &head) == .success(second.count))
        #expect(fieldLines(head.headers) == ["ETag: \"x\""])
        #expect(head.status == 304)
        #expect(string(head.headers, head.reason) == "")
        #expect(head.framing == .none)
        #expect(head.version == .http10)
        #expect(head.keepAlive == false)
        #expect(head.headers.storage == second)
    }
}
