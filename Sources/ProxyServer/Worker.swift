import CacheStore
import EventLoop
import Glibc
import HTTPWire
import Logging
import SessionClient
import Statistics
import Synchronization

/// One event-loop thread: its listeners, its client connections, its outbound session. Nothing here
/// is shared with other workers; the server reaches a worker only through `loop.execute`.
final class Worker: @unchecked Sendable {
    let index: Int
    let loop: EventLoop
    /// Replaced on this worker's loop by a configuration reload; new requests see the new values.
    private(set) var settings: ProxySettings
    let logger: Logger
    /// The one source of time for everything this worker runs.
    let clock: any ProxyClock
    let cache: Cache
    /// This worker's reads of the shared cache.
    let cacheReader: CacheReader
    /// Origin fetches under way for cache misses, shared by all workers (request collapsing).
    let inFlight: InFlightTable
    /// Connections per client address, shared by all workers.
    let addressCounts: ClientAddressCounts
    /// What the registry mirrors of all workers share.
    let mirrorState: MirrorState
    /// The certificate of the HTTPS listeners and admin endpoint, if any; shared, reloadable.
    let identity: ServerIdentity?
    /// CONNECT destinations decrypted and cached (`tls.intercept`), if any; shared.
    let interception: Interception?
    /// Fetches with no client attached.
    private var background = BackgroundFetches()
    /// Created on the worker's thread, used only there.
    private(set) var session: Session!
    /// Destination checks for requests a parent proxy carries (made on first use, on this loop).
    lazy var parentProxyDestinations = ParentProxyDestinations(resolver: session.resolver)
    /// What this worker listens on and serves.
    private var served = Served()
    private(set) var draining = false
    /// Open client connections, readable from any thread (shutdown waits on it).
    let openConnections = Atomic<Int>(0)
    /// What this worker counts; read by the admin endpoint from any worker.
    let stats = WorkerStatistics()
    /// What this worker's last requests were routed to (`RequestRouter.route`).
    let routeMemo = RouteMemo()
    /// Where a TLS record's bytes are put together just before OpenSSL encrypts them (one
    /// record's worth, for the worker's thread alone).
    let recordScratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Stream.tlsRecord, alignment: 64)
    /// Requests per origin host (the dashboard's top hosts).
    let hosts = TopHosts()
    /// This worker's access log lines, if the log is on.
    let accessLog: AccessLogBuffer?
    /// Measures loop lag and publishes the session's levels, once a second.
    private var tick: (timer: Timer, due: Double)?
    static let tickInterval = 1.0

    init(index: Int, settings: ProxySettings, logger: Logger, cache: Cache, inFlight: InFlightTable,
         addressCounts: ClientAddressCounts, accessLog: AccessLog?, identity: ServerIdentity?,
         interception: Interception?, mirrorState: MirrorState = MirrorState(), clock: any ProxyClock = SystemClock.shared) {
        self.clock = clock
        self.mirrorState = mirrorState
        self.addressCounts = addressCounts
        self.identity = identity
        self.interception = interception
        self.accessLog = accessLog.map { AccessLogBuffer(log: $0) }
        self.index = index
        self.settings = settings
        self.logger = logger
        self.cache = cache
        self.inFlight = inFlight
        cacheReader = cache.makeReader()
        loop = EventLoop(clock: clock)
    }

    deinit { recordScratch.deallocate() }

    /// Before the worker's thread runs (nothing else touches the loop yet).
    func prepare() throws(Session.SetupError) {
        session = try Session(loop: loop, configuration: settings.session, clock: clock)
        // Checked after DNS, with the settings in force then (a reload may change them).
        session.addressGate = { [unowned self] address in self.settings.destinations.refusal(address: address) }
        session.offline = settings.cache.policy.offline
        let t = Timer(loop: loop, repeating: true) { [unowned self] in self.ticked() }
        tick = (t, clock.monotonic + Worker.tickInterval)
        t.schedule(after: Worker.tickInterval)
    }

    private func ticked() {
        let now = clock.monotonic
        stats.set(.loopLagMicroseconds, Int(max(0, now - (tick?.due ?? now)) * 1_000_000))
        tick?.due = now + Worker.tickInterval
        publishLevels()
        accessLog?.flush()
    }

    /// Publishes the session's levels and the top hosts to `stats` (once a second, and when the
    /// admin endpoint is asked for statistics, so they are current then). On the loop's thread.
    func publishLevels() {
        stats.set(.originConnectionsOpen, session.openConnectionCount)
        stats.set(.originConnectionsIdle, session.idleConnectionCount)
        stats.set(.originConnectionsDiscardedUnsafe, session.connectionsDiscardedUnsafe)
        stats.set(.originTLSHandshakes, session.tlsHandshakes)
        stats.set(.originTLSResumptions, session.tlsResumptions)
        stats.set(.originH2Streams, session.h2Streams)
        hosts.publish()
    }

    /// Before the worker's thread runs. With `tls`, clients speak TLS to the proxy (the HTTPS listener);
    /// with `proxyProtocol`, a load balancer's PROXY header names each client first.
    func listen(on address: SocketAddress, tls: Bool = false,
                proxyProtocol: Bool = false) throws(Listener.Failure) -> SocketAddress {
        let l = try Listener(loop: loop, address: address) { [unowned self] fd, peer in
            if proxyProtocol { self.readProxyHeader(fd, peer, tls: tls) } else { self.accept(fd, peer, tls: tls) }
        }
        l.onDescriptorsExhausted = { [unowned self] in self.shedIdleOriginConnections() }
        served.listeners.append(l)
        return l.boundAddress
    }

    /// A reload's settings (on this worker's loop).
    func apply(_ new: ProxySettings) {
        settings = new
        session.offline = new.cache.policy.offline
    }

    /// Before the worker's thread runs: the admin endpoint, served by this loop too.
    func listenAdmin(on address: SocketAddress, context: AdminContext,
                     tls: Bool = false) throws(Listener.Failure) -> SocketAddress {
        let l = try Listener(loop: loop, address: address) { [unowned self] fd, peer in
            // The address this connection reached (on a wildcard listener, the interface's own).
            guard let local = SocketAddress.local(of: fd) else { Glibc.close(fd); return }
            guard let stream = self.stream(for: fd, tls: tls, admin: true) else { return }
            let conn = AdminConnection(worker: self, stream: stream, peer: peer, local: local,
                                       scheme: tls ? "https" : "http", context: context)
            self.served.admin[ObjectIdentifier(conn)] = conn
            conn.start()
        }
        l.onDescriptorsExhausted = { [unowned self] in self.shedIdleOriginConnections() }
        served.adminListeners.append(l)
        return l.boundAddress
    }

    func adminConnectionClosed(_ conn: AdminConnection) {
        served.admin[ObjectIdentifier(conn)] = nil
    }

    /// A plain stream, or one starting a server-side TLS handshake with the current certificate.
    private func stream(for fd: Int32, tls: Bool, admin: Bool = false) -> Stream? {
        guard tls else { return Stream(loop: loop, acceptedSocket: fd) }
        guard let identity,
              let stream = Stream.acceptTLS(loop: loop, socket: fd, context: admin ? identity.admin : identity.current) else {
            logger.error("cannot start TLS on an accepted connection")
            return nil
        }
        return stream
    }

    private func accept(_ fd: Int32, _ peer: SocketAddress, tls: Bool) {
        guard let stream = stream(for: fd, tls: tls) else { return }
        var refusal: ConnectionRefusal?
        var share: ClientShare?
        if connectionsCounted >= settings.maxConnectionsPerWorker {
            refusal = refuse(peer, .full, .connectionsRefusedFull)
        } else {
            share = addressCounts.acquire(peer.addressBytes, limit: settings.maxConnectionsPerClient)
            if share == nil { refusal = refuse(peer, .perClient, .connectionsRefusedPerClient) }
        }
        let conn = ClientConnection(worker: self, stream: stream, peer: peer, tls: tls, refusal: refusal,
                                    share: share)
        served.clients[ObjectIdentifier(conn)] = conn
        openConnections.add(1, ordering: .relaxed)
        stats.add(.connectionsAccepted)
        stats.set(.clientConnectionsOpen, served.clients.count + served.h2.count)
        conn.start()
    }

    /// A `proxy_protocol` listener's connection: believed only from `proxy_protocol_from`, and
    /// admitted (limits, then the connection) as the client its header names.
    private func readProxyHeader(_ fd: Int32, _ peer: SocketAddress, tls: Bool) {
        let lb = peer.addressBytes
        guard settings.proxyProtocolFrom.contains(where: { $0.contains(lb) }) else {
            stats.add(.connectionsRefusedProxyUntrusted)
            if let count = untrustedLog.note(now: clock.monotonic) {
                logger.warning("closed \(count) connection(s) to a proxy_protocol listener from outside proxy_protocol_from, latest from \(peer.host)")
            }
            Glibc.close(fd)
            return
        }
        guard served.headerReaders.count < settings.maxConnectionsPerWorker else {
            stats.add(.connectionsRefusedFull)
            Glibc.close(fd)
            return
        }
        let reader = ProxyHeaderReader(fd: fd, peer: peer, tls: tls)
        served.headerReaders[ObjectIdentifier(reader)] = reader
        reader.start(loop: loop, timeout: settings.clientHeaderTimeout) { [unowned self] reader, outcome in
            self.served.headerReaders[ObjectIdentifier(reader)] = nil
            switch outcome {
            case .client(let client):
                if self.draining { Glibc.close(reader.fd) } else { self.accept(reader.fd, client, tls: reader.tls) }
            case .failed(let why):
                self.stats.add(.connectionsRefusedProxyHeader)
                self.logger.notice("closed a connection from load balancer \(reader.peer): \(why)")
                Glibc.close(reader.fd)
            case .abandoned:
                Glibc.close(reader.fd)
            }
        }
    }

    private var refusals = RefusalTally()
    private var untrustedLog = LogThrottle()
    private var detachedCutLog = LogThrottle()
    private var originFetchRefusalLog = LogThrottle()
    private var streamSocketRefusalLog = LogThrottle()
    /// HTTP/2 streams holding a socket of their own (`claimStreamSocket`), counted as connections.
    private var streamSockets = 0
    /// What `limits.max_connections` bounds on this worker: client connections (an HTTP/2 one
    /// once) and streams holding sockets, less those being refused.
    private var connectionsCounted: Int {
        served.clients.count + served.h2.count + streamSockets - refusals.refusing
    }
    private var handOverRefusalLog = LogThrottle()
    private var descriptorLog = LogThrottle()
    private var lookupRefusalLog = LogThrottle()

    /// A request answered 503 because its name lookup was not started (too many pending): one
    /// line a second at most, however many there are.
    func noteLookupRefused(_ message: String, client: SocketAddress) {
        stats.add(.originErrorDNS)
        if let count = lookupRefusalLog.note(now: clock.monotonic) {
            logger.warning("503 to \(count) request(s) since the last report, latest for \(client.host): \(message)")
        }
    }

    private func refuse(_ peer: SocketAddress, _ refusal: ConnectionRefusal, _ counter: Count) -> ConnectionRefusal {
        stats.add(counter)
        if let count = refusals.began(now: clock.monotonic) {
            let why = refusal == .full ? "\(settings.maxConnectionsPerWorker) connections on this worker (limits.max_connections)"
                : "\(settings.maxConnectionsPerClient) connections from \(peer.host) (limits.max_connections_per_client)"
            logger.warning("refused \(count) connection(s): \(why)")
        }
        return refusal
    }

    func connectionClosed(_ conn: ClientConnection) {
        if conn.isStream {
            // One stream of an HTTP/2 connection: the connection is what counts.
            clientLeft(conn)
            conn.carrier?.streamConnectionClosed(conn)
            return
        }
        guard served.clients.removeValue(forKey: ObjectIdentifier(conn)) != nil else { return }
        clientLeft(conn)
        if conn.refusal != nil { refusals.refusing -= 1 }
        connectionGone(share: conn.share, address: conn.peerAddress)
    }

    /// Fetches that were some connection's own go on without it.
    private func clientLeft(_ conn: ClientConnection) {
        guard !background.fetches.isEmpty else { return }
        let id = ObjectIdentifier(conn)
        for fetch in Array(background.fetches.values) where fetch.connection == id { fetch.clientLeft() }
    }

    /// A connection whose client speaks HTTP/2: an `H2Connection` takes its socket and its place
    /// (and its share of the per-client budgets) among the connections served.
    func handOverToHTTP2(_ conn: ClientConnection) {
        guard let settings = settings.http2,
              served.clients.removeValue(forKey: ObjectIdentifier(conn)) != nil else { return }
        let h2: H2Connection
        do {
            h2 = try H2Connection(worker: self, stream: conn.stream, peer: conn.peer, share: conn.share,
                                  overTLS: conn.overTLS, intercepted: conn.intercepted, settings: settings)
        } catch {
            logger.error("cannot start an HTTP/2 session for \(conn.peer): \(error)")
            conn.stream.close()
            connectionGone(share: conn.share, address: conn.peerAddress)
            return
        }
        served.h2[ObjectIdentifier(h2)] = h2
        stats.add(.h2Connections)
        h2.start()
    }

    func h2ConnectionClosed(_ h2: H2Connection) {
        guard served.h2.removeValue(forKey: ObjectIdentifier(h2)) != nil else { return }
        connectionGone(share: h2.share, address: h2.peerAddress)
    }

    private func connectionGone(share: ClientShare?, address: [UInt8]) {
        if share != nil { addressCounts.release(address) }
        openConnections.subtract(1, ordering: .relaxed)
        stats.set(.clientConnectionsOpen, served.clients.count + served.h2.count)
    }

    /// Runs a fetch with no client attached (a download left running, a background refresh).
    func adopt(_ fetch: DetachedFetch) {
        background.fetches[ObjectIdentifier(fetch)] = fetch
        fetch.start()
    }

    /// Out of descriptors while accepting: idle origin connections are closed first, so the
    /// client is served rather than left waiting. Logged once a second at most.
    private func shedIdleOriginConnections() -> Bool {
        let closed = session.shedIdleConnections()
        if closed > 0, let n = descriptorLog.note(now: clock.monotonic) {
            logger.warning("out of descriptors: closed \(closed) idle origin connection(s) to accept clients (\(n) time(s) since the last line)")
        }
        return closed > 0
    }

    /// A detached download cut by its budget: counted, and logged a line a second at most.
    func noteDetachedCut(_ limit: DetachedFetchLedger.Refusal, client: [UInt8], upstream: String) {
        switch limit {
        case .fetchesPerClient: stats.add(.detachedCutPerClientFetches)
        case .bytesPerClient: stats.add(.detachedCutPerClientBytes)
        case .fetches: stats.add(.detachedCutFetches)
        case .bytes: stats.add(.detachedCutBytes)
        }
        if let n = detachedCutLog.note(now: clock.monotonic) {
            let who = SocketAddress(addressBytes: client, port: 0)?.host ?? "?"
            logger.warning("download of \(upstream) for \(who) cut instead of finished with no client attached: \(limit.description) reached (\(n) cut since the last line)")
        }
    }

    /// A first client's download not handed over to its followers: the client's detached budget
    /// has no room for the bytes still to come, so the client goes on pacing it. Logged a line a
    /// second at most (a slow client asks again each time its output fills).
    func noteHandOverRefused(_ limit: DetachedFetchLedger.Refusal, client: SocketAddress, upstream: String, first: Bool) {
        if first {
            switch limit {
            case .fetchesPerClient: stats.add(.handOversRefusedPerClientFetches)
            case .bytesPerClient: stats.add(.handOversRefusedPerClientBytes)
            case .fetches: stats.add(.handOversRefusedFetches)
            case .bytes: stats.add(.handOversRefusedBytes)
            }
        }
        if let n = handOverRefusalLog.note(now: clock.monotonic) {
            logger.notice("download of \(upstream) not handed over to its followers: \(limit.description) reached; \(client.host) goes on pacing it (\(n) refused since the last line)")
        }
    }

    /// Claims a client connection's place in this worker's descriptor budget for an HTTP/2 stream
    /// that opens a socket of its own (to an origin, or a tunnel's destination): its connection
    /// was counted once when accepted, and its streams could otherwise open sockets past the
    /// budget. False, logged, when the worker is full.
    func claimStreamSocket(client: SocketAddress) -> Bool {
        guard connectionsCounted < settings.maxConnectionsPerWorker else {
            stats.add(.connectionsRefusedFull)
            if let n = streamSocketRefusalLog.note(now: clock.monotonic) {
                logger.warning("503 to HTTP/2 client \(client.host): \(settings.maxConnectionsPerWorker) connections and streams at origins on this worker (limits.max_connections; \(n) refused since the last line)")
            }
            return false
        }
        streamSockets += 1
        return true
    }

    func releaseStreamSocket() { streamSockets -= 1 }

    /// A request refused its origin fetch by `limits.origin_fetches_per_client`: counted, and
    /// logged a line a second at most.
    func noteOriginFetchRefused(client: SocketAddress) {
        stats.add(.originFetchesRefusedPerClient)
        if let n = originFetchRefusalLog.note(now: clock.monotonic) {
            let limit = settings.originFetchesPerClient
            logger.warning("429 to \(client.host): \(limit) of its requests already at origins (limits.origin_fetches_per_client; \(n) refused since the last line)")
        }
    }

    func detachedFetchFinished(_ fetch: DetachedFetch) {
        background.fetches[ObjectIdentifier(fetch)] = nil
    }

    /// Starts refreshing a stale entry in the background, unless a refresh of that URL is running
    /// or has replaced the entry already.
    func refreshInBackground(_ exchange: CacheExchange, request: RequestHead, client: [UInt8]) {
        guard inFlight.beginRefresh(exchange.primaryKey) else { return }
        // Claimed after this request's lookup: a refresh on another worker may have stored its
        // answer and ended in between, and a second one would fetch the URL again for nothing.
        guard let served = exchange.entry, cacheReader.stillFinds(served, request: request.headers) else {
            inFlight.endRefresh(exchange.primaryKey)
            return
        }
        adopt(DetachedFetch(worker: self, refreshing: exchange, request: request, client: client))
    }

    /// Stop accepting; idle connections close now, busy ones after their current response.
    func beginDraining() {
        draining = true
        for l in served.listeners { l.close() }
        served.listeners.removeAll()
        for reader in Array(served.headerReaders.values) { reader.abandon() }
        tick?.timer.cancel()
        for conn in Array(served.clients.values) { conn.drain() }
        for conn in Array(served.h2.values) { conn.drain() }
        for conn in Array(served.admin.values) { conn.drain() }
        session.closeIdleConnections()
    }

    /// Grace period over: close whatever is left.
    func closeAll() {
        for conn in Array(served.clients.values) { conn.forceClose() }
        for conn in Array(served.h2.values) { conn.forceClose() }
        for conn in Array(served.admin.values) { conn.close() }
        accessLog?.flush()
        tick?.timer.cancel()
        tick = nil
        background.cancelAll()
        for l in served.adminListeners { l.close() }
        served.adminListeners.removeAll()
        session.closeIdleConnections()
    }
}

/// Connections being refused (lingering a moment before they close, not counted as served), and
/// their log: one line a second at most under a flood.
private struct RefusalTally {
    var refusing = 0
    private var loggedAt = -Double.infinity
    private var unlogged = 0

    /// One more refusal; the number to log now, if a line is due.
    mutating func began(now: Double) -> Int? {
        refusing += 1
        unlogged += 1
        guard now - loggedAt >= 1 else { return nil }
        loggedAt = now
        defer { unlogged = 0 }
        return unlogged
    }
}

/// Fetches a worker runs with no client attached.
private struct BackgroundFetches {
    /// Downloads left running for followers or the store, and stale-while-revalidate refreshes.
    var fetches: [ObjectIdentifier: DetachedFetch] = [:]

    func cancelAll() {
        for fetch in Array(fetches.values) { fetch.cancel() }
    }
}

/// A worker's listeners and the connections they accepted. The admin endpoint keeps listening
/// while the proxy drains, so `/readyz` can say 503 to a load balancer until the end.
private struct Served {
    var listeners: [Listener] = []
    var adminListeners: [Listener] = []
    var clients: [ObjectIdentifier: ClientConnection] = [:]
    /// Connections that speak HTTP/2 (each serving its streams' exchanges).
    var h2: [ObjectIdentifier: H2Connection] = [:]
    /// Connections of `proxy_protocol` listeners whose header is still being read.
    var headerReaders: [ObjectIdentifier: ProxyHeaderReader] = [:]
    var admin: [ObjectIdentifier: AdminConnection] = [:]
}
