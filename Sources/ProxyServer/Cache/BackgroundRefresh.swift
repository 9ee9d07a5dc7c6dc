import CachePolicy
import CacheStore
import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// RFC 5861 stale-while-revalidate: the client already has the stale entry; this asks the origin
/// on its own, with no client attached. It revalidates the way the configuration says (HEAD by
/// default; a plain GET for an entry without validators, see `Revalidation.method`): unchanged →
/// the stored head is freshened; changed → the entry goes (every variant, as for a client's
/// revalidation) and the new response is fetched (conditional GET: it already is) and stored.
/// A 5xx or a failure before the origin says the entry changed leaves it as it was.
///
/// From the moment the entry goes, the refresh leads a collapsed fetch of the URL (when no other
/// fetch of it is under way): requests that now miss, on any worker, follow it rather than fetch
/// the URL again. Once the new response's head is in and it is being stored or shared, the rest
/// of the download is an `OrphanedFetch`'s: storing and feeding followers with no client.
/// The exchange's phase and the decisions are the cache flow's own (`CacheExchange+Origin`).
final class BackgroundRefresh: SessionTaskDelegate, CollapseParticipant {
    unowned let worker: Worker
    private let exchange: CacheExchange
    /// The client request that found the stale entry: its fields (Vary, credentials) go along.
    private let request: RequestHead
    /// The address of that client: its download counts against that client's detached budget.
    private let client: [UInt8]
    private var task: SessionTask?
    /// Its place in the client's detached budget while it asks the origin.
    private var claim: Int?

    init(worker: Worker, exchange: CacheExchange, request: RequestHead, client: [UInt8]) {
        self.worker = worker
        self.exchange = exchange
        self.request = request
        self.client = client
        // The stored GET is refreshed, whatever the client asked; without validators, with a GET.
        let configured = worker.settings.cache.policy.revalidation
        exchange.phase = .revalidating(exchange.entry.map { Revalidation.method(for: .get, entry: $0.facts,
                                                                                configured: configured) } ?? configured)
        exchange.refreshLeader = ParticipantHandle(loop: worker.loop, target: self)
    }

    func start() {
        // Gone offline since the stale entry was served: the entry stays as it is.
        guard !worker.settings.cache.policy.offline, let revalidation = exchange.outboundRevalidation(for: .get) else { return finish() }
        // A refresh is a request with no client attached: it takes a place in the client's
        // detached budget (no bytes yet; a changed response's download claims its own), so one
        // client with many stale entries cannot start a refresh, a lookup and a socket for each.
        switch worker.inFlight.detached.claim(client: client, bytes: 0, limits: worker.settings.detachedFetches) {
        case .success(let id):
            claim = id
        case .failure(let limit):
            worker.noteDetachedCut(limit, client: client, upstream: String(decoding: exchange.host, as: UTF8.self))
            return finish()
        }
        send(revalidation)
    }

    func cancel() {
        task?.cancel()
        task = nil
        exchange.completeFetch(error: .cancelled, table: worker.inFlight)
        finish()
    }

    private func send(_ revalidation: OutboundHead.Revalidation) {
        var writer = MessageWriter(capacity: 1_024)
        request.headers.withBytes(request.target) { target in
            let path = UnsafeRawBufferPointer(rebasing: target[exchange.pathRange])
            OutboundHead.write(request, targetPath: path, route: exchange.route, viaName: worker.settings.viaName,
                               additionalHeaders: worker.session.configuration.httpAdditionalHeaders,
                               parentCredentials: worker.session.configuration.parentProxy?.credentials,
                               upgrading: false, revalidation: revalidation, body: .none, into: &writer)
        }
        exchange.requestTime = worker.clock.wallSeconds
        let t = worker.session.dataTask(origin: exchange.origin, method: revalidation.method, head: writer.bytes,
                                        hasBody: false, isIdempotent: true, client: client, delegate: self)
        task = t
        t.resume()
    }

    /// `handedOff`: an `OrphanedFetch` carries on with the download and the collapsed fetch.
    private func finish(handedOff: Bool = false) {
        worker.inFlight.detached.release(&claim)
        // Led since the entry went, and ended before a new response could be shared: the
        // followers fetch on their own.
        if !handedOff { exchange.endCollapse(failed: true, table: worker.inFlight) }
        worker.inFlight.endRefresh(exchange.primaryKey)
        worker.refreshFinished(self)
    }

    /// Until the download is handed off there is no body for followers to lag behind.
    func collapseProgress() {}

    // MARK: - SessionTaskDelegate

    func taskCanSendBody(_ task: SessionTask) {}
    func taskBodyDrained(_ task: SessionTask) {}
    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {}

    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) {
        let step = exchange.originHead(head, request: request, background: true, now: worker.clock.wallSeconds,
                                       cache: worker.cache, setup: worker.settings.cache, table: worker.inFlight)
        if case .revalidation(.refetch) = step { worker.stats.add(.revalidationHeadChanged) }
        // The new response, being stored or shared: downloaded from here on as an orphaned fetch.
        if case .fetching = exchange.phase, exchange.writer != nil || exchange.inFlight != nil {
            self.task = nil
            worker.inFlight.detached.release(&claim)   // the download claims a place of its own
            worker.adopt(OrphanedFetch(worker: worker, task: task, exchange: exchange, purpose: .refresh, client: client))
            finish(handedOff: true)
        }
    }

    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        // Nothing kept and nobody following: the body is not wanted.
        source.drain(count)
    }

    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        self.task = nil
        if let error {
            let url = String(decoding: exchange.primaryKey, as: UTF8.self)
            worker.logger.notice("background refresh of \(url) failed: \(error.message)")
        }
        switch exchange.originEnded(error: error, now: worker.clock.wallSeconds, table: worker.inFlight) {
        case .refetch where error == nil:
            // Without the client's conditionals or range: the whole new response, to store.
            send(OutboundHead.Revalidation(method: .get, conditionalFields: []))
        case .done, .serveEntry, .refetch, .revalidationFailed:
            finish()
        }
    }
}
