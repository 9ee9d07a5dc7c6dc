import EventLoop
import CachePolicy
import CacheStore
import HTTPWire
import Statistics
import LarderConfig
import Locking
import Synchronization

/// Larder's version, reported by the admin endpoint.
public enum LarderVersion {
    public static let string = "0.4.0"
}

/// What every admin connection shares: the statistics of all workers, the cache, readiness and
/// the bearer token.
final class AdminContext: Sendable {
    /// Replaced by a configuration reload.
    let token: Locked<[UInt8]?>
    /// `admin_hosts`: names a request's `Host` may give besides the endpoint's address; reloadable.
    let hostNames: Locked<[String]>
    /// The configuration in force now (a reload replaces it; keys that need a restart keep the
    /// values they started with).
    let configuration: @Sendable () -> Config
    /// Re-reads the configuration and applies what can be applied (POST /config/reload); calls
    /// back, on some worker's thread, once every worker has applied it.
    let reload: @Sendable (@escaping @Sendable (ReloadOutcome) -> Void) -> Void
    let cache: Cache
    let inFlight: InFlightTable
    let workerStats: [WorkerStatistics]
    let hosts: [TopHosts]
    /// POST /warm's job.
    let warming: AdminWarming
    let history = StatisticsHistory()
    /// The same clock the workers use.
    let clock: any ProxyClock
    let started: Double
    /// Listeners up and not draining.
    let ready = Atomic<Bool>(false)
    /// Shutdown has been asked for: from then on every admin answer closes its connection, even
    /// before the worker's loop has begun draining.
    let stopping = Atomic<Bool>(false)
    /// Has every worker publish its levels on its loop, then calls back (on the last one's thread):
    /// /stats and /metrics answer with levels as they are, not as they were at the last tick.
    let refreshLevels: @Sendable (@escaping @Sendable () -> Void) -> Void

    init(token: String?, hostNames: [String], configuration: @escaping @Sendable () -> Config, cache: Cache,
         inFlight: InFlightTable, workerStats: [WorkerStatistics], hosts: [TopHosts], warming: AdminWarming,
         clock: any ProxyClock,
         refreshLevels: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void = { $0() },
         reload: @escaping @Sendable (@escaping @Sendable (ReloadOutcome) -> Void) -> Void) {
        self.clock = clock
        self.refreshLevels = refreshLevels
        self.warming = warming
        started = clock.monotonic
        self.hosts = hosts
        self.hostNames = Locked(hostNames)
        self.configuration = configuration
        self.token = Locked(token.map { Array($0.utf8) })
        self.reload = reload
        self.cache = cache
        self.inFlight = inFlight
        self.workerStats = workerStats
    }

    /// When the next history sample is due, on `clock` (`recordHistoryIfDue`).
    private let nextSample = Locked<Double>(0)

    /// Called every `history.interval` seconds.
    func recordHistory() {
        history.record(snapshot(), time: clock.monotonic)
    }

    /// Called often on a clock that can jump (a test clock): a sample once `history.interval` of
    /// its time has passed since the last.
    func recordHistoryIfDue() {
        let now = clock.monotonic
        let due = nextSample.withLock { next -> Bool in
            if next == 0 { next = started + history.interval }
            guard now >= next else { return false }
            next = now + history.interval
            return true
        }
        if due { history.record(snapshot(), time: now) }
    }

    func snapshot() -> StatisticsSnapshot {
        let s = cache.statistics
        let map = cache.disk?.mapUsage ?? (used: 0, size: 0)
        let uptime = clock.monotonic - started
        let collapsing = inFlight.count
        let settings = cache.settings
        return StatisticsSnapshot.take(workers: workerStats, version: LarderVersion.string) { sample in
            switch sample {
            case .uptimeSeconds: return (uptime * 1000).rounded() / 1000
            case .memoryEntries: return Double(s.memoryEntries)
            case .memoryBytes: return Double(s.memoryBytes)
            case .memoryCapacityBytes: return Double(settings.memoryCapacity)
            case .memoryEvictions: return Double(s.memoryEvictions)
            case .diskEntries: return Double(s.diskEntries)
            case .diskBytes: return Double(s.diskBytes)
            case .diskCapacityBytes: return Double(settings.disk.capacity)
            case .diskEvictions: return Double(s.diskEvictions)
            case .checksumFailures: return Double(s.checksumFailures)
            case .cacheDisabled: return cache.isDisabled ? 1 : 0
            case .cacheEphemeral: return cache.isEphemeral ? 1 : 0
            case .mapUsedBytes: return Double(map.used)
            case .mapSizeBytes: return Double(map.size)
            case .pendingWriteBytes: return Double(s.pendingWriteBytes)
            case .collapsedFetchesInFlight: return Double(collapsing)
            case .detachedFetchesInFlight: return Double(inFlight.detached.fetchesInFlight)
            case .warmRunning, .warmTotal, .warmDone, .warmStored, .warmFresh, .warmRevalidated, .warmNotStored,
                 .warmFailed, .warmBytes:
                return warming.sample(sample)
            }
        }
    }
}

/// One admin answer.
struct AdminResponse: Sendable {
    var status: Int
    var contentType = "application/json"
    var body: String
    var extraFields: [(String, String)] = []
    /// A purge queued for the disk writer: the real answer is made from its outcome once the writer
    /// has given it (`AdminConnection` waits without blocking the loop).
    var removal: (outcome: RemovalOutcome, answer: @Sendable (RemovalOutcome.Result) -> AdminResponse)?
    /// An answer made later, on any thread (a reload's, once every worker applied it): the
    /// function is called with where to deliver it (`AdminConnection` posts it to its loop).
    var later: (@Sendable (@escaping @Sendable (AdminResponse) -> Void) -> Void)?

    static func awaiting(_ outcome: RemovalOutcome,
                         _ answer: @escaping @Sendable (RemovalOutcome.Result) -> AdminResponse) -> AdminResponse {
        AdminResponse(status: 0, body: "", removal: (outcome, answer))
    }

    static func json(_ status: Int, _ body: String) -> AdminResponse { AdminResponse(status: status, body: body + "\n") }

    static func error(_ status: Int, _ message: String) -> AdminResponse {
        json(status, "{\"error\":\(jsonString(message))}")
    }
}

/// The admin endpoint's routes.
extension AdminContext {
    func respond(method: HTTPMethod, target: AdminTarget, authorization: String?, reader: CacheReader) -> AdminResponse {
        if target.path == "/healthz" {
            return method == .get || method == .head ? AdminResponse(status: 200, contentType: "text/plain", body: "ok\n")
                : notAllowed("GET, HEAD")
        }
        // Readiness needs no token either: orchestrators' probes cannot send one (a Kubernetes
        // httpGet probe cannot read a Secret), and it says only "ready" or not.
        if target.path == "/readyz" {
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            return ready.load(ordering: .relaxed)
                ? AdminResponse(status: 200, contentType: "text/plain", body: "ready\n")
                : AdminResponse(status: 503, contentType: "text/plain", body: "not ready\n")
        }
        if let refusal = tokenRefusal(target: target, authorization: authorization) { return refusal }
        switch target.path {
        case "/", "/dashboard":
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            return AdminResponse(status: 200, contentType: "text/html; charset=utf-8", body: Dashboard.html)
        case "/stats":
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            return afterRefresh { [self] in
                let top = TopHosts.merged(hosts).map(Self.topHostJSON)
                return .json(200, snapshot().json(extra: "\"top_hosts\":[" + top.joined(separator: ",") + "],\"warm\":"
                                                  + warming.json + "," + ServingLists(configuration()).jsonMembers))
            }
        case "/config":
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            return .json(200, ConfigReport.json(configuration()))
        case "/stats/history":
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            return .json(200, history.json(now: clock.monotonic))
        case "/metrics":
            guard method == .get || method == .head else { return notAllowed("GET, HEAD") }
            return afterRefresh { [self] in
                AdminResponse(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                              body: snapshot().prometheusText())
            }
        case "/config/reload":
            guard method == .post else { return notAllowed("POST") }
            // Answered once every worker applies the change: a client that is told "applied" finds
            // it in force on whichever worker its next request reaches.
            let reload = self.reload
            var r = AdminResponse(status: 0, body: "")
            r.later = { deliver in reload { outcome in deliver(.json(outcome.isRejected ? 422 : 200, outcome.json)) } }
            return r
        case "/warm":
            switch method {
            case .get, .head: return .json(200, warming.json)
            case .delete: return warming.stop()
            // A POST carries the list: AdminConnection reads it and calls `warming.start`.
            case .post: return .error(411, "POST /warm needs the list as its body, with Content-Length")
            default: return notAllowed("GET, HEAD, POST, DELETE")
            }
        case "/cache":
            switch method {
            case .get, .head: return inspect(target, reader: reader)
            case .delete: return purge(target)
            default: return notAllowed("GET, HEAD, DELETE")
            }
        default:
            return .error(404, "no such admin resource \(target.path); try /stats, /metrics, /config, /cache?url=, /warm, /healthz, /readyz")
        }
    }

    /// One of `/stats`' `top_hosts`: `{"host": "example.com:8080", "requests": 12, "hits": 9,
    /// "misses": 2, "hit_ratio": 0.818…}`, the ratio null before any cacheable lookup.
    static func topHostJSON(_ e: TopHosts.Entry) -> String {
        "{\"host\":\(jsonString(e.name)),\"requests\":\(e.requests),\"hits\":\(e.hits),\"misses\":\(e.misses)"
            + ",\"hit_ratio\":" + (e.hitRatio.map { String($0) } ?? "null") + "}"
    }

    /// An answer made once every worker has published its levels (`refreshLevels`).
    private func afterRefresh(_ make: @escaping @Sendable () -> AdminResponse) -> AdminResponse {
        var r = AdminResponse(status: 0, body: "")
        let refresh = refreshLevels
        r.later = { deliver in refresh { deliver(make()) } }
        return r
    }

    /// 401 unless the request carries the token (when one is set). It may also come as ?token=, so
    /// a browser can open the dashboard.
    func tokenRefusal(target: AdminTarget, authorization: String?) -> AdminResponse? {
        guard let token = token.withLock({ $0 }), !authorized(authorization, token),
              !authorized(target.value("token").map { "Bearer " + $0 }, token) else { return nil }
        var r = AdminResponse.error(401, "this admin endpoint needs Authorization: Bearer <admin_token>")
        r.extraFields = [("WWW-Authenticate", "Bearer realm=\"larder\"")]
        return r
    }

    private func notAllowed(_ allow: String) -> AdminResponse {
        var r = AdminResponse.error(405, "method not allowed here; allowed: \(allow)")
        r.extraFields = [("Allow", allow)]
        return r
    }

    /// `Bearer <token>`, compared in constant time.
    private func authorized(_ field: String?, _ token: [UInt8]) -> Bool {
        guard let field, field.count > 7, field.prefix(7).lowercased() == "bearer " else { return false }
        return equalInConstantTime(Array(field.dropFirst(7).utf8), token)
    }

    /// An absolute http(s) URL as the cache keys it and its rules see it.
    struct KeyedURL {
        var primaryKey: [UInt8]
        var scheme: String
        var host: [UInt8]
        /// Path and query, without a fragment.
        var path: [UInt8]
    }

    /// The cache key for an absolute http(s) URL, or an error answer.
    private func primaryKey(_ url: String) -> Result<[UInt8], AdminResponseError> {
        keyed(url).map(\.primaryKey)
    }

    private func keyed(_ url: String) -> Result<KeyedURL, AdminResponseError> {
        let bytes = Array(url.utf8)
        let result = bytes.withUnsafeBytes { raw -> Result<RequestTarget, HTTPWireError> in
            do throws(HTTPWireError) {
                return .success(try RequestTarget.parse(raw, method: .get))
            } catch {
                return .failure(error)
            }
        }
        let parsed: RequestTarget
        switch result {
        case .success(let t): parsed = t
        case .failure(let error):
            return .failure(AdminResponseError(.error(400, "url=\(url) is not an absolute URL: \(error.reason)")))
        }
        guard parsed.form == .absolute else {
            return .failure(AdminResponseError(.error(400, "url=\(url) must be absolute, e.g. http://example.com/path")))
        }
        let path = Array(bytes[parsed.pathRange(targetLength: bytes.count)])
        let key = path.withUnsafeBytes { path in
            CacheKey.primary(scheme: parsed.scheme, host: parsed.host, port: parsed.port, pathAndQuery: path)
        }
        return .success(KeyedURL(primaryKey: key, scheme: parsed.scheme.name, host: parsed.host,
                                 path: path))
    }

    /// GET /cache?url=…: every stored variant of the URL.
    private func inspect(_ target: AdminTarget, reader: CacheReader) -> AdminResponse {
        guard let url = target.value("url") else { return .error(400, "GET /cache needs ?url=<absolute URL>") }
        let keyedURL: KeyedURL
        switch keyed(url) {
        case .success(let k): keyedURL = k
        case .failure(let e): return e.response
        }
        let key = keyedURL.primaryKey
        let variants = reader.variants(primaryKey: key)
        guard !variants.isEmpty else { return .error(404, "\(String(decoding: key, as: UTF8.self)) is not in the cache") }
        let now = clock.wallSeconds
        let lifetimes = EntryLifetimes(configuration(), url: keyedURL)
        var out = "{\"url\":\(jsonString(String(decoding: key, as: UTF8.self))),\"variants\":["
        for (i, v) in variants.enumerated() {
            let r = v.record
            let f = r.facts
            let head = CachedResponseWriter.parse(r.head)
            if i > 0 { out += "," }
            out += "{\"status\":\(f.status),\"tier\":\(jsonString(v.tier == .allowed ? "disk" : "memory"))"
            out += ",\"size\":\(r.bodyLength),\"age\":\(f.currentAge(now: now))"
            out += ",\"freshness_lifetime\":\(f.freshnessLifetime),\"ttl\":\(f.timeToLive(now: now))"
            out += ",\"fresh\":\(f.isFresh(now: now)),\"heuristic\":\(f.heuristic)"
            if let head {
                out += ",\"lifetime_from_current_rules\":" + lifetimes.json(head: head, facts: f, bodyLength: r.bodyLength)
            }
            out += ",\"stored_at\":\(jsonString(RFC3339.format(r.storedAt)))"
            out += ",\"last_access\":\(jsonString(RFC3339.format(r.lastAccess)))"
            out += ",\"vary\":[" + f.varyFields.map { jsonString(String(decoding: $0, as: UTF8.self)) }
                .joined(separator: ",") + "]"
            out += ",\"headers\":["
            if let head {
                out += (0..<head.headers.count).map {
                    "[\(jsonString(head.headers.nameString(at: $0))),\(jsonString(head.headers.valueString(at: $0)))]"
                }.joined(separator: ",")
            }
            out += "]}"
        }
        return .json(200, out + "]}")
    }

    /// DELETE /cache?url=… (one URL, all variants), ?since=RFC3339, or everything. Answered once
    /// the writer has committed the removal.
    private func purge(_ target: AdminTarget) -> AdminResponse {
        if let url = target.value("url") {
            switch primaryKey(url) {
            case .success(let key):
                let count = cache.makeReader().variants(primaryKey: key).count
                let url = jsonString(String(decoding: key, as: UTF8.self))
                return .awaiting(cache.invalidate(primaryKey: key)) { [self] result in
                    if let refusal = unconfirmed(result, "\"url\":\(url)") { return refusal }
                    // As PURGE answers: 404 when nothing was stored, so scripts can tell.
                    if count == 0 { return .json(404, "{\"error\":\"not in the cache\",\"url\":\(url),\"variants\":0}") }
                    return .json(200, "{\"purged\":\(url),\"variants\":\(count)}")
                }
            case .failure(let e):
                return e.response
            }
        }
        if let since = target.value("since") {
            guard let time = RFC3339.parse(since) else {
                return .error(400, "since=\(since) is not an RFC 3339 time, e.g. 2026-11-23T10:00:00Z")
            }
            let since = jsonString(RFC3339.format(time))
            return .awaiting(cache.purge(storedSince: time)) { [self] result in
                unconfirmed(result, "\"since\":\(since)") ?? .json(200, "{\"purged_stored_since\":\(since)}")
            }
        }
        guard target.query.isEmpty else {
            return .error(400, "DELETE /cache takes ?url=<absolute URL>, ?since=<RFC 3339 time>, or nothing (purge all)")
        }
        return .awaiting(cache.purgeAll()) { [self] result in
            unconfirmed(result, "\"purge\":\"all\"") ?? .json(200, "{\"purged\":\"all\"}")
        }
    }

    /// A purge the writer did not commit is never answered as done: 500 when it failed (the
    /// writer logged why; the answer is logged as an error), 503 when it was not confirmed in time (it may still happen).
    private func unconfirmed(_ result: RemovalOutcome.Result, _ what: String) -> AdminResponse? {
        switch result {
        case .committed:
            return nil
        case .failed:
            return .json(500, "{\"error\":\"the cache could not remove the entries; see the log\",\(what)}")
        case .timedOut:
            return .json(503, "{\"error\":\"the cache writer did not confirm the removal in time; it may still happen\",\(what)}")
        }
    }
}

struct AdminResponseError: Error {
    let response: AdminResponse
    init(_ r: AdminResponse) { response = r }
}
