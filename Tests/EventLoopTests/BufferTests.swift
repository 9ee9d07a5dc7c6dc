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
}
