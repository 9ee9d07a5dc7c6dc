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
        /// Bodies whose chunks a write transaction is deleting: not to be pinned again, since the
        /// deletion may commit at any moment (a response would be cut halfway).
        var deleting: Set<UInt64> = []
        /// A purge of everything is being committed: no body may be pinned.
        var deletingAll = false
    }

    private let state = Locked(State())

    /// Starts a reader; false when the body is being deleted (the entry is gone: a miss).
    func pin(_ id: UInt64) -> Bool {
        state.withLock { s in
            if s.deletingAll || s.deleting.contains(id) { return false }
            s.readers[id, default: 0] += 1
            return true
        }
    }

    /// Ends one reader. Returns the chunk count to delete now when it was the last reader of a body
    /// whose entry is gone (the body then counts as being deleted).
    func unpin(_ id: UInt64) -> Int? {
        state.withLock { s in
            guard let n = s.readers[id] else { return nil }
            if n > 1 {
                s.readers[id] = n - 1
                return nil
            }
            s.readers[id] = nil
            guard let chunks = s.doomed.removeValue(forKey: id) else { return nil }
            s.deleting.insert(id)
            return chunks
        }
    }

    /// The writer is about to delete a body's chunks: true when a response still reads them, in
    /// which case the deletion waits for its `unpin`; false when it goes ahead (no new readers
    /// until `transactionEnded`).
    func postponeDeletion(of id: UInt64, chunks: Int) -> Bool {
        state.withLock { s in
            guard s.readers[id] == nil else {
                s.doomed[id] = chunks
                return true
            }
            s.deleting.insert(id)
            return false
        }
    }

    /// A purge of every body: true, and no pins until `transactionEnded(endsDeletingAll:)`, when
    /// no response reads one; false when some do (the purge then goes entry by entry).
    func beginDeletingAll() -> Bool {
        state.withLock { s in
            guard s.readers.isEmpty else { return false }
            s.deletingAll = true
            return true
        }
    }

    /// The writer's transaction that decided these deletions ended. Committed, they are done;
    /// aborted, nothing happened: the entries are still there, and readable again.
    func transactionEnded(deleted: [UInt64], postponed: [UInt64], committed: Bool, endsDeletingAll: Bool = false) {
        guard !deleted.isEmpty || !postponed.isEmpty || endsDeletingAll else { return }
        state.withLock { s in
            for id in deleted { s.deleting.remove(id) }
            if !committed { for id in postponed { s.doomed[id] = nil } }
            if endsDeletingAll { s.deletingAll = false }
        }
    }

    var pinnedCount: Int { state.withLock { $0.readers.count } }
}

/// One response's hold on a disk body; let go when the response ends, however it ends.
public final class BodyPin {
    private let store: DiskStore
    private let id: UInt64

    /// Nil when the body is being deleted.
    init?(store: DiskStore, id: UInt64) {
        guard store.pins.pin(id) else { return nil }
        self.store = store
        self.id = id
    }

    deinit {
        if let chunks = store.pins.unpin(id) { store.enqueue(.discard(id: id, chunks: chunks)) }
    }
}
