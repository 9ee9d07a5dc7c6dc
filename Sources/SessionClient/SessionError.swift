import HTTPWire

/// Why a task failed. Each maps to the status a proxy answers with.
public enum SessionError: Error, Sendable, Equatable {
    case dnsFailure(host: String, reason: String)
    /// No name server answered within `seconds` (the lookup's own timeout, or the connect timeout
    /// while the name was still being looked up).
    case dnsTimeout(host: String, seconds: Int)
    /// The lookup was not started: too many are pending for this client, this domain or worker.
    case dnsBusy(host: String, reason: String)
    case connectionRefused(upstream: String)
    case connectFailed(upstream: String, reason: String)
    case connectTimeout(upstream: String)
    /// The TLS handshake or certificate verification failed; never downgraded to plain text.
    case tlsFailure(upstream: String, reason: String)
    /// No bytes from the origin for `timeoutIntervalForRequest`.
    case requestTimeout(upstream: String)
    /// The whole exchange exceeded `timeoutIntervalForResource`.
    case resourceTimeout(upstream: String)
    case invalidResponse(upstream: String, HTTPWireError)
    case responseHeadTooLarge(upstream: String)
    /// The origin closed or reset before the response was complete.
    case prematureClose(upstream: String)
    case cancelled
    /// Every address the name resolved to is one Larder must not contact (a deny-list, itself).
    case destinationDenied(upstream: String, reason: String)
    /// The session is offline (`cache.offline`): nothing was sent.
    case offline(upstream: String)
    /// The parent proxy refused `request` (`CONNECT host:port`, or a request for an http origin)
    /// with `status`: any non-2xx answer to CONNECT, and a 407 to anything (it wants other
    /// credentials than `session.proxy_credentials_file` gave it).
    case parentRefused(parent: String, request: String, status: Int)
    /// The parent proxy sent bytes of its own behind its 2xx answer, before Larder started TLS.
    case parentSentEarlyBytes(parent: String, target: String)

    /// 504 for timeouts, 502 for everything else the origin did wrong.
    public var status: Int {
        switch self {
        case .connectTimeout, .requestTimeout, .resourceTimeout, .dnsTimeout: return 504
        case .destinationDenied: return 403
        case .offline, .dnsBusy: return 503
        default: return 502
        }
    }

    /// One line naming the cause and the upstream, for error bodies and logs.
    public var message: String {
        switch self {
        case .dnsFailure(let host, let reason): return "DNS lookup for \(host) failed: \(reason)"
        case .dnsTimeout(let host, let seconds):
            return "DNS lookup for \(host) timed out: no answer from the name servers within \(seconds) s"
        case .dnsBusy(let host, let reason): return "DNS lookup for \(host) not started: \(reason); retry shortly"
        case .connectionRefused(let u): return "connection refused by upstream \(u)"
        case .connectFailed(let u, let r): return "cannot connect to upstream \(u): \(r)"
        case .connectTimeout(let u): return "timed out connecting to upstream \(u)"
        case .tlsFailure(let u, let r): return "TLS with upstream \(u) failed: \(r)"
        case .requestTimeout(let u): return "upstream \(u) sent nothing within the request timeout"
        case .resourceTimeout(let u): return "upstream \(u) exceeded the resource timeout"
        case .invalidResponse(let u, let e): return "invalid response from upstream \(u): \(e.reason)"
        case .responseHeadTooLarge(let u): return "response head from upstream \(u) too large"
        case .prematureClose(let u): return "upstream \(u) closed the connection before the response was complete"
        case .cancelled: return "cancelled"
        case .destinationDenied(let u, let r): return "\(u) may not be reached through this proxy: \(r)"
        case .offline(let u): return "Larder is offline (cache.offline): nothing is sent to upstream \(u)"
        case .parentRefused(let p, let r, 407):
            return "parent proxy \(p) refused \(r) with 407: it wants credentials "
                + "(session.proxy_credentials_file missing or not accepted)"
        case .parentRefused(let p, let r, let status):
            return "parent proxy \(p) refused \(r) with \(status)"
        case .parentSentEarlyBytes(let p, let t):
            return "parent proxy \(p) sent data after its answer to CONNECT \(t), before TLS started"
        }
    }
}
