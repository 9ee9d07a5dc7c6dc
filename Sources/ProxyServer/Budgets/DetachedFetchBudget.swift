import Locking

/// What fetches with no client attached may take: a download Larder finishes for the cache after
/// its client left (an aborted download mostly in, a range fill past the client's range, a
/// collapsed fetch whose last reader left) or one a background refresh started. Each costs origin
/// bandwidth and cache space on behalf of someone who is not waiting for it, so one client can
/// otherwise make Larder download far more than it ever reads: a 1-byte range of each of many
/// large objects, then a hang-up. Counted per client address and in total, by fetches and by the
/// bytes each may still download.
struct DetachedFetchLimits: Sendable, Equatable {
    var fetchesPerClient: Int
    var bytesPerClient: Int
    var fetches: Int
    var bytes: Int
}

/// The pure accounting behind `DetachedFetchBudget`: claims in, refusals out, no clock, no locks.
struct DetachedFetchLedger: Sendable {
    enum Refusal: Error, Sendable, Equatable {
        case fetchesPerClient, bytesPerClient, fetches, bytes

        var description: String {
            switch self {
            case .fetchesPerClient: return "limits.detached_fetches_per_client"
            case .bytesPerClient: return "limits.detached_bytes_per_client"
            case .fetches: return "limits.detached_fetches"
            case .bytes: return "limits.detached_bytes"
            }
        }
    }

    private struct Usage: Sendable {
        var fetches = 0
        var bytes = 0
    }

    private var perClient: [[UInt8]: Usage] = [:]
    private var total = Usage()
    private var claims: [Int: (client: [UInt8], bytes: Int)] = [:]
    private var nextID = 1

    /// Claims room for one fetch of `client`'s that may still download `bytes`; the claim's id, or
    /// the first limit it would pass. A client's first detached download may be as large as any
    /// stored object (one range fill of a large file); the bytes per client bound the others.
    mutating func claim(client: [UInt8], bytes: Int, limits: DetachedFetchLimits) -> Result<Int, Refusal> {
        let mine = perClient[client] ?? Usage()
        if mine.fetches + 1 > limits.fetchesPerClient { return .failure(.fetchesPerClient) }
        if mine.fetches > 0, mine.bytes + bytes > limits.bytesPerClient { return .failure(.bytesPerClient) }
        if total.fetches + 1 > limits.fetches { return .failure(.fetches) }
        if total.bytes + bytes > limits.bytes { return .failure(.bytes) }
        perClient[client] = Usage(fetches: mine.fetches + 1, bytes: mine.bytes + bytes)
        total.fetches += 1
        total.bytes += bytes
        let id = nextID
        nextID += 1
        claims[id] = (client, bytes)
        return .success(id)
    }

    /// A download of unknown length claims as it goes: `bytes` more for claim `id`, or the limit
    /// that would pass (the claim keeps what it had).
    mutating func grow(_ id: Int, by bytes: Int, limits: DetachedFetchLimits) -> Refusal? {
        guard let (client, had) = claims[id] else { return nil }
        let mine = perClient[client] ?? Usage()
        if mine.fetches > 1, mine.bytes + bytes > limits.bytesPerClient { return .bytesPerClient }
        if total.bytes + bytes > limits.bytes { return .bytes }
        claims[id] = (client, had + bytes)
        perClient[client] = Usage(fetches: mine.fetches, bytes: mine.bytes + bytes)
        total.bytes += bytes
        return nil
    }

    mutating func release(_ id: Int) {
        guard let (client, bytes) = claims.removeValue(forKey: id) else { return }
        total.fetches -= 1
        total.bytes -= bytes
        if var mine = perClient[client] {
            mine.fetches -= 1
            mine.bytes -= bytes
            perClient[client] = mine.fetches > 0 ? mine : nil
        }
    }

    var fetchesInFlight: Int { total.fetches }
    var bytesClaimed: Int { total.bytes }
    func fetches(of client: [UInt8]) -> Int { perClient[client]?.fetches ?? 0 }
}

/// The ledger shared by every worker (a fetch is claimed and released on its own worker's loop,
/// once each; one of unknown length grows its claim a MiB at a time, never per body read).
final class DetachedFetchBudget: Sendable {
    private let ledger = Locked(DetachedFetchLedger())

    func claim(client: [UInt8], bytes: Int, limits: DetachedFetchLimits) -> Result<Int, DetachedFetchLedger.Refusal> {
        ledger.withLock { $0.claim(client: client, bytes: bytes, limits: limits) }
    }

    func grow(_ id: Int, by bytes: Int, limits: DetachedFetchLimits) -> DetachedFetchLedger.Refusal? {
        ledger.withLock { $0.grow(id, by: bytes, limits: limits) }
    }

    func release(_ id: Int) { ledger.withLock { $0.release(id) } }

    /// Releases `claim`, if any, and forgets it: each holder's one way out, however it ends.
    func release(_ claim: inout Int?) {
        guard let id = claim else { return }
        claim = nil
        release(id)
    }

    var fetchesInFlight: Int { ledger.withLock { $0.fetchesInFlight } }
}
