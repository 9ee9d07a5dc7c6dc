import CacheStore
import EventLoop

/// A request for a URL whose response was just fetched: its entry is complete but the disk writer
/// has not committed it yet. The request waits for the commit (polled, like `WriterPacer`, for at
/// most `limit` seconds) and is then routed again, to find the entry, instead of fetching the
/// object a second time or being served a response stored before it.
final class CommitWait {
    private weak var connection: ClientConnection?
    private let cache: Cache
    private let primaryKey: [UInt8]
    private var timer: Timer?
    private var polls = 0

    static let pollInterval = 0.005
    static let limit = 3.0

    /// Starts waiting; the connection's request is routed again when the wait ends.
    static func start(_ c: ClientConnection, primaryKey: [UInt8]) {
        let wait = CommitWait(connection: c, cache: c.worker.cache, primaryKey: primaryKey)
        c.context.commitWaited = true
        c.send(.checkPending)
        // The timer's callback holds the wait until it ends (`finish` breaks the cycle).
        wait.timer = Timer(loop: c.worker.loop) { wait.poll() }
        wait.timer?.schedule(after: CommitWait.pollInterval)
    }

    private init(connection: ClientConnection, cache: Cache, primaryKey: [UInt8]) {
        self.connection = connection
        self.cache = cache
        self.primaryKey = primaryKey
    }

    private func poll() {
        polls += 1
        if cache.isCommitPending(primaryKey: primaryKey), Double(polls) * CommitWait.pollInterval < CommitWait.limit,
           connection != nil {
            timer?.schedule(after: CommitWait.pollInterval)
            return
        }
        timer = nil
        connection?.checkFinished(nil)
    }
}
