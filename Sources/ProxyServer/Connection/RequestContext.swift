import CacheStore
import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// What is left of a request's body to read from the client.
enum RequestBody: Equatable {
    case done
    case contentLength(remaining: Int)
    case chunked
}

/// Everything that belongs to one request on a client connection. The next request's head
/// replaces it whole (`ConnectionMachine` on `headParsed`), so nothing of one request can leak
/// into the next.
struct RequestContext {
    var request = RequestHead()
    /// The body the client announced is owed: read exactly once, by the one exchange that forwards
    /// it, or the connection closes after the answer. Never re-derived from the head, so no second
    /// exchange can read the next request as a body.
    var body = RequestBody.done
    /// The body has gone (or is going) to an origin: it cannot be sent again.
    var bodyForwarded = false
    var bodyDecoder = ChunkedDecoder()
    /// Decoded bytes of a chunked body, for `limits.max_request_body`.
    var chunkedBodyBytes = 0
    /// Decided by the connection's machine alone.
    var keepAlive = true
    /// The answer's side, written by the connection's `Responder` alone.
    var answer = AnswerState()
    /// A WebSocket upgrade was asked of the origin.
    var upgrading = false
    /// Where the request went, for messages; formatted only when one is written.
    var upstream: OriginKey?
    /// A background credential check's answer, kept while the request is routed again.
    var authVerdict: ProxyAuthenticator.Verdict?
    /// A `PURGE` waiting for the disk writer, then what became of it (`Purge.handle`).
    var purge: PendingPurge?

    struct PendingPurge {
        let url: String
        let variants: Int
        var result: RemovalOutcome.Result?
    }
    /// A parent-proxy destination check's answer that came after a lookup, for the same reason.
    var destinationAnswer: ParentProxyDestinations.Answer?
    /// The cache's part in the request, if any.
    var cache: CacheExchange?
    /// A registry mirror's part in the request, if it is one's (`routeToMirror`).
    var mirror: MirrorExchange?
    /// The request waited once for a just-fetched entry's commit (`CommitWait`); it does not wait twice.
    var commitWaited = false

    init() {}

    private init(start: RequestStart, draining: Bool) {
        body = start.body
        keepAlive = start.keepAlive && !draining
        answer.log = RequestLog(start: start.at)
    }

    /// A new request, whose head is already in `request`: everything else is replaced in one
    /// assignment (the head is moved across, not copied).
    mutating func begin(_ start: RequestStart, draining: Bool) {
        var next = RequestContext(start: start, draining: draining)
        swap(&next.request, &request)
        self = next
    }

    var bodyPending: Bool { body != .done }
    var upstreamName: String { upstream?.description ?? "" }
}

/// How far the answer to a request has got, and what the access log will say of it.
struct AnswerState {
    /// The response head has gone to the client: from now on a failure can only be a cut.
    var started = false
    /// How the response body is framed for the client.
    var framing = ClientFraming.none
    var continueSent = false
    var log = RequestLog()
}

/// What a request did, for the access log: noted as it happens, written once.
struct RequestLog {
    var start = 0.0
    var status = 0
    var bytes = 0
    /// Bytes the client sent through a tunnel.
    var bytesFromClient = 0
    var cache: StaticString = "-"
    var written = true

    init() {}

    init(start: Double) {
        self.start = start
        written = false
    }

    /// The access log's word for a cache lookup's result.
    static func cacheWord(for result: Count) -> StaticString {
        switch result {
        case .lookupHit: return "hit"
        case .lookupMiss: return "miss"
        case .lookupRevalidatedUnchanged: return "revalidated"
        case .lookupRevalidatedChanged: return "changed"
        case .lookupStaleServed: return "stale"
        case .lookupOnlyIfCachedMiss: return "offline-miss"
        case .collapsedRequests: return "collapsed"
        default: return "pass"
        }
    }
}

/// An intercepted CONNECT: its destination, where the origin-form requests on its connection go,
/// and what its access-log line says, written when the connection ends with the bytes that crossed
/// it each way, as a tunnel's is. A class: a connection that is not intercepted (most are) carries
/// one empty reference for it.
final class InterceptedConnect {
    let origin: OriginKey
    let request: RequestHead
    let log: RequestLog
    var logged = false

    init(origin: OriginKey, request: RequestHead, log: RequestLog) {
        self.origin = origin
        self.request = request
        self.log = log
    }

    /// The same destination for one HTTP/2 stream's exchange, whose end logs nothing (the
    /// connection's does).
    func forStream() -> InterceptedConnect {
        let copy = InterceptedConnect(origin: origin, request: request, log: log)
        copy.logged = true
        return copy
    }

    /// The tunnel's access-log line (once), with the bytes that crossed `stream` each way.
    func logTunnel(carriedBy stream: Stream, client: [UInt8], worker: Worker) {
        guard !logged else { return }
        logged = true
        guard let buffer = worker.accessLog else { return }
        let carried = stream.tlsBytesCarried
        let clock = worker.clock
        buffer.append(AccessLogBuffer.Entry(client: client, request: request, origin: nil,
                                            status: log.status, bodyBytes: carried?.toPeer ?? 0,
                                            bytesFromClient: carried?.fromPeer ?? 0, cache: log.cache,
                                            seconds: clock.monotonic - log.start, time: clock.wallSeconds))
    }
}
