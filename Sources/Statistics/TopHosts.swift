import Locking

/// Requests per origin host on one worker, for the dashboard's "top hosts". Counting is
/// loop-confined (a dictionary update per request); once a second the worker publishes its
/// largest counts for readers on other threads. At most `capacity` hosts are tracked: a new host
/// replaces the least counted one and inherits its count (the Space-Saving algorithm), so heavy
/// hosts are never lost and counts are upper bounds.
public final class TopHosts: @unchecked Sendable {
    public static let capacity = 1_024
    public static let published = 20

    /// Loop-confined.
    private var counts: [String: UInt64] = [:]
    private let snapshot = Locked<[(host: String, requests: UInt64)]>([])

    /// Requests for the same host as the one before are added up here and counted in one step
    /// when another host comes or the counts are published: a comparison instead of hashing the
    /// name into the table on every request.
    private var lastHost = ""
    private var lastHostRequests: UInt64 = 0

    public init() {}

    public func count(_ host: String) {
        if lastHostRequests > 0, host == lastHost {
            lastHostRequests &+= 1
            return
        }
        flushLastHost()
        lastHost = host
        lastHostRequests = 1
    }

    private func flushLastHost() {
        guard lastHostRequests > 0 else { return }
        let (host, n) = (lastHost, lastHostRequests)
        lastHostRequests = 0
        if let had = counts[host] {
            counts[host] = had &+ n
        } else if counts.count < TopHosts.capacity {
            counts[host] = n
        } else if let least = counts.min(by: { $0.value < $1.value }) {
            counts[least.key] = nil
            counts[host] = least.value &+ n
        }
    }

    /// On the counting thread: makes the current top hosts readable elsewhere.
    public func publish() {
        flushLastHost()
        let top = counts.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .prefix(TopHosts.published).map { (host: $0.key, requests: $0.value) }
        snapshot.withLock { $0 = Array(top) }
    }

    /// Top hosts over all workers, largest first.
    public static func merged(_ all: [TopHosts]) -> [(host: String, requests: UInt64)] {
        var sum: [String: UInt64] = [:]
        for t in all {
            for (host, n) in t.snapshot.withLock({ $0 }) { sum[host, default: 0] &+= n }
        }
        return sum.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
            .prefix(published).map { (host: $0.key, requests: $0.value) }
    }
}
