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
