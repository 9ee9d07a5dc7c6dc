import Locking

/// Requests per origin (host and port) on one worker, with how many of their cacheable lookups
/// the cache answered, for the dashboard's "top hosts". Counting is loop-confined (a dictionary
/// update per request); once a second the worker publishes its largest counts for readers on
/// other threads. At most `capacity` origins are tracked: a new one replaces the least counted and
/// inherits its request count (the Space-Saving algorithm), so heavy origins are never lost and
/// request counts are upper bounds. Hits and misses are not inherited: an origin's hit ratio is
/// exact over the time it has been tracked.
public final class TopHosts: @unchecked Sendable {
    public static let capacity = 1_024
    public static let published = 50

    /// One origin's figures.
    public struct Entry: Sendable, Equatable {
        public var host: String
        public var port: Int
        public var requests: UInt64
        /// Lookups answered from the cache (hit, stale, revalidated unchanged) …
        public var hits: UInt64 = 0
        /// … and those that fetched (miss, revalidated changed, only-if-cached miss), as
        /// `hit_ratio` in `/stats` counts them.
        public var misses: UInt64 = 0

        /// `hits / (hits + misses)`; nil before any cacheable lookup.
        public var hitRatio: Double? {
            hits + misses > 0 ? Double(hits) / Double(hits + misses) : nil
        }

        /// `host`, with `:port` unless it is a scheme's default.
        public var name: String {
            let shown = host.contains(":") ? "[\(host)]" : host
            return port == 80 || port == 443 || port <= 0 ? shown : "\(shown):\(port)"
        }
    }

    private struct Key: Hashable {
        var host: String
        var port: Int
    }

    private struct Tally {
        var requests: UInt64 = 0
        var hits: UInt64 = 0
        var misses: UInt64 = 0
    }

    /// Loop-confined.
    private var counts: [Key: Tally] = [:]
    private let snapshot: Locked<[Entry]>

    /// Requests and lookups for the same origin as the one before are added up here and counted
    /// in one step when another origin comes or the counts are published: a comparison instead of
    /// hashing the name into the table on every request.
    private var last = Key(host: "", port: 0)
    private var lastTally = Tally()

    public init() {
        // Storage for the table and the published list is made now: the first of each also has
        // the Swift runtime instantiate its generic type, a one-time cost best kept off a busy loop.
        counts.reserveCapacity(TopHosts.capacity)
        var published: [Entry] = []
        published.reserveCapacity(TopHosts.published)
        snapshot = Locked(published)
    }

    public func count(_ host: String, port: Int) {
        if lastTally.requests > 0, port == last.port, host == last.host {
            lastTally.requests &+= 1
            return
        }
        flushLast()
        last = Key(host: host, port: port)
        lastTally.requests = 1
    }

    /// A lookup's result (`Count.lookup…`) for a request to `host`:`port` that `count` counted;
    /// results that are neither a hit nor a miss (a pass, a collapsed follower) are not counted.
    public func noteLookup(_ result: Count, host: String, port: Int) {
        guard let hit = TopHosts.isHit(result) else { return }
        if lastTally.requests > 0, port == last.port, host == last.host {
            if hit { lastTally.hits &+= 1 } else { lastTally.misses &+= 1 }
            return
        }
        // Another origin's request came between (a revalidation's answer): counted in the table,
        // if the origin is still tracked.
        let key = Key(host: host, port: port)
        guard counts[key] != nil else { return }
        if hit { counts[key]!.hits &+= 1 } else { counts[key]!.misses &+= 1 }
    }

    /// true for a hit, false for a miss, nil for neither (the split of `hit_ratio`).
    static func isHit(_ result: Count) -> Bool? {
        switch result {
        case .lookupHit, .lookupStaleServed, .lookupRevalidatedUnchanged: return true
        case .lookupMiss, .lookupRevalidatedChanged, .lookupOnlyIfCachedMiss: return false
        default: return nil
        }
    }

    private func flushLast() {
        guard lastTally.requests > 0 else { return }
        let (key, n) = (last, lastTally)
        lastTally = Tally()
        if let had = counts[key] {
            counts[key] = Tally(requests: had.requests &+ n.requests, hits: had.hits &+ n.hits,
                                misses: had.misses &+ n.misses)
        } else if counts.count < TopHosts.capacity {
            counts[key] = n
        } else if let least = counts.min(by: { $0.value.requests < $1.value.requests }) {
            counts[least.key] = nil
            counts[key] = Tally(requests: least.value.requests &+ n.requests, hits: n.hits, misses: n.misses)
        }
    }

    /// On the counting thread: makes the current top origins readable elsewhere.
    public func publish() {
        flushLast()
        let entries = counts.map { Entry(host: $0.key.host, port: $0.key.port, requests: $0.value.requests,
                                         hits: $0.value.hits, misses: $0.value.misses) }
        snapshot.withLock { $0 = Array(TopHosts.largestFirst(entries).prefix(TopHosts.published)) }
    }

    /// Top origins over all workers, largest first.
    public static func merged(_ all: [TopHosts]) -> [Entry] {
        var sum: [Key: Entry] = [:]
        for t in all {
            for e in t.snapshot.withLock({ $0 }) {
                let key = Key(host: e.host, port: e.port)
                var total = sum[key] ?? Entry(host: e.host, port: e.port, requests: 0)
                total.requests &+= e.requests
                total.hits &+= e.hits
                total.misses &+= e.misses
                sum[key] = total
            }
        }
        return Array(largestFirst(Array(sum.values)).prefix(published))
    }

    /// Most requests first; ties by name, then port, so the order is stable.
    private static func largestFirst(_ entries: [Entry]) -> [Entry] {
        entries.sorted { a, b in
            if a.requests != b.requests { return a.requests > b.requests }
            return a.host != b.host ? a.host < b.host : a.port < b.port
        }
    }
}
