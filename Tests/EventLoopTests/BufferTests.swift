import CLibevent
import Testing
@testable import EventLoop

/// Walking a buffer's segments without copying them (a body teed into the cache as it is forwarded).
@Suite struct BufferTests {
    /// 40 segments of 10 bytes each, kept apart by adding them by reference.
    private final class Pieces {
        let bytes: [UInt8] = (0..<400).map { UInt8(truncatingIfNeeded: $0 * 7) }
    }

    @Test("segments come in order, past 16 of them, and stop at the count asked for",
          arguments: [0, 1, 10, 159, 160, 161, 395, 400, 1_000])
    func segmentsInOrder(_ upTo: Int) {
        let raw = evbuffer_new()!
        defer { evbuffer_free(raw) }
        let buffer = Buffer(raw)
        let pieces = Pieces()
        pieces.bytes.withUnsafeBytes { all in
            for i in stride(from: 0, to: 400, by: 10) {
                buffer.appendReference(UnsafeRawBufferPointer(rebasing: all[i..<(i + 10)]), keepingAlive: pieces)
            }
        }
        var seen: [UInt8] = []
        var calls = 0
        buffer.forEachSegment(upTo: upTo) { seen.append(contentsOf: $0); calls += 1 }
        #expect(seen == Array(pieces.bytes.prefix(upTo)))
        #expect(calls == (min(upTo, 400) + 9) / 10)
        #expect(buffer.count == 400)
    }

    /// A body by reference in pieces: each a segment, at most `maxPieces`, the bytes unchanged.
    @Test(arguments: [0, 1, 16, 17, 160, 4_096, 4_100])
    func piecesAreSegmentsOfTheirOwn(_ size: Int) {
        let raw = evbuffer_new()!
        defer { evbuffer_free(raw) }
        let buffer = Buffer(raw)
        let owner = Pieces()
        let body: [UInt8] = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        body.withUnsafeBytes { buffer.appendReference($0, keepingAlive: owner, inPiecesOf: 16) }
        var segments: [Int] = []
        buffer.forEachSegment(upTo: size) { segments.append($0.count) }
        let whole = size / 16, rest = size % 16
        var expected = Array(repeating: 16, count: whole) + (rest > 0 ? [rest] : [])
        if expected.count > Buffer.maxPieces {
            expected = Array(repeating: 16, count: Buffer.maxPieces - 1) + [size - 16 * (Buffer.maxPieces - 1)]
        }
        #expect(segments == expected)
        #expect(buffer.copyBytes() == body)
    }

    /// How much of a prefix lies in whole segments, and the segment after it.
    @Test func wholeSegmentsStopWhereASegmentWouldBeCut() {
        let raw = evbuffer_new()!
        defer { evbuffer_free(raw) }
        let buffer = Buffer(raw)
        let pieces = Pieces()
        pieces.bytes.withUnsafeBytes { all in
            for (start, end) in [(0, 1), (1, 11), (11, 111), (111, 400)] {
                buffer.appendReference(UnsafeRawBufferPointer(rebasing: all[start..<end]), keepingAlive: pieces)
            }
        }
        #expect(buffer.wholeSegments(upTo: 0) == (0, 0, 1))
        #expect(buffer.wholeSegments(upTo: 1) == (1, 1, 10))
        #expect(buffer.wholeSegments(upTo: 10) == (1, 1, 10))
        #expect(buffer.wholeSegments(upTo: 11) == (11, 2, 100))
        #expect(buffer.wholeSegments(upTo: 399) == (111, 3, 289))
        #expect(buffer.wholeSegments(upTo: 400) == (400, 4, Int.max))
        #expect(buffer.wholeSegments(upTo: 1_000) == (400, 4, Int.max))
    }
}
