import Locking
import Synchronization

/// What each client address holds, across workers: its connections open, for
/// `limits.max_connections_per_client`, touched once when a connection opens and once when it
/// closes; and its requests at origins, for `limits.origin_fetches_per_client`, counted on the
/// address's `ClientShare` (an atomic, no lock and no lookup per request).
final class ClientAddressCounts: Sendable {
    private let shares = Locked<[[UInt8]: ClientShare]>([:])

    /// One more connection from `address`, unless it already has `limit` (0: no limit): the
    /// share its requests count on, released when the connection closes.
    func acquire(_ address: [UInt8], limit: Int) -> ClientShare? {
        shares.withLock { all in
            let share = all[address] ?? ClientShare()
            guard limit == 0 || share.connections < limit else { return nil }
            share.connections += 1
            all[address] = share
            return share
        }
    }

    func release(_ address: [UInt8]) {
        shares.withLock { all in
            guard let share = all[address] else { return }
            share.connections -= 1
            if share.connections == 0 { all[address] = nil }
        }
    }

    func count(_ address: [UInt8]) -> Int { shares.withLock { $0[address]?.connections ?? 0 } }
}

/// One client address's share of the budgets counted per address.
final class ClientShare: @unchecked Sendable {
    /// Connections open; read and written under `ClientAddressCounts`' lock only.
    fileprivate var connections = 0
    private let originFetches = Atomic<Int>(0)

    /// One more of the address's requests goes to an origin, unless `limit` already do (0: no limit).
    func claimOriginFetch(limit: Int) -> Bool {
        let n = originFetches.wrappingAdd(1, ordering: .relaxed).newValue
        if limit > 0, n > limit {
            originFetches.wrappingSubtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func releaseOriginFetch() { originFetches.wrappingSubtract(1, ordering: .relaxed) }

    var originFetchesInFlight: Int { originFetches.load(ordering: .relaxed) }
}

/// What a connection Larder will not serve is told before it is closed (lingering, so the
/// answer is not lost to a reset while the client is still sending its request).
enum ConnectionRefusal {
    case full
    case perClient

    /// The answer, with this configuration's Cache-Status (made once, in `LocalAnswers`).
    func response(_ answers: LocalAnswers) -> [UInt8] {
        switch self {
        case .full: return answers.refusedFull
        case .perClient: return answers.refusedPerClient
        }
    }

    func canned(cacheStatus: [UInt8]) -> [UInt8] {
        let (status, reason, message) = switch self {
        case .full: (503, "Service Unavailable", "this proxy has as many connections as it may serve; retry shortly")
        case .perClient: (429, "Too Many Requests", "too many connections from your address")
        }
        let body = message + "\n"
        return Array(("HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/plain; charset=utf-8\r\n"
                      + "Content-Length: \(body.utf8.count)\r\nRetry-After: 1\r\nCache-Status: ").utf8)
            + cacheStatus + Array("\r\nConnection: close\r\n\r\n\(body)".utf8)
    }
}
