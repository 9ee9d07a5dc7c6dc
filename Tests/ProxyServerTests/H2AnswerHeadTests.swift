import HTTP2
import HTTPWire
import Testing
@testable import ProxyServer

/// What `H2AnswerHead` read from `text`: the head's length, status, framing and fields, or its error.
private struct Read {
    var length: Int?
    var status = 0
    var framing: BodyFraming = .none
    var fields: [String] = []
    var error: HTTPWireError?
}

private func read(_ text: String, method: HTTPMethod = .get, into head: inout H2AnswerHead) -> Read {
    let bytes = Array(text.utf8)
    var out = Read()
    let result = bytes.withUnsafeBytes { p in Result { () throws(HTTPWireError) in try head.read(p, method: method) } }
    switch result {
    case .success(let length): out.length = length
    case .failure(let error):
        out.error = error
        return out
    }
    guard out.length != nil else { return out }
    out.status = head.status
    out.framing = head.framing
    out.fields = head.names.withUnsafeBytes { names in
        head.spans.map { s in
            String(decoding: names[s.nameStart..<(s.nameStart + s.nameCount)], as: UTF8.self) + "="
                + String(decoding: bytes[s.valueStart..<(s.valueStart + s.valueCount)], as: UTF8.self)
        }
    }
    return out
}

private func read(_ text: String, method: HTTPMethod = .get) -> Read {
    var head = H2AnswerHead()
    return read(text, method: method, into: &head)
}

@Suite struct H2AnswerHeadTests {
    @Test func aHitsHeadIsReadWithItsNamesLoweredAndItsValuesTrimmed() {
        let text = "HTTP/1.1 200 OK\r\nContent-Type:  text/plain \r\nCache-Status: Larder; hit\r\nX-Custom-Header-Name: a\tb\r\nContent-Length: 3\r\n\r\nabc"
        let r = read(text)
        #expect(r.length == text.utf8.count - 3)
        #expect(r.status == 200 && r.framing == .contentLength(3))
        #expect(r.fields == ["content-type=text/plain", "cache-status=Larder; hit", "x-custom-header-name=a\tb",
                             "content-length=3"])
    }

    @Test(arguments: [
        // The connection's own fields stay with HTTP/1.1; a WebSocket's accept key goes with its upgrade.
        ("HTTP/1.1 200 OK\r\nConnection: close\r\nKeep-Alive: 5\r\nProxy-Connection: x\r\nUpgrade: h2c\r\nTE: trailers\r\nTrailer: x\r\nSec-WebSocket-Accept: k\r\nX-A: B\r\nContent-Length: 0\r\n\r\n",
         HTTPMethod.get, 200, BodyFraming.contentLength(0), ["x-a=B", "content-length=0"]),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", .get, 200, .chunked, []),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked;q=1\r\n\r\n", .get, 200, .chunked, []),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n", .get, 200, .untilClose, []),
        ("HTTP/1.1 200 OK\r\nX: y\r\n\r\n", .get, 200, .untilClose, ["x=y"]),
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", .head, 200, BodyFraming.none, ["content-length=5"]),
        ("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", .get, 304, BodyFraming.none, ["content-length=5"]),
        ("HTTP/1.1 204 No Content\r\n\r\n", .get, 204, BodyFraming.none, []),
        ("HTTP/1.1 100 Continue\r\n\r\n", .post, 100, BodyFraming.none, []),
        ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", .get, 101, BodyFraming.none, []),
        // A CONNECT's 2xx becomes a tunnel, and says no length; a refusal keeps its body.
        ("HTTP/1.1 200 Connection Established\r\nContent-Length: 0\r\n\r\n", .connect, 200, BodyFraming.none, []),
        ("HTTP/1.1 403 Forbidden\r\nContent-Length: 4\r\n\r\n", .connect, 403, .contentLength(4), ["content-length=4"]),
        // The same length twice is sent once; a status line without a reason is read.
        ("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n", .get, 200, .contentLength(7), ["content-length=7"]),
        ("HTTP/1.1 502\r\nContent-Length: 1\r\n\r\n", .get, 502, .contentLength(1), ["content-length=1"]),
        // An origin's list of one length, relayed as it came on a body-less answer, is one length.
        ("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", .head, 200, BodyFraming.none, ["content-length=5"]),
        ("HTTP/1.1 304 Not Modified\r\nContent-Length:5 ,5,5 \r\nContent-Length: 5\r\n\r\n", .get, 304,
         BodyFraming.none, ["content-length=5"]),
        ("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n", .get, 200, .contentLength(7), ["content-length=7"]),
        ("HTTP/1.0 200 OK\r\n\r\n", .get, 200, .untilClose, []),
    ])
    func answersAreFramedAsTheirRequestAndStatusSay(_ text: String, _ method: HTTPMethod, _ status: Int,
                                                    _ framing: BodyFraming, _ fields: [String]) {
        let r = read(text, method: method)
        #expect(r.error == nil)
        #expect(r.length == text.utf8.count)
        #expect(r.status == status && r.framing == framing)
        #expect(r.fields == fields)
    }

    @Test(arguments: [
        ("HTTP/1.1 200 OK\nX: y\r\n\r\n", HTTPWireError.bareLineFeed),
        ("HTTP/1.1 200 OK\r\nX: y\n\r\n", .bareLineFeed),
        ("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", .bareCarriageReturn),
        ("HTTP/1.1 200 OK\r\n\rX\r\n", .bareCarriageReturn),
        ("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", .invalidFieldName),
        ("HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", .invalidFieldName),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", .conflictingContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1,,1\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1, \r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\nContent-Length: 2\r\n\r\n", .conflictingContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", .conflictingContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", .contentLengthWithTransferEncoding),
        ("HTTP/1.1 304 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n", .contentLengthWithTransferEncoding),
        ("HTTP/2 200 OK\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 20 OK\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 099 OK\r\n\r\n", .malformedStatusLine),
        ("HTTP/1.1 2000 OK\r\n\r\n", .malformedStatusLine),
        ("HTTX/1.1 200 OK\r\n\r\n", .malformedStatusLine),
    ])
    func whatLarderNeverWritesIsRefused(_ text: String, _ error: HTTPWireError) {
        #expect(read(text).error == error)
    }

    @Test func everyPrefixOfAHeadIsIncomplete() {
        let text = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\n"
        let bytes = Array(text.utf8)
        var head = H2AnswerHead()
        for n in 0..<bytes.count {
            let prefix = String(decoding: bytes[..<n], as: UTF8.self)
            let r = read(prefix, into: &head)
            #expect(r.length == nil && r.error == nil, "prefix of \(n) bytes")
        }
        #expect(read(text, into: &head).length == bytes.count)
    }

    @Test func aHeadWithMoreFieldsThanTheLimitIsRefused() {
        let line = "X-A: b\r\n"
        let within = "HTTP/1.1 200 OK\r\n" + String(repeating: line, count: H2AnswerHead.maxFields) + "\r\n"
        #expect(read(within).fields.count == H2AnswerHead.maxFields)
        let over = "HTTP/1.1 200 OK\r\n" + String(repeating: line, count: H2AnswerHead.maxFields + 1) + "\r\n"
        #expect(read(over).error == .tooManyHeaderFields)
    }

    @Test func namesLongerThanTheirRoomAreReadWhole() {
        var head = H2AnswerHead()
        let long = String(repeating: "Long-Name-", count: 300)  // 3,000 bytes of names, more than the room
        let text = "HTTP/1.1 200 OK\r\n\(long): 1\r\nX-\(long): 2\r\n\r\n"
        let r = read(text, into: &head)
        #expect(r.fields == ["\(long.lowercased())=1", "x-\(long.lowercased())=2"])
        #expect(head.names.count > H2AnswerHead.roomSize)
        // The next head reads in a room of the usual size again.
        #expect(read("HTTP/1.1 200 OK\r\nA: 1\r\n\r\n", into: &head).fields == ["a=1"])
        #expect(head.names.count == H2AnswerHead.roomSize)
    }
}

/// A small deterministic generator (xorshift), so that a failure repeats.
private struct Dice {
    var state: UInt64
    mutating func roll(_ n: Int) -> Int {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return Int(state % UInt64(n))
    }
}

@Suite struct H2AnswerHeadRepeatTests {
    /// A hit's head again with another Age is read from its Age line: the stored fields before it
    /// are the last head's.
    @Test func aRepeatedHeadIsReadFromWhereItDiffers() {
        var head = H2AnswerHead()
        let stored = "HTTP/1.1 200 OK\r\nDate: Sun, 29 Nov 2026 20:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
        let first = read(stored + "Age: 1\r\nCache-Status: Larder; hit\r\n\r\nabc", into: &head)
        let before = head.linesRead
        let second = read(stored + "Age: 2\r\nCache-Status: Larder; hit\r\n\r\nabc", into: &head)
        #expect(head.linesRead - before == 3)  // Age, Cache-Status and the blank line
        #expect(second.fields == ["date=Sun, 29 Nov 2026 20:00:00 GMT", "content-type=text/plain", "content-length=3",
                                  "age=2", "cache-status=Larder; hit"])
        #expect(second.length == first.length && second.framing == .contentLength(3))
        // The same head again reads its blank line only; another method reads it all.
        _ = read(stored + "Age: 2\r\nCache-Status: Larder; hit\r\n\r\nxyz", into: &head)
        #expect(head.linesRead - before == 4)
        #expect(read(stored + "Age: 2\r\nCache-Status: Larder; hit\r\n\r\n", method: .head, into: &head).framing == BodyFraming.none)
        #expect(head.linesRead - before == 10)
    }

    /// A head differing from the last one first at a line's LF is read from that line: its bare CR
    /// is refused as it would be alone, not taken for the end of the line read last time.
    @Test func aDifferenceAtTheEndOfALineRereadsTheLine() {
        var head = H2AnswerHead()
        #expect(read("HTTP/1.1 200 OK\r\nA: b\r\nC: d\r\n\r\n", into: &head).fields == ["a=b", "c=d"])
        #expect(read("HTTP/1.1 200 OK\r\nA: b\rxC: d\r\n\r\n", into: &head).error == .bareCarriageReturn)
    }

    /// A head whose names outgrew the room gives it back at the next read: the names it lowered are
    /// gone, so the next head is read from its start even where it repeats the long one.
    @Test func aHeadAfterOneThatOutgrewTheNamesRoomIsReadWhole() {
        var head = H2AnswerHead()
        let long = (0..<4).map { "X\(String(repeating: "n", count: 300))\($0): v\r\n" }.joined()
        let first = read("HTTP/1.1 200 OK\r\nX: 1\r\nAge: 1\r\n" + long + "\r\n", into: &head)
        #expect(first.fields.count == 6 && head.names.count > H2AnswerHead.roomSize)
        #expect(read("HTTP/1.1 200 OK\r\nX: 1\r\nAge: 2\r\n\r\n", into: &head).fields == ["x=1", "age=2"])
    }

    /// The line starts of a head with many lines are not kept: the next head is read whole, and
    /// right.
    @Test func aHeadOfManyLinesIsNotKept() {
        var head = H2AnswerHead()
        // Shorter than the longest head kept, with more lines than are kept.
        let many = "HTTP/1.1 200 OK\r\n" + String(repeating: "k:v\r\n", count: 2 * H2AnswerHead.keptLines)
        #expect(many.utf8.count < H2AnswerHead.rememberedLimit - 100)
        #expect(read(many + "A: 1\r\n\r\n", into: &head).fields.last == "a=1")
        let before = head.linesRead
        let again = read(many + "A: 2\r\n\r\n", into: &head)
        #expect(again.fields.count == 2 * H2AnswerHead.keptLines + 1 && again.fields.last == "a=2")
        #expect(head.linesRead - before == 2 * H2AnswerHead.keptLines + 2)
    }

    /// Whatever heads follow each other, each is read exactly as if it were read alone: its length,
    /// status, framing, fields or error. Heads are made from lines of the same few kinds, most
    /// from the last one's first lines with others after them, answering one of three methods.
    @Test func everyHeadReadsAsIfReadAlone() {
        let statuses = ["HTTP/1.1 200 OK", "HTTP/1.1 304 Not Modified", "HTTP/1.1 206 Partial Content", "HTTP/1.1 200"]
        let fields = ["Date: Sun, 29 Nov 2026 20:00:00 GMT", "Content-Type: text/plain", "Content-Length: 5",
                      "Content-Length: 6", "Content-Length: 5, 5", "Transfer-Encoding: chunked", "Connection: close",
                      "Cache-Control: max-age=60", "Age: 1", "Age: 2", "Cache-Status: Larder; hit", "ETag: \"x\"",
                      "X-Bad: a\rb", "no colon", "content-length:5 ", "Keep-Alive: 5", "X-Long-Name-Of-A-Field: v",
                      "X-" + String(repeating: "n", count: 400) + ": names past the room"]
        let methods: [HTTPMethod] = [.get, .head, .connect]
        var dice = Dice(state: 0x9E37_79B9_7F4A_7C15)
        var shared = H2AnswerHead()
        var lines = [statuses[0]]
        var method = HTTPMethod.get
        for round in 0..<3_000 {
            if dice.roll(10) < 7 {
                lines.removeLast(dice.roll(lines.count))  // the status line may go too
                if lines.isEmpty { lines = [statuses[dice.roll(statuses.count)]] }
            } else {
                lines = [statuses[dice.roll(statuses.count)]]
            }
            for _ in 0..<dice.roll(6) { lines.append(fields[dice.roll(fields.count)]) }
            if dice.roll(3) == 0 { method = methods[dice.roll(methods.count)] }
            var text = lines.joined(separator: "\r\n") + "\r\n\r\nbody"
            if dice.roll(12) == 0 { text = String(text.utf8.prefix(dice.roll(text.utf8.count)))! }
            let alone = read(text, method: method)
            let again = read(text, method: method, into: &shared)
            #expect(again.length == alone.length && again.error == alone.error && again.fields == alone.fields,
                    "round \(round): \(text.debugDescription) answering \(method)")
            if alone.length != nil {
                #expect(again.status == alone.status && again.framing == alone.framing, "round \(round)")
            }
        }
    }
}
