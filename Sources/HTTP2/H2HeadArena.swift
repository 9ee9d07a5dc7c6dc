/// Bytes that stay where they are until all are let go at once: the names and values of answer
/// heads that nghttp2 holds by pointer until it has written their HEADERS frames. Chunks are
/// never moved or grown, so a pointer handed out stays good until `releaseAll`.
struct H2HeadArena {
    private var chunks: [UnsafeMutableRawBufferPointer] = []
    /// Bytes used of the last chunk.
    private var used = 0
    /// Bytes held since the last `releaseAll`.
    private(set) var held = 0

    static let chunkSize = 16 * 1_024

    /// A copy of `bytes` that stays put until `releaseAll`.
    mutating func copy(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer {
        guard let from = bytes.baseAddress, !bytes.isEmpty else { return UnsafeRawPointer(bitPattern: 1)! }
        if chunks.isEmpty || used + bytes.count > chunks[chunks.count - 1].count {
            let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: max(Self.chunkSize, bytes.count), alignment: 8)
            chunks.append(chunk)
            used = 0
        }
        let to = chunks[chunks.count - 1].baseAddress! + used
        to.copyMemory(from: from, byteCount: bytes.count)
        used += bytes.count
        held += bytes.count
        return UnsafeRawPointer(to)
    }

    /// Lets every copy go; the first chunk is kept for the next ones.
    mutating func releaseAll() {
        guard held > 0 else { return }
        if chunks.count > 1 {
            for chunk in chunks[1...] { chunk.deallocate() }
            chunks.removeSubrange(1...)
        }
        if let first = chunks.first, first.count > Self.chunkSize {
            first.deallocate()  // one long head's: not kept
            chunks.removeAll()
        }
        used = 0
        held = 0
    }

    func deallocateAll() {
        for chunk in chunks { chunk.deallocate() }
    }
}
