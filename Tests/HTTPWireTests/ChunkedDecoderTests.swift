import Testing
import HTTPWire

struct ChunkedRow: Sendable, CustomTestStringConvertible {
    enum Expected: Sendable {
        /// The payload, and how many input bytes the body takes (the rest is the next message).
        case payload(String, consumed: Int)
        case error(HTTPWireError)
    }

    var name: String
    var input: String
    var maxLineBytes: Int
    var maxTrailerBytes: Int
    var expected: Expected

    var testDescription: String { name }
}

enum ChunkedTable {
    /// `body` is a whole chunked body; `next` follows it and must be left alone.
    static func decode(_ name: String, _ body: String, _ payload: String, next: String = "",
                       maxLineBytes: Int = 4_096, maxTrailerBytes: Int = 16_384) -> ChunkedRow {
        ChunkedRow(name: name, input: body + next, maxLineBytes: maxLineBytes, maxTrailerBytes: maxTrailerBytes,
                   expected: .payload(payload, consumed: body.utf8.count))
    }

    static func reject(_ name: String, _ input: String, _ error: HTTPWireError, maxLineBytes: Int = 4_096,
                       maxTrailerBytes: Int = 16_384) -> ChunkedRow {
        ChunkedRow(name: name, input: input, maxLineBytes: maxLineBytes, maxTrailerBytes: maxTrailerBytes,
                   expected: .error(error))
    }

    static let hundred = String(repeating: "0123456789", count: 10)

    static let valid: [ChunkedRow] = [
        decode("§7.1 one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1 empty body: last chunk only", "0\r\n\r\n", ""),
        decode("§7.1 several chunks", "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", "hello world"),
        decode("§7.1 uppercase hex size", "A\r\n0123456789\r\n0\r\n\r\n", "0123456789"),
        decode("§7.1 lowercase hex size", "a\r\n0123456789\r\n0\r\n\r\n", "0123456789"),
        decode("§7.1 two-digit hex size 0x64", "64\r\n\(hundred)\r\n0\r\n\r\n", hundred),
        decode("§7.1 leading zeros in size", "0005\r\nhello\r\n000\r\n\r\n", "hello"),
        decode("§7.1 data that looks like framing", "7\r\n\r\n0\r\n\r\n\r\n0\r\n\r\n", "\r\n0\r\n\r\n"),
        decode("§7.1 binary-ish data with CR and LF", "4\r\n\r\r\n\n\r\n0\r\n\r\n", "\r\r\n\n"),
        decode("§7.1 one-byte chunks", "1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n", "abc"),
        decode("§7.1 next message left alone", "3\r\nabc\r\n0\r\n\r\n", "abc", next: "GET / HTTP/1.1\r\n\r\n"),
        decode("§7.1 next message that starts with digits", "0\r\n\r\n", "", next: "5\r\nhello\r\n"),
        decode("§7.1.1 extension without value", "5;flag\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 extension with token value", "5;name=value\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 several extensions", "5;a=1;b;c=x\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 quoted-string value", "5;a=\"x y;z=\\\"q\\\"\"\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 empty quoted-string value", "5;a=\"\"\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 obs-text in quoted-string", "5;a=\"é\"\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 BWS before semicolon: 5 ;ext", "5 ;ext\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 BWS after semicolon", "5;\text\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 BWS around equals", "5;a = b ;c\t=\t\"d\"\r\nhello\r\n0\r\n\r\n", "hello"),
        decode("§7.1.1 extension on the last chunk", "5\r\nhello\r\n0;end=1\r\n\r\n", "hello"),
        decode("§7.1.2 one trailer field", "5\r\nhello\r\n0\r\nExpires: never\r\n\r\n", "hello"),
        decode("§7.1.2 several trailer fields", "0\r\nA: 1\r\nB:2\r\nC:\r\n\r\n", ""),
        decode("§7.1.2 trailer value with obs-text and HTAB", "0\r\nX-Sum: ü\tß \r\n\r\n", ""),
        decode("§7.1.2 trailer followed by the next message", "0\r\nA: 1\r\n\r\n", "", next: "HTTP/1.1 200 OK\r\n"),
        decode("limits: size line of exactly maxLineBytes", "5;abcdefg\r\nhello\r\n0\r\n\r\n", "hello", maxLineBytes: 9),
        decode("limits: trailer of exactly maxTrailerBytes", "0\r\nA: 12\r\n\r\n", "", maxTrailerBytes: 7),
        decode("limits: maxTrailerBytes 0 allows an empty trailer", "0\r\n\r\n", "", maxTrailerBytes: 0),
    ]

    static let invalid: [ChunkedRow] = [
        // §7.1 chunk-size
        reject("§7.1 chunk size 0x5", "0x5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 chunk size with leading +", "+5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 chunk size with leading -", "-5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 chunk size with leading space", " 5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 chunk size with leading HTAB", "\t5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 chunk size with trailing space only", "5 \r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 chunk size not hex", "g\r\n", .invalidChunkSize),
        reject("§7.1 empty size line", "\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 space inside the size", "1 0\r\n", .invalidChunkSize),
        reject("§7.1 size just over 2^62", "4000000000000001\r\n", .invalidChunkSize),
        reject("§7.1 size overflowing 64 bits", "FFFFFFFFFFFFFFFFFF\r\n", .invalidChunkSize),
        reject("§7.1 size 2^64+5 that wraps to 5 if unchecked", "10000000000000005\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 LF-only size line", "5\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 LF-only size line with extension", "5;a=b\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        reject("§7.1 LF-only last-chunk line", "5\r\nhello\r\n0\n\r\n", .invalidChunkSize),
        reject("§7.1 bare CR in the size line", "5\rhello\r\n", .invalidChunkSize),
        reject("§7.1 NUL in the size line", "5\0\r\nhello\r\n", .invalidChunkSize),

        // §7.1.1 chunk extensions
        reject("§7.1.1 empty extension name", "5;\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 extension value without name", "5;=x\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 extension with empty value", "5;a=\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 unterminated quoted-string", "5;a=\"x\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 two tokens in a value", "5;a=b c\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 space inside the name", "5;a b\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 value not a token", "5;a=@\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 control in a token", "5;a=\u{01}\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 control in a quoted-string", "5;a=\"\u{01}\"\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 trailing whitespace after an extension", "5;a \r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 missing semicolon between extensions", "5;a=1 b=2\r\nhello\r\n0\r\n\r\n", .invalidChunkExtension),
        reject("§7.1.1 bare CR in an extension", "5;a\rb\r\nhello\r\n", .invalidChunkExtension),

        // §7.1 CRLF after data
        reject("§7.1 data followed by LF only", "5\r\nhello\n0\r\n\r\n", .invalidChunkTerminator),
        reject("§7.1 data longer than its size", "5\r\nhelloX\r\n0\r\n\r\n", .invalidChunkTerminator),
        reject("§7.1 data followed by CR and no LF", "5\r\nhello\r0\r\n\r\n", .invalidChunkTerminator),
        reject("§7.1 data shorter than its size (TE.CL style)", "6\r\nhello\r\n0\r\n\r\n", .invalidChunkTerminator),

        // §7.1.2 trailer section
        reject("§7.1.2 trailer field name with space", "0\r\nBad Name: x\r\n\r\n", .invalidTrailer),
        reject("§7.1.2 trailer whitespace before colon", "0\r\nA : x\r\n\r\n", .invalidTrailer),
        reject("§7.1.2 trailer without colon", "0\r\nNoColon\r\n\r\n", .invalidTrailer),
        reject("§7.1.2 trailer with empty name", "0\r\n: x\r\n\r\n", .invalidTrailer),
        reject("§7.1.2 trailer obs-fold", "0\r\nA: x\r\n y\r\n\r\n", .invalidTrailer),
        reject("§7.1.2 trailer control in value", "0\r\nA: \u{01}\r\n\r\n", .invalidTrailer),
        reject("§7.1.2 trailer NUL in value", "0\r\nA: x\0\r\n\r\n", .invalidTrailer),
        reject("§7.1.2 trailer line ended by bare LF", "0\r\nA: x\n\r\n", .invalidTrailer),
        reject("§7.1.2 final empty line is a bare LF", "0\r\nA: x\r\n\n", .invalidTrailer),
        reject("§7.1.2 last chunk followed by bare LF", "0\r\n\n", .invalidTrailer),
        reject("§7.1.2 bare CR in the trailer", "0\r\n\rX", .invalidTrailer),
        reject("limits: trailer one byte over maxTrailerBytes", "0\r\nA: 123\r\n\r\n", .invalidTrailer, maxTrailerBytes: 7),
        reject("limits: trailer total over maxTrailerBytes", "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", .invalidTrailer,
               maxTrailerBytes: 12),
        reject("limits: maxTrailerBytes 0 refuses trailer fields", "0\r\nA: 1\r\n\r\n", .invalidTrailer, maxTrailerBytes: 0),

        // Line limits
        reject("limits: size line one byte over maxLineBytes", "5;abcdefgh\r\nhello\r\n0\r\n\r\n", .chunkLineTooLong,
               maxLineBytes: 9),
        reject("limits: size line too long before CRLF arrives", "5;aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", .chunkLineTooLong,
               maxLineBytes: 16),
        reject("limits: endless leading zeros", String(repeating: "0", count: 40), .chunkLineTooLong, maxLineBytes: 16),
        reject("limits: trailer line over maxLineBytes", "0\r\nA: 0123456789abcdef\r\n\r\n", .chunkLineTooLong,
               maxLineBytes: 16),
        // Found by fuzzing: a line one byte over the limit that ends in a bare LF was "bare LF" when
        // it arrived whole and "too long" when it arrived in pieces. Now always "too long".
        reject("fuzz: trailer line of maxLineBytes + 1 ending in a bare LF", "0\r\nA:" + String(repeating: "x", count: 15)
               + "\n\r\n", .chunkLineTooLong, maxLineBytes: 16),
        reject("fuzz: size line of maxLineBytes + 1 ending in a bare LF", "5;" + String(repeating: "a", count: 15)
               + "\nhello\r\n", .chunkLineTooLong, maxLineBytes: 16),
        reject("limits: trailer line of maxLineBytes ending in a bare LF", "0\r\nA:" + String(repeating: "x", count: 14)
               + "\n\r\n", .invalidTrailer, maxLineBytes: 16),
        reject("limits: size line of maxLineBytes ending in a bare LF", "5;" + String(repeating: "a", count: 14)
               + "\nhello\r\n", .invalidChunkSize, maxLineBytes: 16),
    ]

    static let rows = valid + invalid
}

@Suite("ChunkedDecoder")
struct ChunkedDecoderTests {
    static func expected(_ row: ChunkedRow) -> ChunkedOutcome {
        switch row.expected {
        case .payload(let payload, let consumed): return .decoded(payload: wire(payload), consumed: consumed)
        case .error(let error): return .failed(error)
        }
    }

    @Test("whole input at once", arguments: ChunkedTable.rows)
    func whole(_ row: ChunkedRow) {
        let input = wire(row.input)
        let outcome = decodeChunked(input, segments: [input.count], maxLineBytes: row.maxLineBytes,
                                    maxTrailerBytes: row.maxTrailerBytes)
        #expect(outcome == Self.expected(row))
    }

    @Test("split at every byte boundary", arguments: ChunkedTable.rows)
    func everySplit(_ row: ChunkedRow) {
        let input = wire(row.input)
        let expected = Self.expected(row)
        for cut in 1..<max(input.count, 1) {
            let outcome = decodeChunked(input, segments: split(input.count, at: cut), maxLineBytes: row.maxLineBytes,
                                        maxTrailerBytes: row.maxTrailerBytes)
            #expect(outcome == expected, "split at \(cut)")
        }
    }

    @Test("one byte at a time", arguments: ChunkedTable.rows)
    func byteByByte(_ row: ChunkedRow) {
        let input = wire(row.input)
        let outcome = decodeChunked(input, segments: Array(repeating: 1, count: input.count),
                                    maxLineBytes: row.maxLineBytes, maxTrailerBytes: row.maxTrailerBytes)
        #expect(outcome == Self.expected(row))
    }

    /// A strict prefix of a valid body never fails and never finishes.
    @Test("truncated bodies are incomplete", arguments: ChunkedTable.valid)
    func truncated(_ row: ChunkedRow) {
        guard case .payload(_, let consumed) = row.expected else { return }
        let input = wire(row.input)
        for k in 0..<consumed {
            let outcome = decodeChunked(Array(input[0..<k]), segments: [k], maxLineBytes: row.maxLineBytes,
                                        maxTrailerBytes: row.maxTrailerBytes)
            guard case .incomplete = outcome else {
                Issue.record("prefix of \(k) bytes: \(outcome)")
                continue
            }
        }
    }

    @Test("data steps never pass the chunk or the input")
    func dataBounds() {
        var d = ChunkedDecoder()
        let input = wire("a\r\n0123456789\r\n0\r\n\r\n")
        #expect(stepDecoder(&d, input, 0..<2) == .success(.needMore))
        #expect(stepDecoder(&d, input, 0..<6) == .success(.framing(consumed: 3)))
        // Only 3 of the 10 bytes arrived.
        #expect(stepDecoder(&d, input, 3..<6) == .success(.data(count: 3)))
        #expect(stepDecoder(&d, input, 6..<6) == .success(.needMore))
        // Everything: the data step stops at the chunk's end.
        #expect(stepDecoder(&d, input, 6..<input.count) == .success(.data(count: 7)))
        // CRLF after the data and the last-chunk line; the trailer has not arrived.
        #expect(stepDecoder(&d, input, 13..<18) == .success(.framing(consumed: 5)))
        #expect(!d.isDone)
        #expect(stepDecoder(&d, input, 18..<input.count) == .success(.done(consumed: 2)))
        #expect(d.isDone)
        #expect(stepDecoder(&d, input, 20..<input.count) == .success(.done(consumed: 0)))
        #expect(stepDecoder(&d, wire("garbage")) == .success(.done(consumed: 0)))
    }

    @Test("largest chunk size 2^62 is accepted")
    func largestSize() {
        var d = ChunkedDecoder()
        let input = wire("4000000000000000\r\nabc")
        #expect(stepDecoder(&d, input) == .success(.framing(consumed: 18)))
        #expect(stepDecoder(&d, input, 18..<input.count) == .success(.data(count: 3)))
    }

    @Test("CRLF after data and the next size line are one framing step")
    func combinedFraming() {
        var d = ChunkedDecoder()
        let input = wire("1\r\nx\r\n2;e=1\r\nyz\r\n0\r\nT: 1\r\n\r\nNEXT")
        #expect(stepDecoder(&d, input) == .success(.framing(consumed: 3)))
        #expect(stepDecoder(&d, input, 3..<input.count) == .success(.data(count: 1)))
        #expect(stepDecoder(&d, input, 4..<input.count) == .success(.framing(consumed: 9)))
        #expect(stepDecoder(&d, input, 13..<input.count) == .success(.data(count: 2)))
        #expect(stepDecoder(&d, input, 15..<input.count) == .success(.done(consumed: 13)))
        #expect(input[(15 + 13)...].elementsEqual(wire("NEXT")))
    }

    @Test("empty input")
    func emptyInput() {
        var d = ChunkedDecoder()
        #expect(stepDecoder(&d, []) == .success(.needMore))
        #expect(!d.isDone)
    }
}
