import EventLoop
import Locking
import Statistics
import Warming

/// `POST /warm`: one warm job at a time, fetched through this Larder's own proxy listener (on
/// loopback when it listens on every address), so its requests meet every rule a client's meet (`allow_clients`,
/// `deny_destinations`, `protect_this_host`, authentication) and cannot reach anything a client
/// could not. Its progress is in `/stats`, `/metrics` and the dashboard until the next job.
final class AdminWarming: Sendable {
    /// The largest list accepted, in bytes and URLs (413 beyond).
    static let maxBodyBytes = 8 << 20
    static let maxURLs = 100_000
    static let defaultConcurrency = 8
    static let maxConcurrency = 32
    /// Longest silence from the proxy for one URL.
    static let timeout = 300.0

    /// The plain proxy listener warmed through; nil when there is none (HTTPS listeners only).
    let listener: (host: String, port: UInt16)?
    /// `via_name`, whose `Cache-Status` entry is read.
    let cacheName: String
    private let log: @Sendable (String) -> Void
    private let state = Locked<State>(State())

    private struct State {
        var job: WarmJob?
        var id = 0
        var cancelled = false
    }

    /// The proxy's clock, which times the jobs.
    private let clock: any ProxyClock

    init(listener: (host: String, port: UInt16)?, cacheName: String, clock: any ProxyClock = SystemClock.shared,
         log: @escaping @Sendable (String) -> Void) {
        self.clock = clock
        self.listener = listener
        self.cacheName = cacheName
        self.log = log
    }

    /// Starts a job for the list in `body`: 202, or why not.
    func start(body: [UInt8], concurrency: String?, proxyAuthorization: String?) -> AdminResponse {
        guard let listener else {
            return .error(503, "no plain proxy listener to warm through (listen is empty)")
        }
        var workers = Self.defaultConcurrency
        if let c = concurrency {
            guard let n = Int(c), (1...Self.maxConcurrency).contains(n) else {
                return .error(400, "concurrency must be 1 to \(Self.maxConcurrency)")
            }
            workers = n
        }
        let list = WarmList.parse(body)
        guard list.count > 0 else {
            return .error(400, "no URLs in the body: send one absolute http(s) URL a line, as text/uri-list")
        }
        guard list.count <= Self.maxURLs else { return .error(413, "more than \(Self.maxURLs) URLs in one list") }
        let proxy = WarmProxy(host: listener.host, port: listener.port, authorization: proxyAuthorization)
        let job = WarmJob(list: list, proxy: proxy, concurrency: workers, timeout: Self.timeout, cacheName: cacheName,
                          clock: clock)
        let started: (id: Int, previous: WarmJob?)? = state.withLock { s in
            if let running = s.job, running.isRunning { return nil }
            let previous = s.job
            s.id += 1
            s.job = job
            s.cancelled = false
            return (s.id, previous)
        }
        guard let (id, previous) = started else {
            let t = state.withLock { $0.job?.tally } ?? WarmTally()
            return .error(409, "warm job \(state.withLock { $0.id }) is running (\(t.done) of \(t.total) done): "
                          + "wait for it, or stop it with DELETE /warm")
        }
        previous?.wait()  // finished: its threads are joined at once, and their stacks freed
        log("warm job \(id): \(list.count) URLs (\(list.rejected.count) invalid), \(workers) at a time through \(proxy.description)")
        let log = self.log
        job.start { tally in
            log("warm job \(id) finished: " + tally.summary(seconds: job.elapsed).prefix { $0 != "\n" })
        }
        return .json(202, "{\"job\":\(id),\"state\":\"running\",\"total\":\(list.count),\"invalid\":\(list.rejected.count),"
                     + "\"concurrency\":\(workers)}")
    }

    /// DELETE /warm: stops the running job.
    func stop() -> AdminResponse {
        let stopped: Int? = state.withLock { s in
            guard let job = s.job, job.isRunning else { return nil }
            s.cancelled = true
            job.cancel()
            return s.id
        }
        guard let id = stopped else { return .error(404, "no warm job is running") }
        log("warm job \(id) cancelled")
        return .json(200, "{\"job\":\(id),\"state\":\"cancelled\"}")
    }

    /// Shutdown: the running job stops, and its threads have ended when this returns.
    func stopAndWait() {
        let job = state.withLock { s -> WarmJob? in
            s.job?.cancel()
            return s.job
        }
        job?.wait()
    }

    /// The job's state as a JSON object: `/stats`' `warm` and `GET /warm`.
    var json: String {
        let (job, id, cancelled) = state.withLock { ($0.job, $0.id, $0.cancelled) }
        guard let job else { return "{\"state\":\"idle\"}" }
        let running = job.isRunning
        let name = running ? "running" : cancelled ? "cancelled" : "finished"
        let elapsed = (job.elapsed * 1000).rounded() / 1000
        return "{\"job\":\(id),\"state\":\"\(name)\",\"concurrency\":\(job.concurrency),\"elapsed_seconds\":\(elapsed),"
            + job.tally.jsonMembers() + "}"
    }

    /// The values `/metrics` samples, of the running or last job.
    func sample(_ s: Sample) -> Double {
        let (job, _) = state.withLock { ($0.job, $0.id) }
        guard let job else { return 0 }
        let t = job.tally
        switch s {
        case .warmRunning: return job.isRunning ? 1 : 0
        case .warmTotal: return Double(t.total)
        case .warmDone: return Double(t.done)
        case .warmStored: return Double(t.stored)
        case .warmFresh: return Double(t.fresh)
        case .warmRevalidated: return Double(t.revalidated)
        case .warmNotStored: return Double(t.notStored)
        case .warmFailed: return Double(t.failed)
        case .warmBytes: return Double(t.bytes)
        default: return 0
        }
    }
}
