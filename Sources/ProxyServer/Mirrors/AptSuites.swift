import Locking
import Synchronization
import Registries

/// What the last `InRelease` (or `Release`) a Debian mirror answered says about its suite, shared
/// by the workers, so that the index files a client fetches next match it ("Hash Sum mismatch"
/// never comes from Larder):
///
/// - a suite that serves indexes by hash (`Acquire-By-Hash: yes`) has every request for an index
///   it lists fetched as its by-hash URL, which never changes: the `Packages` a client gets is the
///   one its `InRelease` names, whatever is stored under the plain name;
/// - when a new `InRelease` is seen, the stored copies of the index files whose hash it changed are
///   dropped, so that a suite without by-hash is fetched afresh rather than served from before.
///
/// A client that read the previous `InRelease` and asks for an index after another client brought
/// in the next one gets the next one's index; its next `apt-get update` is consistent again.
final class AptSuites: Sendable {
    struct Suite {
        var release: AptRelease
        var seen: Int64
    }

    /// Suites remembered at most; the least recently seen goes first.
    static let capacity = 256

    private let suites = Locked<[String: Suite]>([:])

    /// The by-hash path to fetch for `path` of the suite at `suiteURL`, if the suite's last
    /// release lists it and serves by hash.
    func byHashPath(suiteURL: String, path: String) -> String? {
        suites.withLock { $0[suiteURL]?.release.byHashPath(for: path) }
    }

    /// Records a suite's release; returns the paths whose stored copies are from another release:
    /// each path the new release lists with another hash than the previous one, or every path it
    /// lists when it is the first this process has seen of the suite.
    func record(_ release: AptRelease, suiteURL: String, now: Int64) -> [String] {
        suites.withLock { all in
            let previous = all[suiteURL]?.release
            all[suiteURL] = Suite(release: release, seen: now)
            if all.count > Self.capacity, let oldest = all.min(by: { $0.value.seen < $1.value.seen })?.key {
                all[oldest] = nil
            }
            if previous == release { return [] }
            return release.sha256.compactMap { path, hash in
                previous?.sha256[path] == hash ? nil : path
            }.sorted()
        }
    }
}

/// What the mirrors of all workers share: the Debian suites they have read, and the memory their
/// held documents take.
final class MirrorState: Sendable {
    let aptSuites = AptSuites()
    let held = MirrorHoldBudget(limit: MirrorHoldBudget.defaultLimit)
}

/// Bytes of documents held whole for rewriting, across all workers: many clients asking at once
/// for large documents (npm's biggest are tens of MB) must not add up to the machine's memory.
final class MirrorHoldBudget: Sendable {
    static let defaultLimit = 256 << 20
    let limit: Int
    private let held = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    var current: Int { held.load(ordering: .relaxed) }

    /// Takes `bytes` from the budget, or nothing and false when they would go over it.
    func reserve(_ bytes: Int) -> Bool {
        let now = held.add(bytes, ordering: .relaxed).newValue
        if now <= limit { return true }
        held.subtract(bytes, ordering: .relaxed)
        return false
    }

    func release(_ bytes: Int) {
        held.subtract(bytes, ordering: .relaxed)
    }
}
