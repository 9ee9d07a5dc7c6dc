@testable import HTTPWire
import Testing

/// A head written the way a translation writes one, with the places of its parts recorded.
private struct WrittenHead {
    var bytes: [UInt8] = []
    var fields: [HeaderField] = []
    var methodEnd = 0
    var targetEnd = 0

    init(method: String, target: String, fields lines: [(String, String)]) {
        bytes += method.utf8
        methodEnd = bytes.count
        bytes.append(0x20)
        bytes += target.utf8
        targetEnd = bytes.count
        bytes += " HTTP/1.1\r\n".utf8
        for (name, value) in lines {
            let nameStart = bytes.count
            bytes += name.utf8
            let nameEnd = bytes.count
            bytes += ": ".utf8
            var valueStart = bytes.count
            bytes += value.utf8
            var valueEnd = bytes.count
            while valueStart < valueEnd, bytes[valueStart] == 0x20 || bytes[valueStart] == 0x09 { valueStart += 1 }
            while valueEnd > valueStart, bytes[valueEnd - 1] == 0x20 || bytes[valueEnd - 1] == 0x09 { valueEnd -= 1 }
            fields.append(HeaderField(name: ByteRange(start: nameStart, count: nameEnd - nameStart),
                                      value: ByteRange(start: valueStart, count: valueEnd - valueStart)))
            bytes += "\r\n".utf8
        }
        bytes += "\r\n".utf8
    }
}

/// Splitmix64: the same heads on every run.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private enum Outcome: Equatable {
    case head(length: Int?)
    case refused(HTTPWireError)
}

@Suite struct RequestHeadAdoptionTests {
    /// Fields chosen for what the parser makes of them: framing, Host, connection options.
    private static let fieldChoices: [(String, [String])] = [
        ("Host", ["origin.test", "origin.test:8080", "", "[::1]:80", "a%zz", "a b", "a@b", "ORIGIN.test"]),
        ("content-length", ["0", "12", "12, 12", "1x", "", " 7 ", "99999999999999999999999"]),
        ("Transfer-Encoding", ["chunked", "gzip, chunked", "gzip", "chunked, chunked"]),
        ("Connection", ["close", "keep-alive", "upgrade", "Upgrade, close", "x"]),
        ("Upgrade", ["websocket", "h2c", ""]),
        ("Expect", ["100-continue", "100-Continue", "nothing"]),
        ("accept", ["*/*", " \ttext/html\t ", "", "a\tb"]),
        ("x-obs", ["\u{80}\u{FF}"]),
    ]

    /// Heads of every shape the choices make, under limits near their sizes: `adopt` throws what
    /// `parse` throws, and otherwise leaves the head `parse` makes.
    @Test func adoptionReadsWhatParsingReads() {
        var generator = SeededGenerator(state: 0x5EED)
        var outcomes: [String: Int] = [:]
        for _ in 0..<6_000 {
            let method = ["GET", "POST", "HEAD", "X-PURGE"].randomElement(using: &generator)!
            let target = ["/", "/a?b", "http://origin.test/x", "*", String(repeating: "p", count: 60)]
                .randomElement(using: &generator)!
            var lines: [(String, String)] = []
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                let (name, values) = Self.fieldChoices.randomElement(using: &generator)!
                lines.append((name, values.randomElement(using: &generator)!))
            }
            let written = WrittenHead(method: method, target: target, fields: lines)
            let size = written.bytes.count
            let line = written.targetEnd + 11
            let limits = HeadLimits(maxHeadBytes: [65_536, size, size - 1, size + 1, Int.random(in: 0...size, using: &generator)]
                                        .randomElement(using: &generator)!,
                                    maxHeaderCount: [100, lines.count, max(lines.count - 1, 0), 0].randomElement(using: &generator)!,
                                    maxRequestLineBytes: [8_192, line, line - 1, line + 1, 1].randomElement(using: &generator)!)
            let parsed = outcome(of: written, limits: limits, adopting: false)
            let adopted = outcome(of: written, limits: limits, adopting: true)
            #expect(adopted.outcome == parsed.outcome, "\(String(decoding: written.bytes, as: UTF8.self)) \(limits)")
            if case .head = parsed.outcome {
                #expect(parsed.head.map(Snapshot.init) == adopted.head.map(Snapshot.init))
            }
            outcomes["\(parsed.outcome)", default: 0] += 1
        }
        // The choices reach the parser's every refusal and acceptance, not only a few of them.
        for expected in ["head(length: Optional(", "headTooLarge", "tooManyHeaderFields", "requestLineTooLong",
                         "invalidHost", "invalidContentLength", "conflictingContentLength",
                         "contentLengthWithTransferEncoding", "unsupportedTransferEncoding"] {
            #expect(outcomes.keys.contains { $0.contains(expected) }, "no head ended in \(expected)")
        }
    }

    /// What can be compared of a head.
    private struct Snapshot: Equatable {
        var storage: [UInt8], fields: [HeaderField], method: HTTPMethod, methodRange: ByteRange, target: ByteRange
        var framing: BodyFraming, keepAlive: Bool, expectsContinue: Bool, upgradeRequested: Bool
        init(_ h: RequestHead) {
            storage = h.headers.storage; fields = h.headers.fields; method = h.method; methodRange = h.methodRange
            target = h.target; framing = h.framing; keepAlive = h.keepAlive; expectsContinue = h.expectsContinue
            upgradeRequested = h.upgradeRequested
        }
    }

    private func outcome(of written: WrittenHead, limits: HeadLimits,
                         adopting: Bool) -> (outcome: Outcome, head: RequestHead?) {
        // A head that held another request before, as an exchange's does.
        var head = RequestHead()
        let earlier = WrittenHead(method: "GET", target: "/earlier", fields: [("Host", "a"), ("Connection", "close")])
        earlier.bytes.withUnsafeBytes { _ = try? RequestParser.parse($0, into: &head, limits: HeadLimits()) }
        return written.bytes.withUnsafeBytes { bytes in
            do throws(HTTPWireError) {
                if adopting {
                    try written.fields.withUnsafeBufferPointer { (fields) throws(HTTPWireError) in
                        try RequestParser.adopt(bytes, methodEnd: written.methodEnd, targetEnd: written.targetEnd,
                                                fields: fields, into: &head, limits: limits)
                    }
                    return (.head(length: bytes.count), head)
                }
                let length = try RequestParser.parse(bytes, into: &head, limits: limits)
                return (.head(length: length), length == nil ? nil : head)
            } catch {
                #expect(head.headers.fields.isEmpty && head.target == .empty, "a refused head is left empty")
                return (.refused(error), nil)
            }
        }
    }
}
