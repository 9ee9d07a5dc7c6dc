import EventLoop
import HTTPWire
import SessionClient

/// A download no client of its own reads any more: it runs on for collapsed followers and the
/// store. Once nobody at all reads it, it is a detached fetch: it goes on only as an aborted
/// download would (a collapsed fetch whose last follower left), and only within the client's share
/// of `DetachedFetchBudget`, or it is cut and its store abandoned.
final class OrphanedFetch: SessionTaskDelegate, CollapseParticipant {
    /// Why it was left running.
    enum Purpose {
        /// Collapsed followers read it. When the last leaves, the fetch is judged as the leading
        /// client's abort would have been (`OriginRelay.worthFinishing`), whether it ever had
        /// followers or not.
        case followers
        /// An aborted download mostly in (`OriginRelay.worthFinishing`).
        case finishing
        /// A whole response fetched to fill the cache from a ranged miss, past the client's range.
        /// If the client's connection closes before it is done, it is judged as an abort.
        case rangeFill
        /// A background refresh's new response.
        case refresh
    }

    unowned let worker: Worker
    let task: SessionTask
    let exchange: CacheExchange
    let purpose: Purpose
    /// The address whose budget it is counted against.
    let client: [UInt8]
    /// The client connection a range fill was for, until it closes (its identifier may then be
    /// another connection's).
    private(set) var connection: ObjectIdentifier?
    /// Its place in the budget, once no reader is left.
    private var claim: Int?
    /// For a response of unknown length: the body length its claim covers (it grows by `claimStep`).
    private var claimedUpTo: Int?
    static let claimStep = 1 << 20
    /// What holds the read back: the followers and the store (no client any more).
    private var gate: OriginReadGate = []
    private lazy var pacer = WriterPacer(loop: worker.loop) { [unowned self] in self.resume(.store) }
    private lazy var stallWatch = Timer(loop: worker.loop) { [unowned self] in self.checkStalledFollowers() }

    init(worker: Worker, task: SessionTask, exchange: CacheExchange, purpose: Purpose, client: [UInt8],
         connection: ObjectIdentifier? = nil) {
        self.worker = worker
        self.task = task
        self.exchange = exchange
        self.purpose = purpose
        self.client = client
        self.connection = connection
    }

    func start() {
        task.delegate = self
        exchange.inFlight?.replaceLeader(ParticipantHandle(loop: worker.loop, target: self))
        if !(exchange.inFlight?.hasFollowers ?? false), !goesOnDetached() { return cancel() }
        // The departed client may have paused the read; the followers and the store pace it from now on.
        task.resumeReading()
    }

    func cancel() {
        pacer.cancel()
        stallWatch.cancel()
        task.cancel()
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
        worker.orphanFinished(self)
    }

    /// Nobody reads the download: whether it may go on for the store alone. Followers gone from a
    /// fetch nobody else asked to finish make it an aborted download; any detached download needs
    /// room in the budget, claimed once for the bytes it may still bring, or, for a response of
    /// unknown length, a step at a time as it arrives.
    private func goesOnDetached() -> Bool {
        // Nothing being stored any more (too large, the disk full): nothing to go on for.
        guard let writer = exchange.writer, !writer.isAbandoned else { return false }
        let limits = worker.settings.detachedFetches
        if let id = claim {
            // Unknown length: the claim grows a step at a time, ahead of what has arrived.
            guard let covered = claimedUpTo, writer.bodyLength >= covered else { return true }
            if let limit = worker.inFlight.detached.grow(id, by: OrphanedFetch.claimStep, limits: limits) {
                worker.noteDetachedCut(limit, client: client, upstream: upstream)
                return false
            }
            claimedUpTo = covered + OrphanedFetch.claimStep
            return true
        }
        if purpose == .followers, !OriginRelay.worthFinishing(exchange, worker.settings.cache) { return false }
        var bytes = OrphanedFetch.claimStep
        if case .contentLength(let total)? = exchange.storedResponse?.framing {
            bytes = max(0, total - writer.bodyLength)
        } else {
            claimedUpTo = writer.bodyLength + bytes
        }
        switch worker.inFlight.detached.claim(client: client, bytes: bytes, limits: limits) {
        case .success(let id):
            claim = id
            return true
        case .failure(let limit):
            worker.noteDetachedCut(limit, client: client, upstream: upstream)
            return false
        }
    }

    func taskCanSendBody(_ task: SessionTask) {}
    func taskBodyDrained(_ task: SessionTask) {}
    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {}
    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) {}

    func collapseProgress() {
        stallWatch.cancel()
        resume(.followers)
    }

    private func pause(_ source: OriginReadGate) {
        gate.insert(source)
        task.suspendReading()
    }

    private func resume(_ source: OriginReadGate) {
        gate.remove(source)
        if gate.isEmpty { task.resumeReading() }
    }

    /// As a client leader does (`OriginRelay.checkStalledFollowers`).
    private func checkStalledFollowers() {
        guard gate.contains(.followers), let fetch = exchange.inFlight else { return }
        if fetch.detachStalled(now: worker.clock.monotonic) {
            stallWatch.schedule(after: InFlightTable.stallTimeout)
        } else {
            collapseProgress()
        }
    }

    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        // Nobody left to read it: it goes on only as a detached fetch.
        if !(exchange.inFlight?.hasFollowers ?? false), !goesOnDetached() {
            source.drain(count)
            return cancel()
        }
        if exchange.tee(source, count: count) {
            pause(.followers)
            stallWatch.schedule(after: InFlightTable.stallTimeout)
        }
        if pacer.shouldPause(after: exchange.writer) { pause(.store) }
        source.drain(count)
    }

    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        pacer.cancel()
        stallWatch.cancel()
        // A fetch (phase `.fetching`): the store is committed or abandoned, then the followers told.
        _ = exchange.originEnded(error: error, now: worker.clock.wallSeconds, table: worker.inFlight)
        finished()
    }
}
