import Testing
import HTTPWire

struct ReasonRow: Sendable, CustomTestStringConvertible {
    var status: Int
    var phrase: String
    var testDescription: String { "RFC 9110 §15 \(status) \(phrase)" }
}

struct NumberRow: Sendable, CustomTestStringConvertible {
    var value: Int
    var decimal: String
    var hex: String?
    var testDescription: String { "\(value)" }
}

@Suite("MessageWriter")
struct MessageWriterTests {
    static let reasons: [ReasonRow] = [
        ReasonRow(status: 100, phrase: "Continue"), ReasonRow(status: 101, phrase: "Switching Protocols"),
        ReasonRow(status: 102, phrase: "Processing"), ReasonRow(status: 103, phrase: "Early Hints"),
        ReasonRow(status: 200, phrase: "OK"), ReasonRow(status: 204, phrase: "No Content"),
        ReasonRow(status: 206, phrase: "Partial Content"), ReasonRow(status: 301, phrase: "Moved Permanently"),
        ReasonRow(status: 304, phrase: "Not Modified"), ReasonRow(status: 308, phrase: "Permanent Redirect"),
        ReasonRow(status: 400, phrase: "Bad Request"), ReasonRow(status: 407, phrase: "Proxy Authentication Required"),
        ReasonRow(status: 413, phrase: "Content Too Large"), ReasonRow(status: 414, phrase: "URI Too Long"),
        ReasonRow(status: 418, phrase: "I'm a teapot"), ReasonRow(status: 421, phrase: "Misdirected Request"),
        ReasonRow(status: 429, phrase: "Too Many Requests"),
        ReasonRow(status: 431, phrase: "Request Header Fields Too Large"),
        ReasonRow(status: 451, phrase: "Unavailable For Legal Reasons"),
        ReasonRow(status: 500, phrase: "Internal Server Error"), ReasonRow(status: 501, phrase: "Not Implemented"),
        ReasonRow(status: 502, phrase: "Bad Gateway"), ReasonRow(status: 504, phrase: "Gateway Timeout"),
        ReasonRow(status: 505, phrase: "HTTP Version Not Supported"),
        ReasonRow(status: 511, phrase: "Network Authentication Required"),
        ReasonRow(status: 299, phrase: "Unknown"), ReasonRow(status: 427, phrase: "Unknown"),
        ReasonRow(status: 999, phrase: "Unknown"), ReasonRow(status: 0, phrase: "Unknown"),
    ]

    @Test("reason phrase", arguments: reasons)
    func reason(_ row: ReasonRow) {
        #expect(reasonPhrase(for: row.status).description == row.phrase)
    }

    @Test("every code in the documented ranges has a phrase")
    func documentedRanges() {
        let ranges = [100...103, 200...206, 300...308, 400...418, 421...426, 428...429, 431...431, 451...451,
                      500...505, 511...511]
        for code in ranges.joined() {
            #expect(reasonPhrase(for: code).description != "Unknown", "\(code)")
        }
    }

    static let numbers: [NumberRow] = [
        NumberRow(value: 0, decimal: "0", hex: "0"), NumberRow(value: 9, decimal: "9", hex: "9"),
        NumberRow(value: 10, decimal: "10", hex: "a"), NumberRow(value: 255, decimal: "255", hex: "ff"),
        NumberRow(value: 4096, decimal: "4096", hex: "1000"),
        NumberRow(value: 1 << 62, decimal: "4611686018427387904", hex: "4000000000000000"),
        NumberRow(value: Int.max, decimal: "9223372036854775807", hex: "7fffffffffffffff"),
        NumberRow(value: -42, decimal: "-42", hex: nil),
        NumberRow(value: Int.min, decimal: "-9223372036854775808", hex: nil),
    ]

    @Test("numbers", arguments: numbers)
    func number(_ row: NumberRow) {
        var w = MessageWriter(capacity: 4)
        w.appendDecimal(row.value)
        #expect(w.bytes == wire(row.decimal))
        if let hex = row.hex {
            w.reset()
            w.appendHex(row.value)
            #expect(w.bytes == wire(hex))
        }
    }

    @Test("appends")
    func appends() {
        var w = MessageWriter()
        w.appendStatusLine(404, reason: reasonPhrase(for: 404))
        w.appendField("Content-Length", "0")
        w.append("X: ")
        w.append([0x61, 0x62])
        w.appendString(String("é"))
        wire("!").withUnsafeBytes { w.append($0) }
        w.append("\r\n")
        #expect(w.bytes == wire("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nX: abé!\r\n"))
        let capacity = w.capacity
        w.reset()
        #expect(w.bytes.isEmpty)
        #expect(w.capacity == capacity)
    }

    @Test("copies do not see each other's writes, and growth keeps what was written")
    func copyOnWrite() {
        var a = MessageWriter(capacity: 4)
        a.append("abc")
        var b = a
        b.append("def")
        a.append("X")
        #expect(a.bytes == wire("abcX"))
        #expect(b.bytes == wire("abcdef"))
        var c = b
        c.reset()
        c.append("zz")
        #expect(b.bytes == wire("abcdef"))
        #expect(c.bytes == wire("zz"))
        var big = MessageWriter(capacity: 1)
        for i in 0..<1_000 { big.appendDecimal(i % 10) }
        #expect(big.count == 1_000)
        #expect(big.bytes == (0..<1_000).map { UInt8(0x30 + $0 % 10) })
        big.withBytes { #expect($0.count == 1_000) }
    }

    @Test("chunk framing")
    func chunks() {
        var w = MessageWriter()
        w.appendChunkHeader(size: 26)
        w.append("abcdefghijklmnopqrstuvwxyz")
        w.append(ChunkedFraming.chunkEnd)
        w.append(ChunkedFraming.lastChunk)
        let expected = "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n"
        #expect(w.bytes == wire(expected))
        // What the writer frames, the decoder reads back.
        #expect(decodeChunked(w.bytes, segments: [w.bytes.count]) ==
                .decoded(payload: wire("abcdefghijklmnopqrstuvwxyz"), consumed: w.bytes.count))
    }

    @Test("fields copied as they arrived")
    func copyFields() {
        var head = RequestHead()
        let input = wire("GET / HTTP/1.1\r\nHost:  example.com \r\nX-Empty:\r\nX-Obs: é\r\n\r\n")
        #expect(parseRequest(input, into: &head) == .success(input.count))
        var w = MessageWriter()
        for i in 0..<head.headers.count { w.appendField(at: i, of: head.headers) }
        #expect(w.bytes == wire("Host: example.com\r\nX-Empty: \r\nX-Obs: é\r\n"))
    }
}

@Suite("HTTPWireError")
struct HTTPWireErrorTests {
    static let all: [HTTPWireError] = [
        .headTooLarge, .tooManyHeaderFields, .requestLineTooLong, .malformedRequestLine, .invalidMethod,
        .invalidTarget, .unsupportedVersion, .malformedStatusLine, .invalidFieldName, .whitespaceBeforeColon,
        .obsoleteLineFolding, .bareCarriageReturn, .nulByte, .invalidFieldValue, .bareLineFeed, .invalidHost,
        .invalidContentLength, .conflictingContentLength, .contentLengthWithTransferEncoding,
        .unsupportedTransferEncoding, .invalidChunkSize, .invalidChunkExtension, .chunkLineTooLong,
        .invalidChunkTerminator, .invalidTrailer,
    ]

    /// The tables name every error case at least once.
    @Test("every error case has a row")
    func coverage() {
        var seen: [HTTPWireError] = []
        for row in RequestTable.rows + SmugglingCorpus.rows { if case .error(let e) = row.expected { seen.append(e) } }
        for row in ResponseTable.rows { if case .error(let e) = row.expected { seen.append(e) } }
        for row in ChunkedTable.rows { if case .error(let e) = row.expected { seen.append(e) } }
        for row in TargetTable.rows { if case .failure(let e) = row.expected { seen.append(e) } }
        for error in Self.all { #expect(seen.contains(error), "no row for \(error)") }
    }

    @Test("request status codes")
    func statuses() {
        #expect(HTTPWireError.headTooLarge.requestStatus == 431)
        #expect(HTTPWireError.requestLineTooLong.requestStatus == 414)
        #expect(HTTPWireError.unsupportedVersion.requestStatus == 505)
        #expect(HTTPWireError.unsupportedTransferEncoding.requestStatus == 501)
        #expect(HTTPWireError.bareLineFeed.requestStatus == 400)
        for error in Self.all { #expect(!error.reason.isEmpty) }
    }

    @Test("row count")
    func rowCount() {
        let total = RequestTable.rows.count + SmugglingCorpus.rows.count + ResponseTable.rows.count
            + ChunkedTable.rows.count + TargetTable.rows.count + HopTable.rows.count
            + MessageWriterTests.reasons.count + MessageWriterTests.numbers.count
        #expect(total > 150)
    }
}
