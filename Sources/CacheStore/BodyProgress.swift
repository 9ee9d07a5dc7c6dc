import Synchronization

/// How much of a body being stored is committed to disk: a request that joins the body's download
/// late reads the bytes before what the download still holds in memory from there.
///
/// Advanced by the disk writer after the transaction that holds a chunk commits, never before (a
/// reader must not look for a chunk that may still be rolled back); lost for good once a batch
/// holding one of the body's chunks fails, since the writer then skips the body's later chunks.
public final class BodyProgress: Sendable {
    public let bodyID: UInt64
    public let chunkSize: Int
    /// Bytes from the body's start that are committed, or -1 once part of the body was lost.
    private let committed = Atomic<Int>(0)

    init(bodyID: UInt64, chunkSize: Int) {
        self.bodyID = bodyID
        self.chunkSize = chunkSize
    }

    /// Bytes from the start readable from disk; nil once the body's chunks are not all there.
    public var committedBytes: Int? {
        let n = committed.load(ordering: .acquiring)
        return n < 0 ? nil : n
    }

    /// The payload length of chunk `index`, when all of it is committed.
    public func committedLength(ofChunk index: Int) -> Int? {
        guard let n = committedBytes, index >= 0 else { return nil }
        let start = index * chunkSize
        guard start < n else { return nil }
        return min(chunkSize, n - start)
    }

    func advance(to bytes: Int) {
        var current = committed.load(ordering: .relaxed)
        while current >= 0, current < bytes {
            let (exchanged, original) = committed.compareExchange(expected: current, desired: bytes,
                                                                  successOrdering: .releasing,
                                                                  failureOrdering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    func lose() { committed.store(-1, ordering: .releasing) }
}
