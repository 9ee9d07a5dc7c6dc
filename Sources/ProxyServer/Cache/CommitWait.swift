import CacheStore
import EventLoop

/// A request for a URL whose response was just fetched: its entry is complete but the disk writer
/// has not committed it yet. The request waits for the commit (the writer calls back once it is
/// made, `Cache.whenCommitted`, and the call is posted to the worker's loop), for at most `limit`
/// seconds, and is then routed again, to find the entry, instead of fetching the object a second
/// time or being served a response stored before it.
final class CommitWait: @unchecked Sendable {
    /// Touched only on the worker's loop.
    private weak var connection: ClientConnection?
    private var timer: Timer?
    private var ended = false

    static let limit = 3.0

    /// Starts waiting; the connection's request is routed again when the wait ends.
    static func start(_ c: ClientConnection, primaryKey: [UInt8]) {
        let wait = CommitWait(connection: c)
        c.context.commitWaited = true
        c.send(.checkPending)
        let loop = c.worker.loop
        // The writer's callback holds the wait until it comes; the timer only refers to it.
        wait.timer = Timer(loop: loop) { [weak wait] in wait?.finish() }
        wait.timer?.schedule(after: CommitWait.limit)
        c.worker.cache.whenCommitted(primaryKey: primaryKey) { loop.execute { wait.finish() } }
    }

    private init(connection: ClientConnection) {
        self.connection = connection
    }

    private func finish() {
        guard !ended else { return }
        ended = true
        timer?.cancel()
        connection?.checkFinished(nil)
    }
}
