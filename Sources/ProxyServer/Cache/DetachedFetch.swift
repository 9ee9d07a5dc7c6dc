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
/// abandoned. What to do at each event is `DetachedFetchMachine`'s to decide; this shell reads the
/// exchange for it and carries its actions out. The exchange's phases and decisions are the cache
/// flow's own (`CacheExchange+Origin`); the origin read's pacing is `OriginReadControl`'s, as for a
/// client's fetch.
final class DetachedFetch: SessionTaskDelegate, CollapseParticipant {
    typealias Purpose = DetachedFetchMachine.Purpose

    unowned let worker: Worker
    let exchange: CacheExchange
    /// The address whose budget it is counted against.
    let client: [UInt8]
    /// The client connection a range fill was for, until it closes (its identifier may then be
    /// another connection's).
    private(set) var connection: ObjectIdentifier?
    private var task: SessionTask?
    private let control: OriginReadControl
    private var machine: DetachedFetchMachine
    /// A refresh's request: the client request that found the stale entry (its fields, Vary and
    /// credentials, go along).
    private let request: RequestHead?

    var purpose: Purpose { machine.purpose }

    /// Takes over `task`, a download under way whose client is gone.
    /// `claim`: room in the detached budget its client's connection already took for it (a hand-over).
    init(worker: Worker, task: SessionTask, exchange: CacheExchange, purpose: Purpose, client: [UInt8],
         connection: ObjectIdentifier? = nil, claim: Int? = nil) {
        self.worker = worker
        self.task = task
        self.exchange = exchange
        self.client = client
        self.connection = connection
        request = nil
        machine = DetachedFetchMachine(purpose: purpose, claim: claim)
        control = OriginReadControl(loop: worker.loop, clock: worker.clock, task: task)
    }

    /// A background refresh of `exchange`'s stale entry, found by `request`.
    init(worker: Worker, refreshing exchange: CacheExchange, request: RequestHead, client: [UInt8]) {
        self.worker = worker
        self.exchange = exchange
        self.request = request
        self.client = client
        machine = DetachedFetchMachine(purpose: .refresh)
        connection = nil
        control = OriginReadControl(loop: worker.loop, clock: worker.clock)
        // The stored GET is refreshed, whatever the client asked; without validators, with a GET.
        let configured = worker.settings.cache.policy.revalidation
        exchange.revalidate(with: exchange.entry.map { Revalidation.method(for: .get, entry: $0.facts,
                                                                                configured: configured) } ?? configured)
        exchange.refreshLeader = ParticipantHandle(loop: worker.loop, target: self)
    }

    func start() {
        if machine.phase == .revalidating {
            // Gone offline since the stale entry was served: the entry stays as it is.
            let canAsk = !worker.settings.cache.policy.offline && exchange.outboundRevalidation(for: .get) != nil
            return perform(machine.refreshStarted(canAsk: canAsk))
        }
        task?.delegate = self
        exchange.inFlight?.replaceLeader(ParticipantHandle(loop: worker.loop, target: self))
        perform(machine.takenOver(download))
    }

    func cancel() {
        perform(machine.cancelled())
    }

    /// The range fill's client closed its connection: from now on the fill is an aborted download.
    func clientLeft() {
        connection = nil
        let action = machine.clientLeft(worthFinishing: OriginRelay.worthFinishing(exchange, worker.settings.cache))
        if case .cut = action {
            worker.logger.info("range fill of \(upstream) cut: its client left before most of it was in")
        }
        perform(action)
    }

    private var upstream: String { String(decoding: exchange.host, as: UTF8.self) }

    /// What the machine needs to judge whether the download goes on, as the exchange is now.
    private var download: DetachedFetchMachine.Download {
        let writer = exchange.writer
        return DetachedFetchMachine.Download(hasFollowers: exchange.inFlight?.hasFollowers ?? false,
                                             storing: writer.map { !$0.isAbandoned } ?? false,
                                             bodyLength: writer?.bodyLength ?? 0,
                                             announcedLength: exchange.announcedLength,
                                             worthFinishing: OriginRelay.worthFinishing(exchange, worker.settings.cache))
    }

    /// Carries out what the machine answered, and what it answers then, until it waits for the
    /// next event. `body`: the body bytes the event brought, if any, to pass on or drop.
    private func perform(_ first: DetachedFetchMachine.Action, body: (source: Buffer, count: Int)? = nil) {
        var action = first
        while true {
            switch action {
            case .none:
                return
            case .resumeRead:
                // The departed client may have paused the read; the followers and the store pace it from now on.
                task?.resumeReading()
                return
            case .passBody:
                guard let (source, count) = body else { return }
                if exchange.tee(source, count: count), let fetch = exchange.inFlight { control.waitForFollowers(of: fetch) }
                control.paceStore(exchange.writer)
                source.drain(count)
                return
            case .dropBody:
                if let (source, count) = body { source.drain(count) }
                return
            case .claim(let bytes):
                let answer = worker.inFlight.detached.claim(client: client, bytes: bytes,
                                                            limits: worker.settings.detachedFetches)
                action = machine.claimAnswered(answer)
            case .grow(let id, let bytes):
                action = machine.grewClaim(refusedBy: worker.inFlight.detached.grow(id, by: bytes,
                                                                                     limits: worker.settings.detachedFetches))
            case .ask(.revalidation):
                guard let revalidation = exchange.outboundRevalidation(for: .get) else { return }
                return send(revalidation)
            case .ask(.wholeResponse):
                // Without the client's conditionals or range: the whole new response, to store.
                return send(OutboundHead.Revalidation(method: .get, conditionalFields: []))
            case .lead(let releasing):
                var claim = releasing
                worker.inFlight.detached.release(&claim)   // the download claims a place of its own
                exchange.inFlight?.replaceLeader(ParticipantHandle(loop: worker.loop, target: self))
                action = machine.led(download)
            case .cut(let ending):
                if let (source, count) = body { source.drain(count) }
                noteRefusal(ending)
                control.stop()
                task?.cancel()
                task = nil
                exchange.completeFetch(error: .cancelled, table: worker.inFlight)
                return finished(ending.releasing)
            case .endRefresh(let ending):
                // Led since the entry went, the collapsed fetch releases its followers to fetch on their own.
                noteRefusal(ending)
                control.stop()
                task = nil
                exchange.endCollapse(failed: true, table: worker.inFlight)
                return finished(ending.releasing)
            case .finish(let releasing):
                return finished(releasing)
            }
        }
    }

    private func noteRefusal(_ ending: DetachedFetchMachine.Ending) {
        guard let limit = ending.refusedBy else { return }
        worker.noteDetachedCut(limit, client: client, upstream: upstream)
    }

    private func finished(_ releasing: Int?) {
        var claim = releasing
        worker.inFlight.detached.release(&claim)
        if purpose == .refresh { worker.inFlight.endRefresh(exchange.primaryKey) }
        worker.detachedFetchFinished(self)
    }

    // MARK: - A refresh's request

    private func send(_ revalidation: OutboundHead.Revalidation) {
        guard let request else { return }
        var writer = MessageWriter(capacity: 1_024)
        request.headers.withBytes(request.target) { target in
            let path = UnsafeRawBufferPointer(rebasing: target[exchange.pathRange])
            OutboundHead.write(request, targetPath: path, route: exchange.destination.route, viaName: worker.settings.viaName,
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
        // Only a refresh's answers come here: a download taken over is past its head.
        guard machine.phase == .revalidating, let request else { return }
        let step = exchange.originHead(head, request: request, background: true, now: worker.clock.wallSeconds,
                                       cache: worker.cache, setup: worker.settings.cache, table: worker.inFlight)
        if case .revalidation(.refetch) = step { worker.stats.add(.revalidationHeadChanged) }
        // The new response, being stored or shared: from here on a download with no client.
        var newDownload = false
        if case .fetching = exchange.phase { newDownload = exchange.writer != nil || exchange.inFlight != nil }
        perform(machine.refreshAnswered(newDownload: newDownload))
    }

    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        perform(machine.bodyArrived(download), body: (source, count))
    }

    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        self.task = nil
        control.stop()
        if let error, machine.phase == .revalidating {
            let url = String(decoding: exchange.primaryKey, as: UTF8.self)
            worker.logger.notice("background refresh of \(url) failed: \(error.message)")
        }
        // A download's store is committed or abandoned, then its followers told; a refresh's
        // revalidation says whether to ask again for the whole new response.
        let step = exchange.originEnded(error: error, now: worker.clock.wallSeconds, table: worker.inFlight)
        var refetch = false
        if case .refetch = step { refetch = error == nil }
        perform(machine.originEnded(refetch: refetch))
    }
}
