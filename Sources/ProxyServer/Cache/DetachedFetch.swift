import CachePolicy
import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// A fetch with no client attached: one type for every download that runs on for the cache alone.
///
/// - `.followers`: collapsed followers read a download whose own client went away (or handed it
///   over, reading on as a follower itself). When the last follower leaves, the fetch is judged
///   as that client's abort would have been (`OriginRelay.worthFinishing`).
/// - `.finishing`: an aborted download mostly in (`cache.finish_aborted_fraction`).
/// - `.rangeFill`: a whole response fetched to fill the cache from a ranged miss, past the
///   client's range; judged as an abort if that client's connection closes before it is done.
/// - `.refresh`: RFC 5861 stale-while-revalidate. The client already has the stale entry; this
///   asks the origin on its own, the way the configuration says (HEAD by default; a plain GET for
///   an entry without validators, see `Revalidation.method`): unchanged → the stored head is
///   freshened; changed → the entry goes (every variant, as for a client's revalidation) and the
///   new response is fetched and stored. A 5xx or a failure before the origin says the entry
///   changed leaves it as it was. From the moment the entry goes, the refresh leads the URL's
///   collapsed fetch (`InFlightTable.lead`): requests that now miss, on any worker, follow it.
///
/// Once nobody reads it, a download goes on only within the client's share of
/// `DetachedFetchBudget` (`DetachedFetchRule` decides what to claim), or it is cut and its store
/// abandoned. The exchange's phases and decisions are the cache flow's own (`CacheExchange+Origin`);
/// the origin read's pacing is `OriginReadControl`'s, as for a client's fetch.
final class DetachedFetch: SessionTaskDelegate, CollapseParticipant {
    enum Purpose {
        case followers
        case finishing
        case rangeFill
        case refresh
    }

    unowned let worker: Worker
    let exchange: CacheExchange
    let purpose: Purpose
    /// The address whose budget it is counted against.
    let client: [UInt8]
    /// The client connection a range fill was for, until it closes (its identifier may then be
    /// another connection's).
    private(set) var connection: ObjectIdentifier?
    private var task: SessionTask?
    private let control: OriginReadControl
    /// Its place in the budget: a refresh's while it asks the origin, a download's once no reader
    /// is left.
    private var claim: Int?
    /// For a response of unknown length: the body length its claim covers.
    private var claimedUpTo: Int?
    /// A refresh's request: the client request that found the stale entry (its fields, Vary and
    /// credentials, go along).
    private let request: RequestHead?
    /// A refresh that has not reached the new response's download yet.
    private var revalidating: Bool

    /// Takes over `task`, a download under way whose client is gone.
    /// `claim`: room in the detached budget its client's connection already took for it (a hand-over).
    init(worker: Worker, task: SessionTask, exchange: CacheExchange, purpose: Purpose, client: [UInt8],
         connection: ObjectIdentifier? = nil, claim: Int? = nil) {
        self.worker = worker
        self.task = task
        self.exchange = exchange
        self.purpose = purpose
        self.client = client
        self.connection = connection
        request = nil
        revalidating = false
        self.claim = claim
        control = OriginReadControl(loop: worker.loop, clock: worker.clock, task: task)
    }

    /// A background refresh of `exchange`'s stale entry, found by `request`.
    init(worker: Worker, refreshing exchange: CacheExchange, request: RequestHead, client: [UInt8]) {
        self.worker = worker
        self.exchange = exchange
        self.request = request
        self.client = client
        purpose = .refresh
        revalidating = true
        connection = nil
        control = OriginReadControl(loop: worker.loop, clock: worker.clock)
        // The stored GET is refreshed, whatever the client asked; without validators, with a GET.
        let configured = worker.settings.cache.policy.revalidation
        exchange.revalidate(with: exchange.entry.map { Revalidation.method(for: .get, entry: $0.facts,
                                                                                configured: configured) } ?? configured)
        exchange.refreshLeader = ParticipantHandle(loop: worker.loop, target: self)
    }

    func start() {
        if revalidating { return startRefresh() }
        task?.delegate = self
        exchange.inFlight?.replaceLeader(ParticipantHandle(loop: worker.loop, target: self))
        if !goesOn() { return cancel() }
        // The departed client may have paused the read; the followers and the store pace it from now on.
        task?.resumeReading()
    }

    func cancel() {
        control.stop()
        task?.cancel()
        task = nil
        exchange.completeFetch(error: .cancelled, table: worker.inFlight)
        finished()
    }

    /// The range fill's client closed its connection: from now on the fill is an aborted download.
    func clientLeft() {
        connection = nil
        guard purpose == .rangeFill, !OriginRelay.worthFinishing(exchange, worker.settings.cache) else { return }
        worker.logger.info("range fill of \(upstream) cut: its client left before most of it was in")
        cancel()
    }

    private var upstream: String { String(decoding: exchange.host, as: UTF8.self) }

    private func finished() {
        worker.inFlight.detached.release(&claim)
        if purpose == .refresh { worker.inFlight.endRefresh(exchange.primaryKey) }
        worker.detachedFetchFinished(self)
    }

    /// Whether the download goes on: for its followers, or, with none, for the store alone.
    private func goesOn() -> Bool {
        (exchange.inFlight?.hasFollowers ?? false) || goesOnDetached()
    }

    /// Nobody reads the download: whether it may go on for the store alone, claiming what it needs.
    private func goesOnDetached() -> Bool {
        let facts = DetachedFetchRule.Facts(
            storing: exchange.writer.map { !$0.isAbandoned } ?? false,
            bodyLength: exchange.writer?.bodyLength ?? 0,
            announcedLength: exchange.announcedLength,
            claimed: claim != nil, claimedUpTo: claimedUpTo,
            judgedAsAbort: purpose == .followers,
            worthFinishing: OriginRelay.worthFinishing(exchange, worker.settings.cache))
        let limits = worker.settings.detachedFetches
        switch DetachedFetchRule.decide(facts) {
        case .goOn:
            return true
        case .stop:
            return false
        case .grow(let bytes):
            if let id = claim, let limit = worker.inFlight.detached.grow(id, by: bytes, limits: limits) {
                worker.noteDetachedCut(limit, client: client, upstream: upstream)
                return false
            }
            claimedUpTo = (claimedUpTo ?? 0) + bytes
            return true
        case .claim(let bytes, let coversUpTo):
            switch worker.inFlight.detached.claim(client: client, bytes: bytes, limits: limits) {
            case .success(let id):
                claim = id
                claimedUpTo = coversUpTo
                return true
            case .failure(let limit):
                worker.noteDetachedCut(limit, client: client, upstream: upstream)
                return false
            }
        }
    }

    // MARK: - A refresh's revalidation

    private func startRefresh() {
        // Gone offline since the stale entry was served: the entry stays as it is.
        guard !worker.settings.cache.policy.offline, let revalidation = exchange.outboundRevalidation(for: .get) else {
            return endRefresh()
        }
        // A refresh is a request with no client attached: it takes a place in the client's
        // detached budget (no bytes yet; a changed response's download claims its own), so one
        // client with many stale entries cannot start a refresh, a lookup and a socket for each.
        switch worker.inFlight.detached.claim(client: client, bytes: 0, limits: worker.settings.detachedFetches) {
        case .success(let id):
            claim = id
        case .failure(let limit):
            worker.noteDetachedCut(limit, client: client, upstream: upstream)
            return endRefresh()
        }
        send(revalidation)
    }

    private func send(_ revalidation: OutboundHead.Revalidation) {
        guard let request else { return }
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
        control.task = t
        t.resume()
    }

    /// The refresh ended before a new response could be shared: led since the entry went, the
    /// collapsed fetch releases its followers to fetch on their own.
    private func endRefresh() {
        control.stop()
        task = nil
        exchange.endCollapse(failed: true, table: worker.inFlight)
        finished()
    }

    // MARK: - CollapseParticipant

    /// Followers caught up (or a new one joined): the read goes on.
    func collapseProgress() {
        control.followersCaughtUp()
    }

    // MARK: - SessionTaskDelegate

    func taskCanSendBody(_ task: SessionTask) {}
    func taskBodyDrained(_ task: SessionTask) {}
    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {}

    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) {
        guard revalidating, let request else { return }
        let step = exchange.originHead(head, request: request, background: true, now: worker.clock.wallSeconds,
                                       cache: worker.cache, setup: worker.settings.cache, table: worker.inFlight)
        if case .revalidation(.refetch) = step { worker.stats.add(.revalidationHeadChanged) }
        // The new response, being stored or shared: from here on a download with no client.
        if case .fetching = exchange.phase, exchange.writer != nil || exchange.inFlight != nil {
            revalidating = false
            worker.inFlight.detached.release(&claim)   // the download claims a place of its own
            exchange.inFlight?.replaceLeader(ParticipantHandle(loop: worker.loop, target: self))
            if !goesOn() { return cancel() }
        }
    }

    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        // A revalidation's answer, or a changed response nobody keeps: the body is not wanted.
        if revalidating {
            return source.drain(count)
        }
        // Nobody left to read it: it goes on only as a detached fetch.
        if !goesOn() {
            source.drain(count)
            return cancel()
        }
        if exchange.tee(source, count: count), let fetch = exchange.inFlight { control.waitForFollowers(of: fetch) }
        control.paceStore(exchange.writer)
        source.drain(count)
    }

    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        self.task = nil
        control.stop()
        if revalidating {
            if let error {
                let url = String(decoding: exchange.primaryKey, as: UTF8.self)
                worker.logger.notice("background refresh of \(url) failed: \(error.message)")
            }
            switch exchange.originEnded(error: error, now: worker.clock.wallSeconds, table: worker.inFlight) {
            case .refetch where error == nil:
                // Without the client's conditionals or range: the whole new response, to store.
                return send(OutboundHead.Revalidation(method: .get, conditionalFields: []))
            case .done, .serveEntry, .refetch, .revalidationFailed:
                return endRefresh()
            }
        }
        // A fetch (phase `.fetching`): the store is committed or abandoned, then the followers told.
        _ = exchange.originEnded(error: error, now: worker.clock.wallSeconds, table: worker.inFlight)
        finished()
    }
}
