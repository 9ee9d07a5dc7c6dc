import Locking
import Synchronization

/// Removals (invalidations, purges) queued for the disk writer but not yet committed. Until they
/// are, disk lookups must not return what they remove: a GET right after a POST's response must
/// not be answered with the entry that POST invalidated. The common case, nothing pending, is one
/// relaxed atomic load.
final class PendingRemovals: Sendable {
    enum Removal: Sendable, Hashable {
        case url(KeyDigest)
        case all
        case storedSince(Int64)
    }

    private let pending = Atomic<Int>(0)
    private let removals = Locked<[Removal: Int]>([:])

    func add(_ r: Removal) {
        removals.withLock { $0[r, default: 0] += 1 }
        pending.add(1, ordering: .releasing)
    }

    func remove(_ r: Removal) {
        removals.withLock { table in
            if let n = table[r], n > 1 { table[r] = n - 1 } else { table[r] = nil }
        }
        pending.subtract(1, ordering: .releasing)
    }

    /// Whether a record stored at `storedAt` under `primary` is about to be removed.
    func hides(primary: KeyDigest, storedAt: Int64) -> Bool {
        guard pending.load(ordering: .acquiring) > 0 else { return false }
        return removals.withLock { table in PendingRemovals.hides(Array(table.keys), primary: primary, storedAt: storedAt) }
    }

    /// The removals pending now, nil when there are none. A lookup takes this before it reads the
    /// disk and judges what it read against it too: a removal committed (and so no longer pending)
    /// while the record was being read must still hide it, as the snapshot read was older.
    func snapshot() -> [Removal]? {
        guard pending.load(ordering: .acquiring) > 0 else { return nil }
        return removals.withLock { Array($0.keys) }
    }

    static func hides(_ removals: [Removal], primary: KeyDigest, storedAt: Int64) -> Bool {
        for r in removals {
            switch r {
            case .all: return true
            case .url(let d): if d == primary { return true }
            case .storedSince(let t): if storedAt >= t { return true }
            }
        }
        return false
    }
}
