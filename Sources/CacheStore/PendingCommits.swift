import Locking
import Synchronization

/// Entries whose body is complete but whose commit the disk writer has not made yet (bodies too
/// large for the memory tier). A request for such a URL waits for the commit instead of fetching
/// the object a second time. The common case, nothing pending, is one relaxed atomic load. Who
/// waits is called when the last pending commit of its key is made (`whenNonePending`), by the
/// writer's thread, instead of polling.
final class PendingCommits: Sendable {
    private let pending = Atomic<Int>(0)
    private let keys = Locked<[ByteString: Int]>([:])
    private let waiters = Locked<[ByteString: [@Sendable () -> Void]]>([:])

    func add(_ primaryKey: [UInt8]) {
        keys.withLock { $0[ByteString(primaryKey), default: 0] += 1 }
        pending.add(1, ordering: .releasing)
    }

    func remove(_ primaryKey: [UInt8]) {
        let k = ByteString(primaryKey)
        let last = keys.withLock { table -> Bool in
            if let n = table[k], n > 1 {
                table[k] = n - 1
                return false
            }
            table[k] = nil
            return true
        }
        pending.subtract(1, ordering: .releasing)
        guard last else { return }
        // Taken after the key left `keys`: a waiter added since saw it gone and was called at once.
        let due = waiters.withLock { $0.removeValue(forKey: k) } ?? []
        for done in due { done() }
    }

    /// Calls `done` once `primaryKey` has no pending commit: at once if it has none now, else on the
    /// thread that removes its last one.
    func whenNonePending(_ primaryKey: [UInt8], _ done: @escaping @Sendable () -> Void) {
        let k = ByteString(primaryKey)
        // `keys` is checked with the waiters' lock held, and `remove` takes that lock only after
        // dropping the key: either this sees the key gone, or `remove` sees the waiter.
        let now = waiters.withLock { w -> Bool in
            guard keys.withLock({ $0[k] != nil }) else { return true }
            w[k, default: []].append(done)
            return false
        }
        if now { done() }
    }

    func contains(_ primaryKey: [UInt8]) -> Bool {
        guard pending.load(ordering: .acquiring) > 0 else { return false }
        return keys.withLock { $0[ByteString(primaryKey)] != nil }
    }
}

/// Bytes as a dictionary key.
struct ByteString: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
}
