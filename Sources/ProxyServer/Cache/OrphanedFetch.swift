import EventLoop
import HTTPWire
import SessionClient

/// A collapsed fetch whose leading client went away: it runs on for the followers and the store.
final class OrphanedFetch: SessionTaskDelegate, CollapseParticipant {
    unowned let worker: Worker
    let task: SessionTask
    let exchange: CacheExchange
    /// What holds the read back: the followers and the store (no client any more).
    private var gate: OriginReadGate = []
    private lazy var pacer = WriterPacer(loop: worker.loop) { [unowned self] in self.resume(.store) }
    private lazy var stallWatch = Timer(loop: worker.loop) { [unowned self] in self.checkStalledFollowers() }

    init(worker: Worker, task: SessionTask, exchange: CacheExchange) {
        self.worker = worker
        self.task = task
        self.exchange = exchange
    }

    func start() {
        task.delegate = self
        exchange.inFlight?.replaceLeader(ParticipantHandle(loop: worker.loop, target: self))
        // The departed client may have paused the read; the followers and the store pace it from now on.
        task.resumeReading()
    }

    func cancel() {
        pacer.cancel()
        stallWatch.cancel()
        task.cancel()
        exchange.completeFetch(error: .cancelled, table: worker.inFlight)
        worker.orphanFinished(self)
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
        // Nobody left to read it and nothing being stored (given up, e.g. the disk filled): stop.
        if exchange.writer.map({ $0.isAbandoned }) ?? true, !(exchange.inFlight?.hasFollowers ?? false) {
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
        worker.orphanFinished(self)
    }
}
