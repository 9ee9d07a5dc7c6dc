import EventLoop
import Glibc
import Locking

/// Warms a list of URLs through a proxy, `concurrency` at a time, each on its own thread and
/// keep-alive connection. Used by `larder warm` and by the admin endpoint's `POST /warm`; the
/// requests are plain proxy requests, so every rule that applies to clients applies to them.
public final class WarmJob: Sendable {
    public let list: WarmList
    public let proxy: WarmProxy
    public let concurrency: Int
    private let timeout: Double
    private let cacheName: String?
    private let state: Locked<State>
    private let sockets = OpenSockets()
    /// Times the job (`elapsed`): the proxy's clock for `POST /warm`, the system's for `larder warm`.
    private let clock: any ProxyClock
    /// Monotonic seconds when the job was made.
    public let startedAt: Double

    private struct State {
        var tally: WarmTally
        var next = 0
        var running = 0
        var finishedAt: Double?
        var threads: [LoopThread] = []
    }

    public init(list: WarmList, proxy: WarmProxy, concurrency: Int, timeout: Double, cacheName: String?,
                clock: any ProxyClock = SystemClock.shared) {
        self.clock = clock
        self.list = list
        self.proxy = proxy
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.cacheName = cacheName
        var tally = WarmTally(total: list.count)
        // Lines that are no URL fail at once; they are reported like any other failure.
        for r in list.rejected { tally.record(.failed(r.reason), url: "line \(r.line): \(r.text)") }
        state = Locked(State(tally: tally))
        startedAt = clock.monotonic
    }

    /// Starts the threads; `finished` is called on the last one once every URL is done.
    public func start(finished: @escaping @Sendable (WarmTally) -> Void = { _ in }) {
        let count = min(concurrency, list.urls.count)
        if count == 0 {
            let t = state.withLock { s -> WarmTally in
                s.finishedAt = self.clock.monotonic
                return s.tally
            }
            finished(t)
            return
        }
        state.withLock { s in
            s.running = count
            for _ in 0..<count {
                let t = LoopThread { [self] in
                    self.work()
                    let done = self.state.withLock { s -> WarmTally? in
                        s.running -= 1
                        guard s.running == 0 else { return nil }
                        s.finishedAt = self.clock.monotonic
                        return s.tally
                    }
                    if let done { finished(done) }
                }
                s.threads.append(t)
            }
        }
        for t in state.withLock({ $0.threads }) { t.start() }
    }

    private func work() {
        let connection = WarmConnection(proxy: proxy, timeout: timeout, cacheName: cacheName, sockets: sockets)
        while true {
            let index = state.withLock { s -> Int? in
                guard s.next < list.urls.count else { return nil }
                s.next += 1
                return s.next - 1
            }
            guard let index else { return }
            let url = list.urls[index]
            let result = sockets.isCancelled ? (outcome: WarmOutcome.failed("cancelled"), bytes: 0) : connection.fetch(url)
            state.withLock { $0.tally.record(result.outcome, url: url.text, bytes: result.bytes) }
        }
    }

    /// Stops: URLs not yet asked for fail as cancelled, reads in progress end at once.
    public func cancel() {
        sockets.cancelAll()
    }

    /// Blocks until every thread has ended. Each thread is joined once, by the first caller.
    public func wait() {
        let threads = state.withLock { s -> [LoopThread] in
            defer { s.threads = [] }
            return s.threads
        }
        for t in threads { t.join() }
    }

    public var tally: WarmTally { state.withLock { $0.tally } }
    public var isRunning: Bool { state.withLock { $0.finishedAt == nil } }

    /// Seconds since the start, or until the end once finished.
    public var elapsed: Double {
        (state.withLock { $0.finishedAt } ?? clock.monotonic) - startedAt
    }
}
