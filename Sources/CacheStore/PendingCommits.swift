import Locking
import Synchronization

/// Entries whose body is complete but whose commit the disk writer has not made yet (bodies too
/// large for the memory tier). A request for such a URL waits for the commit instead of fetching
/// the object a second time. The common case, nothing pending, is one relaxed atomic load.
final class PendingCommits: Sendable {
    private let pending = Atomic<Int>(0)
    private let keys = Locked<[ByteString: Int]>([:])

    func add(_ primaryKey: [UInt8]) {
        keys.withLock { $0[ByteString(primaryKey), default: 0] += 1 }
        pending.add(1, ordering: .releasing)
    }

    func remove(_ primaryKey: [UInt8]) {
        keys.withLock { table in
            let k = ByteString(primaryKey)
            if let n = table[k], n > 1 { table[k] = n - 1 } else { table[k] = nil }
        }
        pending.subtract(1, ordering: .releasing)
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
