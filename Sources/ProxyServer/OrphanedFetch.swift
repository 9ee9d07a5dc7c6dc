import EventLoop
import HTTPWire
import SessionClient

/// A collapsed fetch whose leading client went away: it runs on for the followers and the store.
final class OrphanedFetch: SessionTaskDelegate {
    unowned let worker: Worker
    let task: SessionTask
    let exchange: CacheExchange
    private lazy var pacer = WriterPacer(loop: worker.loop) { [unowned self] in self.task.resumeReading() }

    init(worker: Worker, task: SessionTask, exchange: CacheExchange) {
        self.worker = worker
        self.task = task
        self.exchange = exchange
    }

    func start() {
        task.delegate = self
        // The departed client may have paused the read; only the store paces it from now on.
        task.resumeReading()
    }

    func cancel() {
        pacer.cancel()
        task.cancel()
        exchange.completeFetch(error: .cancelled, policy: worker.settings.cache.policy, table: worker.inFlight)
        worker.orphanFinished(self)
    }


    func taskCanSendBody(_ task: SessionTask) {}
    func taskBodyDrained(_ task: SessionTask) {}
    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {}
    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) {}

    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        exchange.tee(source, count: count)
        if pacer.shouldPause(after: exchange.writer) { task.suspendReading() }
        source.drain(count)
    }

    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        pacer.cancel()
        exchange.completeFetch(error: error, policy: worker.settings.cache.policy, table: worker.inFlight)
        worker.orphanFinished(self)
    }
}
