import Locking

/// Client connections open per client address, across workers, for
/// `limits.max_connections_per_client`. Touched once when a connection opens and once when it
/// closes, never per request.
final class ClientAddressCounts: Sendable {
    private let counts = Locked<[[UInt8]: Int]>([:])

    /// Counts one more connection from `address` unless it already has `limit`.
    func acquire(_ address: [UInt8], limit: Int) -> Bool {
        counts.withLock { c in
            let n = c[address, default: 0]
            guard limit == 0 || n < limit else { return false }
            c[address] = n + 1
            return true
        }
    }

    func release(_ address: [UInt8]) {
        counts.withLock { c in
            guard let n = c[address] else { return }
            c[address] = n > 1 ? n - 1 : nil
        }
    }

    func count(_ address: [UInt8]) -> Int { counts.withLock { $0[address, default: 0] } }
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
