import Synchronization

/// Everything a worker counts while it serves. Each case is one time series; `Metrics.table`
/// groups them into named metrics with labels.
public enum Count: Int, CaseIterable, Sendable {
    case connectionsAccepted
    case requestGET, requestHEAD, requestPOST, requestPUT, requestDELETE, requestPATCH, requestOPTIONS
    case requestCONNECT, requestOther
    case response1xx, response2xx, response3xx, response4xx, response5xx
    case lookupHit, lookupMiss, lookupRevalidatedUnchanged, lookupRevalidatedChanged, lookupStaleServed
    case lookupOnlyIfCachedMiss, lookupPass
    case revalidationHeadChanged
    case clientBytesFromCache, clientBytesFromOrigin
    case collapsedRequests, collapsedFollowersDetached
    case originRequestsNewConnection, originRequestsReusedConnection
    case originErrorDNS, originErrorRefused, originErrorConnect, originErrorTimeout, originErrorTLS
    case originErrorInvalidResponse, originErrorPrematureClose
    case deniedClient, deniedDestination, deniedConnectPort, authMissing, authFailed
    case connectionsRefusedFull, connectionsRefusedPerClient
    case authChecksRefusedQueueFull, authChecksRefusedPerClient
    case clientTLSHandshakes, clientTLSHandshakeFailures, connectsIntercepted
    /// HTTP/2 from clients: connections, streams (requests), the connections ended for a
    /// protocol error or abuse (floods, rapid reset), and the streams answered by an exchange an
    /// earlier stream of the connection left waiting (rather than one made for them).
    case h2Connections, h2Streams, h2ConnectionErrors, h2ExchangesReused
    case offlineRefusals
    /// `proxy_protocol` listeners: connections from outside `proxy_protocol_from`, and ones whose
    /// header was missing, malformed or late.
    case connectionsRefusedProxyUntrusted, connectionsRefusedProxyHeader
    /// Downloads with no client attached that were cut, by the limit that cut them.
    case detachedCutPerClientFetches, detachedCutPerClientBytes, detachedCutFetches, detachedCutBytes
    case handOversRefusedPerClientFetches, handOversRefusedPerClientBytes, handOversRefusedFetches, handOversRefusedBytes
    /// Requests refused because their client had too many at origins already.
    case originFetchesRefusedPerClient
}

/// What a worker reports about its state, refreshed by the worker itself.
public enum Level: Int, CaseIterable, Sendable {
    case clientConnectionsOpen
    case originConnectionsOpen
    case originConnectionsIdle
    /// Origin connections closed instead of reused: unread bytes after a response (desync).
    case originConnectionsDiscardedUnsafe
    /// How late the worker's periodic tick last ran, in microseconds.
    case loopLagMicroseconds
    /// TLS handshakes with origins so far, and how many resumed a session (from the session client).
    case originTLSHandshakes
    case originTLSResumptions
    /// Requests sent to origins as HTTP/2 streams (`session.http2`).
    case originH2Streams
}

/// One worker's counters and levels. Only that worker writes them (relaxed atomics, no sharing
/// of cache lines with other workers' writes); anyone may read them.
// @unchecked: the pointers are only ever used through the atomics they point to.
public final class WorkerStatistics: @unchecked Sendable {
    @usableFromInline let counts: UnsafeMutablePointer<Atomic<UInt64>>
    @usableFromInline let levels: UnsafeMutablePointer<Atomic<Int64>>

    public init() {
        counts = .allocate(capacity: Count.allCases.count)
        for i in 0..<Count.allCases.count { (counts + i).initialize(to: Atomic(0)) }
        levels = .allocate(capacity: Level.allCases.count)
        for i in 0..<Level.allCases.count { (levels + i).initialize(to: Atomic(0)) }
    }

    deinit {
        counts.deinitialize(count: Count.allCases.count)
        counts.deallocate()
        levels.deinitialize(count: Level.allCases.count)
        levels.deallocate()
    }

    @inlinable @inline(__always)
    public func add(_ c: Count, _ n: Int = 1) {
        counts[c.rawValue].wrappingAdd(UInt64(truncatingIfNeeded: n), ordering: .relaxed)
    }

    @inlinable
    public func set(_ l: Level, _ value: Int) {
        levels[l.rawValue].store(Int64(value), ordering: .relaxed)
    }

    public subscript(_ c: Count) -> UInt64 { counts[c.rawValue].load(ordering: .relaxed) }

    public subscript(_ l: Level) -> Int64 { levels[l.rawValue].load(ordering: .relaxed) }
}

extension Count {
    /// The response counter for a status code.
    public static func response(status: Int) -> Count {
        switch status {
        case ..<200: return .response1xx
        case 200..<300: return .response2xx
        case 300..<400: return .response3xx
        case 400..<500: return .response4xx
        default: return .response5xx
        }
    }
}
