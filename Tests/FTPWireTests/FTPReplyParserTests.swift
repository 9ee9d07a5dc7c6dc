import Testing
import FTPWire

struct ReplyRow: Sendable, CustomTestStringConvertible {
    enum Expected: Sendable {
        /// Each reply as code and lines.
        case replies([(Int, [String])])
        case error(FTPWireError)
    }

    var name: String
    var input: String
    var maxLineBytes = 8_192
    var maxLines = 256
    var maxReplyBytes = 65_536
    var expected: Expected

    var testDescription: String { name }

    var outcome: ReplyOutcome {
        switch expected {
        case .replies(let replies): return .replies(replies.map { FTPReply(code: $0.0, lines: $0.1.map(wire)) })
        case .error(let error): return .failed(error)
        }
    }
}

enum ReplyTable {
    static func parse(_ name: String, _ input: String, _ replies: [(Int, [String])], maxLineBytes: Int = 8_192,
                      maxLines: Int = 256, maxReplyBytes: Int = 65_536) -> ReplyRow {
        ReplyRow(name: name, input: input, maxLineBytes: maxLineBytes, maxLines: maxLines, maxReplyBytes: maxReplyBytes,
                 expected: .replies(replies))
    }

    static func reject(_ name: String, _ input: String, _ error: FTPWireError, maxLineBytes: Int = 8_192,
                       maxLines: Int = 256, maxReplyBytes: Int = 65_536) -> ReplyRow {
        ReplyRow(name: name, input: input, maxLineBytes: maxLineBytes, maxLines: maxLines, maxReplyBytes: maxReplyBytes,
                 expected: .error(error))
    }

    static let valid: [ReplyRow] = [
        parse("one line", "220 Service ready\r\n", [(220, ["Service ready"])]),
        parse("bare LF ending", "220 Service ready\n", [(220, ["Service ready"])]),
        parse("code without text", "200\r\n", [(200, [""])]),
        parse("code and a space", "200 \r\n", [(200, [""])]),
        parse("lowest code", "100 x\r\n", [(100, ["x"])]),
        parse("highest code", "599 x\r\n", [(599, ["x"])]),
        parse("§4.2 multi-line, intermediate lines with prefix", "230-Welcome\r\n230-to the server\r\n230 Logged in\r\n",
              [(230, ["Welcome", "to the server", "Logged in"])]),
        parse("§4.2 multi-line, intermediate lines without prefix", "211-Features:\r\n MDTM\r\n SIZE\r\n211 End\r\n",
              [(211, ["Features:", " MDTM", " SIZE", "End"])]),
        parse("§4.2 intermediate line starting with another code", "230-a\r\n220 not the end\r\n230 end\r\n",
              [(230, ["a", "220 not the end", "end"])]),
        parse("§4.2 intermediate line that is the code with a hyphen", "230-a\r\n230-\r\n230 end\r\n",
              [(230, ["a", "", "end"])]),
        parse("§4.2 intermediate line starting with digits and letters", "230-a\r\n2301 b\r\n230 end\r\n",
              [(230, ["a", "2301 b", "end"])]),
        parse("§4.2 empty intermediate line", "220-a\r\n\r\n220 end\r\n", [(220, ["a", "", "end"])]),
        parse("last line of a multi-line reply is the bare code", "220-a\r\n220\r\n", [(220, ["a", ""])]),
        parse("two replies in one read", "331 Password required\r\n230 Logged in\r\n",
              [(331, ["Password required"]), (230, ["Logged in"])]),
        parse("empty lines between replies are skipped", "\r\n\n220 ready\r\n\r\n", [(220, ["ready"])]),
        parse("a bare CR inside a line is text", "220 a\rb\r\n", [(220, ["a\rb"])]),
        parse("non-ASCII text", "550 Datei \u{00FC}\r\n", [(550, ["Datei \u{00FC}"])]),
        parse("limits: line of exactly maxLineBytes", "220 abcd\r\n", [(220, ["abcd"])], maxLineBytes: 8),
        parse("limits: line of exactly maxLineBytes with a bare LF", "220 abcd\n", [(220, ["abcd"])], maxLineBytes: 8),
        parse("limits: exactly maxLines", "220-a\r\n b\r\n220 c\r\n", [(220, ["a", " b", "c"])], maxLines: 3),
        parse("limits: reply of exactly maxReplyBytes", "220-a\r\n220 b\r\n", [(220, ["a", "b"])], maxReplyBytes: 14),
        parse("limits: the reply limit is per reply", "220 a\r\n220 b\r\n220 c\r\n", [(220, ["a"]), (220, ["b"]), (220, ["c"])],
              maxReplyBytes: 7),
    ]

    static let invalid: [ReplyRow] = [
        reject("first digit 6", "600 x\r\n", .malformedReply),
        reject("first digit 0", "099 x\r\n", .malformedReply),
        reject("two digits", "20 x\r\n", .malformedReply),
        reject("four digits", "2200 x\r\n", .malformedReply),
        reject("letters", "abc x\r\n", .malformedReply),
        reject("code followed by a letter", "220x\r\n", .malformedReply),
        reject("code followed by a tab", "220\tx\r\n", .malformedReply),
        reject("leading space", " 220 x\r\n", .malformedReply),
        reject("second reply malformed", "220 ok\r\nhello\r\n", .malformedReply),
        reject("limits: line one over maxLineBytes", "220 abcde\r\n", .replyLineTooLong, maxLineBytes: 8),
        reject("limits: line over maxLineBytes before its end arrives", "220 abcdefghijklmnop", .replyLineTooLong,
               maxLineBytes: 8),
        reject("limits: a CR inside a line at the limit", "220 abcd\rx\r\n", .replyLineTooLong, maxLineBytes: 8),
        reject("limits: intermediate line over maxLineBytes", "220-a\r\n 0123456789\r\n220 b\r\n", .replyLineTooLong,
               maxLineBytes: 8),
        reject("limits: one line over maxLines", "220-a\r\n b\r\n c\r\n220 d\r\n", .tooManyReplyLines, maxLines: 3),
        reject("limits: endless multi-line reply", "220-a\r\n" + String(repeating: " more\r\n", count: 300),
               .tooManyReplyLines),
        reject("limits: multi-line start when maxLines is 1", "220-a\r\n220 b\r\n", .tooManyReplyLines, maxLines: 1),
        reject("limits: reply one byte over maxReplyBytes", "220-a\r\n220 bc\r\n", .replyTooLarge, maxReplyBytes: 14),
        reject("limits: reply over maxReplyBytes before its end arrives", "220-a\r\n" + String(repeating: "x", count: 40),
               .replyTooLarge, maxLineBytes: 100, maxReplyBytes: 20),
    ]

    static let rows = valid + invalid
}

@Suite("FTPReplyParser")
struct FTPReplyParserTests {
    @Test("whole input at once", arguments: ReplyTable.rows)
    func whole(_ row: ReplyRow) {
        let input = wire(row.input)
        #expect(parseReplies(input, segments: [input.count], maxLineBytes: row.maxLineBytes, maxLines: row.maxLines,
                             maxReplyBytes: row.maxReplyBytes) == row.outcome)
    }

    @Test("split at every byte boundary", arguments: ReplyTable.rows)
    func everySplit(_ row: ReplyRow) {
        let input = wire(row.input)
        for cut in 1..<max(input.count, 1) {
            let outcome = parseReplies(input, segments: [cut, input.count - cut], maxLineBytes: row.maxLineBytes,
                                       maxLines: row.maxLines, maxReplyBytes: row.maxReplyBytes)
            #expect(outcome == row.outcome, "split at \(cut)")
        }
    }

    @Test("one byte at a time", arguments: ReplyTable.rows)
    func byteByByte(_ row: ReplyRow) {
        let input = wire(row.input)
        #expect(parseReplies(input, segments: Array(repeating: 1, count: input.count), maxLineBytes: row.maxLineBytes,
                             maxLines: row.maxLines, maxReplyBytes: row.maxReplyBytes) == row.outcome)
    }

    @Test("a reply is given only when its last line is complete")
    func partial() throws {
        var parser = FTPReplyParser()
        #expect(try parser.feed(wire("230-Welcome\r\n230 Logged")).isEmpty)
        #expect(parser.isInsideReply)
        #expect(try parser.feed(wire(" in\r")).isEmpty)
        #expect(try parser.feed(wire("\n")) == [FTPReply(code: 230, lines: [wire("Welcome"), wire("Logged in")])])
        #expect(!parser.isInsideReply)
    }

    @Test("a huge reply never holds more than the limit")
    func boundedMemory() {
        var parser = FTPReplyParser(maxLineBytes: 64, maxLines: 1_000, maxReplyBytes: 1_024)
        var thrown: FTPWireError?
        do throws(FTPWireError) {
            _ = try parser.feed(wire("220-start\r\n"))
            for _ in 0..<1_000 { _ = try parser.feed(wire(" another line of text\r\n")) }
        } catch {
            thrown = error
        }
        #expect(thrown == .replyTooLarge)
    }

    @Test("text for an error body: code, lines joined with LF, controls removed, bounded")
    func errorText() {
        let reply = FTPReply(code: 550, lines: [wire("No such\u{1B}[31m file\r"), wire("\tsecond\u{0}line")])
        #expect(text(reply.text()) == "550 No such[31m file\n\tsecondline")
        #expect(text(FTPReply(550, "abcdefgh").text(maxBytes: 6)) == "550 ab")
        #expect(text(FTPReply(code: 226, lines: [[]]).text()) == "226 ")
    }
}
