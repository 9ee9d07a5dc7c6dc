/// What names resolved to, per worker: addresses within their TTL (at most `maxPositive`
/// seconds), names that do not exist or have no address for a short time (their SOA's minimum,
/// at most `maxNegative`; `negativeWithoutSOA` when the answer carried none), and names no name
/// server answered for `timeoutHold` (RFC 9520: requests queued behind a dead name fail together
/// instead of each waiting out a lookup of its own). At most `capacity`
/// names, least recently used out first. Pure: time is passed in (the monotonic clock).
public struct NameCache: Sendable {
    public enum Answer: Sendable {
        /// Addresses with port 0: the asker sets its own.
        case addresses([SocketAddress])
        /// NXDOMAIN, or no address of either family; the reason is for error messages.
        case notFound(String)
        /// No name server answered the last lookup.
        case timedOut
    }

    @usableFromInline struct Entry: Sendable {
        @usableFromInline var answer: Answer
        @usableFromInline var expires: Double

        @usableFromInline init(answer: Answer, expires: Double) {
            self.answer = answer
            self.expires = expires
        }
    }

    public static let maxPositive = 300.0
    public static let maxNegative = 10.0
    public static let negativeWithoutSOA = 5.0
    public static let timeoutHold = 2.0
    public static let capacity = 4_096

    @usableFromInline var entries: LRUCache<String, Entry>

    public init(capacity: Int = NameCache.capacity) {
        entries = LRUCache(capacity: capacity)
    }

    /// The answer for `host` if one is kept and has not expired at `now`: one hash lookup.
    @inlinable public mutating func answer(for host: String, now: Double) -> Answer? {
        guard let entry = entries.value(for: host), entry.expires > now else { return nil }
        return entry.answer
    }

    /// Keeps `addresses` for `ttl` seconds (the smallest TTL of the records used), capped. A TTL
    /// of 0 means "do not keep": nothing is stored, and an older answer is dropped with it.
    public mutating func remember(addresses: [SocketAddress], ttl: UInt32, for host: String, now: Double) {
        let keep = min(Double(ttl), NameCache.maxPositive)
        store(.addresses(addresses), for: host, keep: keep, now: now)
    }

    /// Keeps a negative answer: `soaTTL` is what the name server's SOA allows (0 when it sent none).
    public mutating func rememberNotFound(_ reason: String, soaTTL: UInt32, for host: String, now: Double) {
        let keep = soaTTL > 0 ? min(Double(soaTTL), NameCache.maxNegative) : NameCache.negativeWithoutSOA
        store(.notFound(reason), for: host, keep: keep, now: now)
    }

    /// Keeps a lookup no name server answered, for `timeoutHold` seconds.
    public mutating func rememberTimeout(for host: String, now: Double) {
        store(.timedOut, for: host, keep: NameCache.timeoutHold, now: now)
    }

    private mutating func store(_ answer: Answer, for host: String, keep: Double, now: Double) {
        if keep <= 0 {
            // An expired entry answers nothing; overwriting keeps a stale one from being read.
            if entries.peek(host) != nil { entries.set(Entry(answer: answer, expires: now), for: host) }
            return
        }
        entries.set(Entry(answer: answer, expires: now + keep), for: host)
    }

    public var count: Int { entries.count }
}
