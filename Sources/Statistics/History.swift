import Locking

/// The last minutes of traffic, for the dashboard's charts: totals sampled at a fixed interval,
/// differenced into rates when read.
public final class StatisticsHistory: Sendable {
    public struct Sample: Sendable {
        public var time: Double
        public var requests: Double
        public var served: Double
        public var fetched: Double
        public var bytesFromCache: Double
        public var bytesFromOrigin: Double
    }

    public let interval: Double
    public let capacity: Int
    private let samples = Locked<[Sample]>([])

    public init(interval: Double = 2, minutes: Double = 10) {
        self.interval = interval
        capacity = Int(minutes * 60 / interval) + 1
    }

    public func record(_ snap: StatisticsSnapshot, time: Double) {
        let served = snap.value("cache_lookups", "hit") + snap.value("cache_lookups", "stale_served")
            + snap.value("cache_lookups", "revalidated_unchanged")
        let fetched = snap.value("cache_lookups", "miss") + snap.value("cache_lookups", "revalidated_changed")
            + snap.value("cache_lookups", "only_if_cached_miss")
        let requests = snap.metrics.first { $0.metric.name == "requests" }?.series.reduce(0) { $0 + $1.value } ?? 0
        let s = Sample(time: time, requests: requests, served: served, fetched: fetched,
                       bytesFromCache: snap.value("client_bytes", "cache"),
                       bytesFromOrigin: snap.value("client_bytes", "origin"))
        samples.withLock { list in
            list.append(s)
            if list.count > capacity { list.removeFirst(list.count - capacity) }
        }
    }

    /// `{"interval": s, "points": [{"t": seconds ago, "rps", "hit_ratio", "bytes_per_second"}…]}`,
    /// oldest first; an interval without cacheable lookups has a null hit ratio.
    public func json(now: Double) -> String {
        let list = samples.withLock { $0 }
        var points: [String] = []
        if list.count >= 2 {
            for i in 1..<list.count {
                let a = list[i - 1]
                let b = list[i]
                let dt = max(b.time - a.time, 0.001)
                let lookups = (b.served - a.served) + (b.fetched - a.fetched)
                let ratio = lookups > 0 ? String((b.served - a.served) / lookups) : "null"
                let bytes = (b.bytesFromCache - a.bytesFromCache) + (b.bytesFromOrigin - a.bytesFromOrigin)
                points.append("{\"t\":\(Int((now - b.time).rounded())),\"rps\":\(((b.requests - a.requests) / dt * 10).rounded() / 10)"
                              + ",\"hit_ratio\":\(ratio),\"bytes_per_second\":\((bytes / dt).rounded())}")
            }
        }
        return "{\"interval\":\(interval),\"points\":[" + points.joined(separator: ",") + "]}"
    }
}
