import Locking

/// Bodies being sent from disk. An entry evicted, replaced or purged while a response still reads
/// it loses its record at once (nobody new finds it) but keeps its chunks until the last response
/// reading them is done, so a client is never cut off halfway through a hit. Shared by the readers
/// (workers) and the disk writer.
final class BodyPins: Sendable {
    private struct State {
        /// Responses reading each body.
        var readers: [UInt64: Int] = [:]
        /// Bodies whose entry is gone, with their chunk counts: deleted when the last reader ends.
        var doomed: [UInt64: Int] = [:]
    }

    private let state = Locked(State())

    func pin(_ id: UInt64) {
        state.withLock { $0.readers[id, default: 0] += 1 }
    }

    /// Ends one reader. Returns the chunk count to delete now when it was the last reader of a body
    /// whose entry is gone.
    func unpin(_ id: UInt64) -> Int? {
        state.withLock { s in
            guard let n = s.readers[id] else { return nil }
            if n > 1 {
                s.readers[id] = n - 1
                return nil
            }
            s.readers[id] = nil
            return s.doomed.removeValue(forKey: id)
        }
    }

    /// The writer is about to delete a body's chunks: true when a response still reads them, in
    /// which case the deletion waits for its `unpin`.
    func postponeDeletion(of id: UInt64, chunks: Int) -> Bool {
        state.withLock { s in
            guard s.readers[id] != nil else { return false }
            s.doomed[id] = chunks
            return true
        }
    }

    var pinnedCount: Int { state.withLock { $0.readers.count } }
}

/// One response's hold on a disk body; let go when the response ends, however it ends.
public final class BodyPin {
    private let store: DiskStore
    private let id: UInt64

    init(store: DiskStore, id: UInt64) {
        self.store = store
        self.id = id
        store.pins.pin(id)
    }

    deinit {
        if let chunks = store.pins.unpin(id) { store.enqueue(.discard(id: id, chunks: chunks)) }
    }
}
