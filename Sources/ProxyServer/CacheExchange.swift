import CachePolicy
import CacheStore
import Glibc
import HTTPWire
import SessionClient

/// The cache's part in one request: what was found, what was decided, and the store in progress.
final class CacheExchange {
    enum Phase {
        /// Fetching from the origin; the response may be stored.
        case fetching
        /// Asking the origin whether `entry` is still good.
        case revalidating(RevalidationMethod)
        /// The revalidation said unchanged: serve `entry` (with freshened head) once the task completes.
        case revalidated
        /// The HEAD revalidation said changed: fetch with GET once the task completes.
        case refetch
        /// An unsafe method: invalidate the URL after a non-error response.
        case unsafe
    }

    let primaryKey: [UInt8]
    let scheme: String
    let host: [UInt8]
    let path: [UInt8]
    let origin: OriginKey
    let route: OutboundHead.Route
    let pathOffset: Int?
    var phase: Phase
    var facts: RequestFacts?
    var entry: StoredResponse?
    var status = CacheStatus()
    var requestTime: Int64 = 0

    // A store in progress.
    var writer: EntryWriter?
    var storedResponse: ResponseHead?
    var omitFields: [[UInt8]] = []
    var freshnessOverride: FreshnessOverride?
    var responseTime: Int64 = 0

    init(primaryKey: [UInt8], scheme: String, host: [UInt8], path: [UInt8], origin: OriginKey,
         route: OutboundHead.Route, pathOffset: Int?, phase: Phase) {
        self.primaryKey = primaryKey; self.scheme = scheme; self.host = host; self.path = path
        self.origin = origin; self.route = route; self.pathOffset = pathOffset; self.phase = phase
    }
}

/// Seconds since the epoch: the policy's clock.
func currentTime() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec)
}
