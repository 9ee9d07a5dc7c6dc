import CacheStore
import EventLoop
import Glibc
import LarderConfig
import Logging
import Locking
import Warming

/// The whole proxy: one worker (thread + event loop + listeners + session) per configured core.
/// `start` binds every listener before any thread runs, so a bad address fails start-up cleanly.
public final class ProxyServer: @unchecked Sendable {
    /// The configuration in force (replaced by reloads).
    private let current: Locked<Config>
    private let config: Config
    /// Re-reads the configuration the way start-up did (file, environment, flags), for reloads.
    private let reloadSource: (@Sendable () throws(ConfigErrors) -> Config)?
    private let logger: Logger
    private var workers: [Worker] = []
    private var threads: [LoopThread] = []
    /// The on-disk cache, opened at start so a bad cache directory fails start-up.
    private var cache: Cache?
    /// What the listeners are bound to (real ports when 0 was configured).
    public private(set) var boundAddresses: [String] = []
    /// The same for the HTTPS listeners.
    public private(set) var tlsBoundAddresses: [String] = []
    /// Where the admin endpoint listens, if it is on.
    public private(set) var adminAddress: String?
    private var admin: AdminContext?
    private var accessLog: AccessLog?
    private var historyTimer: Timer?
    /// Every address Larder listens on, so nothing is forwarded to itself.
    private let ownListeners = OwnListeners()
    /// The clock every worker, the cache and the admin endpoint read (`ProxyClock`).
    private let clock: any ProxyClock
    /// The certificate of the HTTPS listeners and admin endpoint, when one is configured.
    private var identity: ServerIdentity?
    /// The step of `start` under way, or the last taken.
    private var lastStep: StartStep?

    public enum StartError: Error, CustomStringConvertible {
        case badAddress(String)
        case listen(String)
        case cache(String)
        case tls(String)
        case config(String)
        /// What failed, and the step of `start` it failed in.
        indirect case during(StartStep, StartError)
        public var description: String {
            switch self {
            case .badAddress(let a): return "cannot listen on \(a): not a numeric IPv4 or IPv6 address"
            case .listen(let m), .cache(let m), .tls(let m), .config(let m): return m
            case .during(let step, let error): return "\(step.doing): \(error.description)"
            }
        }
    }

    public init(config: Config, logger: Logger, clock: any ProxyClock = SystemClock.shared,
                reloadSource: (@Sendable () throws(ConfigErrors) -> Config)? = nil) {
        self.clock = clock
        self.config = config
        self.current = Locked(config)
        self.logger = logger
        self.reloadSource = reloadSource
    }

    /// How long shutdown waits for in-flight requests, as currently configured.
    public var shutdownGrace: Double { current.withLock { $0.shutdownGrace } }

    /// SIGHUP: `reload(then:)`, waiting for it. Blocks until every worker has applied the change,
    /// so never call it on a worker's thread.
    public func reload() -> ReloadOutcome {
        let done = Semaphore()
        let result = Locked<ReloadOutcome?>(nil)
        reload { outcome in
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// SIGHUP or POST /config/reload: reads the configuration again; applies what a running proxy
    /// can change (new requests see it; nothing is dropped), reports the rest, or keeps the old
    /// configuration whole when the new one is invalid. The certificate files are read again
    /// whether their names changed or not (renewed files usually keep them). The outcome is logged
    /// and `done` called once every worker has applied the change on its loop (on the last one's
    /// thread), so what was told "applied" is in force for every request after it; at once when
    /// nothing is applied.
    public func reload(then done: @escaping @Sendable (ReloadOutcome) -> Void) {
        guard let reloadSource else { return done(.rejected("this Larder was started without a configuration source")) }
        let outcome: ReloadOutcome
        // Calls `finish` once every worker that is told the new settings has applied them.
        var countdown: Countdown?
        do {
            let new = try reloadSource()
            outcome = current.withLock { old -> ReloadOutcome in
                let d = ConfigDiff.between(old, new)
                // Keys that need a restart keep their old values in what is applied.
                var applied = new
                for key in d.restart { ConfigDiff.keep(key, from: old, in: &applied) }
                var settings: ProxySettings?
                if !d.live.isEmpty {
                    do {
                        // The mix must pass the checks too: a new file may move admin_listen to loopback
                        // and drop admin_token at once, while the running endpoint stays where it is.
                        try ConfigLoader.check(applied, source: "running configuration with the keys that need a restart unchanged")
                        settings = try ProxySettings.load(applied, ownListeners: ownListeners, clock: clock)
                    } catch {
                        return .rejected("\(error)")
                    }
                }
                var live = d.live
                var failed: [ReloadFailure] = []
                if let failure = reloadIdentity(applied.tls) {
                    // The old certificate stays in use, and so do the names of its files.
                    for key in failure.keys { ConfigDiff.keep(key, from: old, in: &applied) }
                    live.removeAll { failure.keys.contains($0) }
                    failed.append(failure)
                }
                if let settings, !live.isEmpty {
                    countdown = apply(settings, tokenAndHostsOf: applied)
                }
                if live.contains("cache.presets") || live.contains("mirrors") { logger.info("\(ServingLists(applied).logLine)") }
                old = applied
                return .applied(live: live, restart: d.restart, failed: failed)
            }
        } catch {
            outcome = .rejected(error.description)
        }
        let finish: @Sendable () -> Void = { [self, outcome] in
            if outcome.isRejected {
                logger.error("\(outcome.summary)")
            } else if outcome.leavesSomethingOut {
                logger.warning("\(outcome.summary)")  // asked for, not in force
            } else {
                logger.notice("\(outcome.summary)")
            }
            done(outcome)
        }
        if let countdown { countdown.whenDone(finish) } else { finish() }
    }

    /// Hands a reload's settings to every worker (on its loop) and its token and host names to
    /// the admin endpoint; the countdown ends once every worker has applied them.
    private func apply(_ settings: ProxySettings, tokenAndHostsOf config: Config) -> Countdown {
        let counted = Countdown(workers.count)
        for w in workers {
            w.loop.execute {
                w.apply(settings)
                counted.one()
            }
        }
        admin?.token.withLock { $0 = config.adminToken.map { Array($0.utf8) } }
        admin?.hostNames.withLock { $0 = config.adminHosts }
        return counted
    }

    /// The keys that name the certificate of the HTTPS listeners and the admin endpoint.
    static let certificateKeys = ["tls.certificate_file", "tls.key_file"]

    /// Reads the listeners' certificate and key again (renewed files usually keep their names);
    /// nil when they loaded or no listener uses them.
    private func reloadIdentity(_ tls: Config.TLS) -> ReloadFailure? {
        guard let identity, let cert = tls.certificateFile, let key = tls.keyFile else { return nil }
        do {
            try identity.reload(certificateFile: cert, keyFile: key)
            logger.notice("TLS certificate reloaded from \(cert)")
            return nil
        } catch {
            return ReloadFailure(keys: ProxyServer.certificateKeys,
                                 reason: "TLS certificate not reloaded, the old one stays in use: \(error)")
        }
    }

    /// Number of worker threads the configuration asks for.
    public static func workerCount(_ config: Config) -> Int {
        config.workers > 0 ? config.workers : max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Starts the proxy, one named step after another (`StartStep`); the first that fails stops
    /// the start, and its error says what Larder was doing. Every listener is bound before any
    /// worker thread runs.
    public func start() throws(StartError) {
        try step(.checkConfiguration) { () throws(StartError) in try checkConfiguration() }
        let files = try step(.raiseOpenFiles) { OpenFilesLimit.raiseToHard() }
        let settings = try step(.loadSettings) { () throws(StartError) in try loadSettings(openFiles: files) }
        let authority = try step(.loadInterceptionCA) { () throws(StartError) in try loadInterceptionAuthority() }
        let cache = try step(.openCache) { () throws(StartError) in try openCache(settings) }
        try step(.openAccessLog) { () throws(StartError) in try openAccessLog() }
        try step(.loadCertificate) { () throws(StartError) in try loadCertificate() }
        let interception = try step(.startInterception) { authority.map(startInterception) }
        let inFlight = InFlightTable(clock: clock)
        try step(.prepareWorkers) { () throws(StartError) in
            try prepareWorkers(settings, cache: cache, inFlight: inFlight, interception: interception)
        }
        let plan = try step(.planListeners) { () throws(StartError) in try ListenPlan(config) }
        try step(.checkPorts) { () throws(StartError) in try checkPortsUnused(plan) }
        try step(.bindListeners) { () throws(StartError) in try bindProxyListeners(plan) }
        try step(.startAdmin) { () throws(StartError) in try startAdmin(plan, cache: cache, inFlight: inFlight) }
        try step(.startWorkers) { startWorkers() }
    }

    /// Runs one step of `start`; its failure says what Larder was doing. The steps come in
    /// `StartStep`'s order, whose reasons `StartUpTests` checks.
    private func step<T>(_ step: StartStep, _ body: () throws(StartError) -> T) throws(StartError) -> T {
        precondition(lastStep.map { $0 < step } ?? true, "start-up step \(step) out of StartStep's order")
        lastStep = step
        do {
            return try body()
        } catch {
            throw .during(step, error)
        }
    }

    private func checkConfiguration() throws(StartError) {
        do {
            try ConfigLoader.check(config, source: "configuration")
        } catch {
            throw .config(error.description)
        }
    }

    /// The settings every worker serves with; its descriptor budget is sized by the open files
    /// limit `openFiles` raised.
    private func loadSettings(openFiles files: (before: Int, now: Int, hard: Int)) throws(StartError) -> ProxySettings {
        let settings = try ProxySettings.load(config, ownListeners: ownListeners, clock: clock)
        let budget = settings.descriptors
        SocketSplice.setMaximumPipes(budget.pipes)
        let raised = files.now > files.before ? "raised from \(files.before)" : "the hard limit is \(files.hard)"
        logger.info("\(ServingLists(config).logLine)")
        logger.info("descriptors: \(files.now) open files allowed (\(raised)): at most \(budget.maxConnections(configured: config.limits.maxConnections)) client connections (limits.max_connections \(config.limits.maxConnections)), \(budget.idleOriginConnections) idle origin connections and \(budget.pipes) tunnel pipes")
        return settings
    }

    /// The CA interception mints certificates with, when `tls.intercept` names any host.
    private func loadInterceptionAuthority() throws(StartError) -> CertificateAndKey? {
        let tls = config.tls
        guard !tls.intercept.isEmpty else { return nil }
        do {
            return try InterceptionAuthority.load(
                certificateFile: tls.interceptCACertificate, keyFile: tls.interceptCAKey,
                directory: tls.interceptCADirectory,
                legacyDirectory: config.cache.ephemeral ? nil : config.cacheDirectory + "/ca", logger: logger)
        } catch {
            throw .tls("\(error)")
        }
    }

    /// The cache; an unusable directory stops the start, or with `cache.on_unusable_dir:
    /// pass-through` is served without (a stand-in that stores nothing).
    private func openCache(_ settings: ProxySettings) throws(StartError) -> Cache {
        let opened: Cache
        let log = logger
        do {
            opened = try Cache(settings: settings.cache.store, clock: clock, log: { log.warning("\($0)") })
            if let disk = opened.disk {
                for note in disk.startupNotes { logger.warning("\(note)") }
                logger.info("cache in \(absolutePath(config.cacheDirectory)): \(disk.entryCount) entries, \(disk.storedBytes) bytes")
            } else {
                let store = settings.cache.store
                logger.notice("ephemeral cache (cache.ephemeral): memory only, \(store.memoryCapacity) bytes, responses up to \(store.memoryObjectLimit) bytes; nothing is written to disk and a restart starts empty")
            }
        } catch {
            let problem = "cannot open the cache in \(config.cacheDirectory): \(error.description)"
            guard config.cache.onUnusableDirectory == .passThrough else { throw .cache(problem) }
            do {
                opened = try Cache.standIn(settings: settings.cache.store, clock: clock, log: { log.warning("\($0)") })
            } catch {
                throw .cache("\(problem); and no stand-in for pass-through either: \(error.description)")
            }
            let consequence = "SERVING WITHOUT A CACHE (cache.on_unusable_dir: pass-through): every request goes to its "
                + "origin and nothing is stored until Larder is restarted with a usable cache_dir"
            logger.critical("\(problem); \(consequence)")
        }
        cache = opened
        return opened
    }

    private func openAccessLog() throws(StartError) {
        guard let destination = config.accessLog else { return }
        let path: String?
        switch destination {
        case .stdout: path = nil
        case .file(let file): path = file
        }
        let format: AccessLog.Format
        switch config.accessLogFormat {
        case .combined: format = .combined
        case .json: format = .json
        }
        do {
            accessLog = try AccessLog(path: path, format: format)
        } catch {
            throw .listen(error.message)
        }
    }

    /// The certificate of the HTTPS listeners and the admin endpoint, when either is on.
    private func loadCertificate() throws(StartError) {
        let tls = config.tls
        guard !tls.listen.isEmpty || tls.admin else { return }
        guard let cert = tls.certificateFile, let key = tls.keyFile else {
            throw .tls("tls.listen and tls.admin need tls.certificate_file and tls.key_file")
        }
        do {
            identity = try ServerIdentity(certificateFile: cert, keyFile: key, offerH2: config.http2.enabled)
        } catch {
            throw .tls("\(error)")
        }
    }

    private func startInterception(_ authority: CertificateAndKey) -> Interception {
        let tls = config.tls
        // Minted certificates are cache: under cache_dir, re-minted when it is gone.
        let authorityFile = absolutePath(tls.interceptCACertificate
                                         ?? tls.interceptCADirectory + "/" + InterceptionAuthority.certificateName)
        let interception = Interception(patterns: tls.intercept, authority: authority, authorityFile: authorityFile,
                                        keyType: CertificateKeyType(tls.interceptKeyType),
                                        lifetime: Int(tls.interceptCertificateLifetime),
                                        directory: config.cache.ephemeral ? nil : config.cacheDirectory + "/certificates",
                                        offerH2: config.http2.enabled, logger: logger)
        logger.notice("interception on for \(tls.intercept.map(\.description).joined(separator: ", "))")
        return interception
    }

    private func prepareWorkers(_ settings: ProxySettings, cache: Cache, inFlight: InFlightTable,
                                interception: Interception?) throws(StartError) {
        let addressCounts = ClientAddressCounts()
        let mirrorState = MirrorState()
        for i in 0..<ProxyServer.workerCount(config) {
            let w = Worker(index: i, settings: settings, logger: logger, cache: cache, inFlight: inFlight,
                           addressCounts: addressCounts, accessLog: accessLog, identity: identity,
                           interception: interception, mirrorState: mirrorState, clock: clock)
            do {
                try w.prepare()
            } catch {
                throw .tls(error.description)
            }
            workers.append(w)
        }
    }

    /// Every configured port another process holds stops the start (`Listener.checkUnused`).
    /// All are probed before any is bound: a probe of `[::]:P` would otherwise meet this Larder's
    /// own `127.0.0.1:P`.
    private func checkPortsUnused(_ plan: ListenPlan) throws(StartError) {
        for (address, what) in plan.probes {
            do {
                try Listener.checkUnused(address)
            } catch {
                throw .listen(what + error.description)
            }
        }
    }

    /// Every worker listens on every proxy listener (SO_REUSEPORT spreads the connections).
    private func bindProxyListeners(_ plan: ListenPlan) throws(StartError) {
        for listener in plan.proxy {
            var address = listener.address
            for w in workers {
                do {
                    // Port 0: the first worker's bind picks the port; the others share it (SO_REUSEPORT).
                    address = try w.listen(on: address, tls: listener.tls, proxyProtocol: listener.endpoint.proxyProtocol)
                } catch {
                    throw .listen(error.description)
                }
            }
            if listener.tls { tlsBoundAddresses.append(address.description) } else { boundAddresses.append(address.description) }
            ownListeners.add(address)
            logger.notice("proxy listening on \(address)\(listener.tls ? " (TLS)" : "")\(listener.endpoint.proxyProtocol ? " (PROXY protocol)" : "")")
        }
    }

    private func startAdmin(_ plan: ListenPlan, cache: Cache, inFlight: InFlightTable) throws(StartError) {
        guard let listener = plan.admin else { return }
        let inForce = current
        let context = AdminContext(token: config.adminToken, hostNames: config.adminHosts,
                                   configuration: { inForce.withLock { $0 } }, cache: cache, inFlight: inFlight,
                                   workerStats: workers.map(\.stats), hosts: workers.map(\.hosts),
                                   warming: makeWarming(), clock: clock,
                                   refreshLevels: { [workers] done in
                                       let counted = Countdown(workers.count)
                                       counted.whenDone(done)
                                       for w in workers { w.loop.execute { w.publishLevels(); counted.one() } }
                                   }) {
            [unowned self] done in self.reload(then: done)
        }
        admin = context
        // The dashboard's history, sampled on the first worker's loop every interval of the
        // clock. A test clock can jump: it is looked at often, and a sample taken once it
        // passes the next one's time, so a test moving the clock need not wait for the timer.
        if clock is OffsetClock {
            let t = Timer(loop: workers[0].loop, repeating: true) { context.recordHistoryIfDue() }
            t.schedule(after: ProxyServer.testClockHistoryCheck)
            historyTimer = t
        } else {
            let t = Timer(loop: workers[0].loop, repeating: true) { context.recordHistory() }
            t.schedule(after: context.history.interval)
            historyTimer = t
        }
        var address = listener.address
        for w in workers {
            do {
                address = try w.listenAdmin(on: address, context: context, tls: listener.tls)
            } catch {
                throw .listen(error.description)
            }
        }
        adminAddress = address.description
        ownListeners.add(address)
        logger.notice("admin endpoint listening on \(address)\(listener.tls ? " (TLS)" : "")")
    }

    /// A thread for each worker's loop; the admin endpoint says ready from here on. Ready is set
    /// before the loops run: a worker's loop answers the admin endpoint, and one started first
    /// could answer a probe "not ready" although nothing stood in the way any more.
    private func startWorkers() {
        admin?.ready.store(true, ordering: .relaxed)
        for w in workers {
            let t = LoopThread { w.loop.run() }
            threads.append(t)
            t.start()
        }
        logger.info("larder started with \(workers.count) worker\(workers.count == 1 ? "" : "s")")
    }

    /// How often the history's time is checked on a test clock (`OffsetClock`).
    static let testClockHistoryCheck = 0.05

    /// POST /warm's runner: through the first plain proxy listener, on loopback when it listens on
    /// every address.
    private func makeWarming() -> AdminWarming {
        let listener = boundAddresses.first.flatMap(WarmProxyAddress.parse).map { (host: $0.host, port: $0.port) }
        let log = logger
        return AdminWarming(listener: listener, cacheName: config.viaName, clock: clock, log: { log.notice("\($0)") })
    }

    /// Runs `job` on the first worker's loop after `seconds` (the way into a worker for the crash test hook).
    public func runOnFirstWorker(after seconds: Double, _ job: @escaping @Sendable () -> Void) {
        let loop = workers[0].loop
        loop.execute {
            let timer = Timer(loop: loop) { job() }
            timer.schedule(after: seconds)
            _ = Unmanaged.passRetained(timer)  // kept until it fires: a one-off, and the hook ends the process
        }
    }

    /// SIGUSR1: the access log file is reopened (after rotation).
    public func reopenLogs() {
        accessLog?.reopen()
        logger.info("access log reopened")
    }

    /// The first step of shutdown, taken before it is logged: `/readyz` says 503 and every admin
    /// answer says `Connection: close` from here on.
    public func announceShutdown() {
        admin?.stopping.store(true, ordering: .relaxed)
        admin?.ready.store(false, ordering: .relaxed)
    }

    /// Stops accepting, lets in-flight exchanges finish for up to `grace` seconds, then closes the
    /// rest and stops every loop. Blocks until the worker threads have exited.
    public func shutdown(grace: Double) {
        announceShutdown()
        admin?.warming.stopAndWait()
        for w in workers { w.loop.execute { w.beginDraining() } }
        var waited = 0.0
        while waited < grace {
            let open = workers.reduce(0) { $0 + $1.openConnections.load(ordering: .relaxed) }
            if open == 0 { break }
            usleep(20_000)
            waited += 0.02
        }
        let left = workers.reduce(0) { $0 + $1.openConnections.load(ordering: .relaxed) }
        if left > 0 { logger.warning("shutdown grace period over: closing \(left) connection(s)") }
        for w in workers {
            w.loop.execute {
                w.closeAll()
                w.loop.stop()
            }
        }
        for t in threads { t.join() }
        threads.removeAll()
        historyTimer = nil  // while its loop still exists
        accessLog?.close()
        cache?.close()
    }
}

/// Counts the workers that still have to apply a reload; calls back once all have (or at once
/// when there are none).
final class Countdown: Sendable {
    private let state: Locked<(left: Int, then: (@Sendable () -> Void)?)>

    init(_ count: Int) { state = Locked((count, nil)) }

    /// One more is done.
    func one() {
        let then = state.withLock { s -> (@Sendable () -> Void)? in
            s.left -= 1
            guard s.left == 0 else { return nil }
            defer { s.then = nil }
            return s.then
        }
        then?()
    }

    /// Calls `then` once all are done: now if they are, else on the thread of the last one.
    func whenDone(_ then: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.left <= 0 { return true }
            s.then = then
            return false
        }
        if now { then() }
    }
}

extension CertificateKeyType {
    init(_ keyType: Config.KeyType) {
        switch keyType {
        case .ecP256: self = .ecP256
        case .rsa2048: self = .rsa2048
        }
    }
}

/// `path` made absolute against the working directory, for log lines an operator acts on.
func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    guard let cwd = getcwd(nil, 0) else { return path }
    defer { free(cwd) }
    return String(cString: cwd) + "/" + path
}
