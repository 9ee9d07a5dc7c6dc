import CacheStore
import EventLoop

/// Waits, without blocking the loop, for the disk writer to commit a purge: the answer to an
/// operator's `PURGE` or `DELETE /cache` is given only once the removal is done (or failed, or not
/// confirmed within `Cache.purgeConfirmSeconds`), while the worker goes on serving everyone else.
/// `completion` runs exactly once, on `loop`.
final class RemovalWait: @unchecked Sendable {
    private let loop: EventLoop
    /// Touched only on `loop`'s thread.
    private var completion: ((RemovalOutcome.Result) -> Void)?
    /// Freed with the wait, never from its own callback. The wait lives as long as the writer may
    /// still answer (its callback holds it).
    private var timer: Timer?

    init(_ outcome: RemovalOutcome, loop: EventLoop, completion: @escaping (RemovalOutcome.Result) -> Void) {
        self.loop = loop
        self.completion = completion
        let t = Timer(loop: loop) { [weak self] in self?.finish(.timedOut) }
        timer = t
        t.schedule(after: Cache.purgeConfirmSeconds)
        outcome.whenFinished { [self] committed in
            loop.execute { [self] in finish(committed ? .committed : .failed) }
        }
    }

    private func finish(_ result: RemovalOutcome.Result) {
        guard let done = completion else { return }
        completion = nil
        timer?.cancel()
        done(result)
    }
}
