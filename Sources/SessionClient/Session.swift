import EventLoop
import HTTPWire

/// Where a request goes: the pool key.
public struct OriginKey: Hashable, Sendable, CustomStringConvertible {
    public var scheme: URIScheme
    public var host: String
    public var port: Int
    public init(scheme: URIScheme, host: String, port: Int) {
        self.scheme = scheme; self.host = host; self.port = port
    }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The outbound client of one event loop, modelled on NSURLSession: made from a configuration, it
/// creates tasks that report through a delegate. Connections are pooled per origin and reused.
/// Not thread-safe by design: one session per loop, used only on that loop's thread.
public final class Session {
    public let configuration: SessionConfiguration
    let loop: EventLoop
    public let resolver: Resolver
    /// Client TLS settings for https origins.
    let tls: TLSClientContext
    private var pools: [OriginKey: HostPool] = [:]
    /// https origins that chose HTTP/2: their connections, each carrying many requests' streams.
    private var h2Origins: [OriginKey: [H2OriginConnection]] = [:]
    /// Requests sent as HTTP/2 streams, for statistics and tests.
    public private(set) var h2Streams = 0
    /// ftp:// origins, reached through the session's FTP gateway.
    private(set) lazy var ftp = FTPGateway(session: self)
    /// The pool the last request went to: consecutive requests mostly go to the same origin, and
    /// comparing its key is cheaper than hashing a host name.
    private var lastPool: HostPool?
    /// Pools held before those with nothing in them are swept out: a forward proxy meets endless
    /// hosts, and each would otherwise keep its pool for good.
    private var poolSweepAt = Session.poolsBeforeSweep
    static let poolsBeforeSweep = 1_024
    /// Sweeps on the next turn of the loop, never inside `pool(for:)`: that is reached from a pool's
    /// own callbacks (a failed connect's task answering its client, who pipelined a request for
    /// another origin), and a pool swept there would be freed under its running code.
    private var poolSweep: Timer?
    /// Every task's `timeoutIntervalForResource`, under one timer.
    let deadlines: ResourceDeadlines
    /// Consulted after DNS for every address about to be connected to: nil allows it, a reason
    /// refuses it (deny-lists, the proxy's own listeners). Addresses refused are skipped; when
    /// none is left the task fails with `destinationDenied`.
    public var addressGate: ((SocketAddress) -> String?)?
    /// `cache.offline`, kept current by the owner across reloads. While set nothing leaves: tasks
    /// fail with `offline` when resumed or while they wait, and no connection is opened.
    public var offline = false
    /// Counters for statistics and tests.
    public private(set) var connectionsOpened = 0
    public private(set) var connectionsReused = 0
    /// Connections closed instead of reused because unread bytes followed a response, or the
    /// response came before the request body was sent.
    public private(set) var connectionsDiscardedUnsafe = 0
    /// TLS handshakes completed with origins, and how many of them resumed a kept session.
    public internal(set) var tlsHandshakes = 0
    public internal(set) var tlsResumptions = 0

    /// Fails when the TLS settings are unusable (unknown version, unreadable CA file).
    /// - Parameter clock: the worker's; the resolver keeps answers by its monotonic time.
    public init(loop: EventLoop, configuration: SessionConfiguration,
                clock: any ProxyClock = SystemClock.shared) throws(SetupError) {
        self.loop = loop
        self.configuration = configuration
        self.clock = clock
        usesParentProxy = configuration.parentProxy != nil
        deadlines = ResourceDeadlines(loop: loop, interval: configuration.timeoutIntervalForResource)
        do {
            tls = try TLSClientContext(minimumVersion: configuration.tlsMinimumVersion,
                                       maximumVersion: configuration.tlsMaximumVersion,
                                       caFile: configuration.caFile,
                                       pins: configuration.trustExceptions.map { (pattern: $0.hostPattern, sha256: $0.sha256) },
                                       offerH2: configuration.http2)
        } catch {
            throw SetupError(description: error.description)
        }
        do {
            let names = try Resolver(loop: loop, nameServers: configuration.nameServers, clock: clock)
            // Through a parent the answers only check destinations (the parent connects).
            names.waitsForEveryFamily = configuration.parentProxy != nil
            resolver = names
        } catch {
            throw SetupError(description: "session.dns_servers: \(error.description)")
        }
    }

    /// The worker's clock: the FTP gateway dates listings by it.
    let clock: any ProxyClock

    public struct SetupError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Whether a parent proxy carries requests: http:// ones in absolute form, https ones
    /// through a CONNECT tunnel.
    public let usesParentProxy: Bool

    /// Makes a task that sends `head` (a complete request head, already in the right target form)
    /// to `origin`. Call `resume()` to start it.
    /// - Parameters:
    ///   - hasBody: the caller will write a body after `taskCanSendBody` and then call `finishBody()`.
    ///   - isIdempotent: allows one retry on a fresh connection when a reused one fails before answering.
    ///   - expectsContinue: the head carries `Expect: 100-continue`: a final answer that comes
    ///     without a `100 Continue` first may have left the body unread, so the connection is not reused.
    ///   - client: the address (network order) the request is made for: name lookups its
    ///     connection needs count against that client's bound; nil for Larder's own requests.
    public func dataTask(origin: OriginKey, method: HTTPMethod, head: [UInt8], hasBody: Bool,
                         isIdempotent: Bool, expectsContinue: Bool = false, client: [UInt8]? = nil,
                         delegate: any SessionTaskDelegate) -> SessionTask {
        SessionTask(session: self, origin: origin, method: method, head: head, hasBody: hasBody,
                    isIdempotent: isIdempotent, expectsContinue: expectsContinue, client: client, delegate: delegate)
    }

    /// Opens a raw TCP connection for a tunnel (CONNECT), outside the pool.
    @discardableResult
    public func openTunnel(host: String, port: Int, client: [UInt8]? = nil,
                           _ completion: @escaping (Result<Stream, SessionError>) -> Void) -> TunnelOpener {
        let opener = TunnelOpener(session: self, target: OriginKey(scheme: .http, host: host, port: port),
                                  client: client, completion: completion)
        opener.start()
        return opener
    }

    /// The parent proxy requests for `origin` are written to (http:// and ftp:// origins: https ones
    /// reach their origin through a tunnel, and what comes back is the origin's).
    func parentCarrying(_ origin: OriginKey) -> ProxyAddress? {
        origin.scheme != .https ? configuration.parentProxy : nil
    }

    /// The pool a task's connection comes from. With a parent proxy, http:// requests share the
    /// parent's pool (each names its origin in absolute form), while https origins keep a pool
    /// each: their connections are tunnels to one origin, TLS with it inside, never to be handed
    /// to a request for another.
    func pool(for origin: OriginKey) -> HostPool {
        let key: OriginKey
        if let parent = parentCarrying(origin) {
            key = parent.key
        } else {
            key = origin
        }
        if let last = lastPool, last.key == key { return last }
        if let p = pools[key] { lastPool = p; return p }
        if pools.count >= poolSweepAt { scheduleSweep() }
        let p = HostPool(session: self, key: key)
        pools[key] = p
        lastPool = p
        return p
    }

    private func scheduleSweep() {
        if poolSweep == nil { poolSweep = Timer(loop: loop) { [unowned self] in self.sweepUnusedPools() } }
        if !poolSweep!.isPending { poolSweep!.schedule(after: 0) }
    }

    /// Drops the pools with no connection, no connection being opened and no task waiting: a
    /// request for one of their origins gets a new pool, as the first did.
    private func sweepUnusedPools() {
        pools = pools.filter { !$0.value.isUnused }
        if let last = lastPool, pools[last.key] !== last { lastPool = nil }
        poolSweepAt = max(Session.poolsBeforeSweep, pools.count * 2)
    }

    /// Pools currently kept (tests).
    var poolCount: Int { pools.count }

    func noteOpened() { connectionsOpened += 1 }
    func noteReused() { connectionsReused += 1 }
    func noteDiscardedUnsafe() { connectionsDiscardedUnsafe += 1 }

    /// Connections to origins open or opening, idle or busy, across origins.
    public var openConnectionCount: Int { pools.values.reduce(0) { $0 + $1.openCount } }

    /// Idle connections currently pooled, across origins.
    public var idleConnectionCount: Int {
        assert(idleCount == pools.values.reduce(0) { $0 + $1.idleCount }, "the idle count drifted from the pools'")
        return idleCount
    }

    /// Idle connections across pools, kept by the pools as they change (`maxIdleConnections`).
    var idleCount = 0
    private var idleOrders = 0

    func nextIdleOrder() -> Int {
        idleOrders += 1
        return idleOrders
    }

    /// Past `maxIdleConnections`: the connection idle longest, whichever origin it is for, goes.
    /// A scan of the pools, made only while at the cap.
    func closeLongestIdle() {
        var oldest: HostPool?
        for pool in pools.values {
            guard let order = pool.oldestIdleOrder else { continue }
            if order < oldest?.oldestIdleOrder ?? .max { oldest = pool }
        }
        oldest?.closeOldestIdle()
    }

    /// Closes every idle connection (shutdown).
    public func closeIdleConnections() {
        for pool in pools.values { pool.closeIdle() }
        ftp.closeIdle()
        for list in h2Origins.values {
            for c in list where !c.isBusy { c.close() }
        }
    }

    // MARK: - HTTP/2 origins

    /// A stream on an HTTP/2 connection already open to `origin`, if one takes another.
    func h2Stream(for origin: OriginKey) -> Stream? {
        guard let list = h2Origins[origin] else { return nil }
        for c in list where c.acceptsStreams {
            if let s = c.openStream() {
                h2Streams += 1
                return s
            }
        }
        return nil
    }

    /// A TLS connection that chose `h2`: kept for the origin's next requests, and its first stream.
    func adoptH2(_ socket: Stream, for origin: OriginKey) -> Stream? {
        let c: H2OriginConnection
        do {
            c = try H2OriginConnection(session: self, key: origin, socket: socket)
        } catch {
            socket.close()
            return nil
        }
        h2Origins[origin, default: []].append(c)
        c.start()
        guard let s = c.openStream() else { return nil }
        h2Streams += 1
        return s
    }

    func h2ConnectionClosed(_ c: H2OriginConnection) {
        h2Origins[c.key]?.removeAll { $0 === c }
        if h2Origins[c.key]?.isEmpty == true { h2Origins[c.key] = nil }
    }

    /// Out of descriptors (accept or connect said EMFILE): the idle connections go first, before
    /// anyone is refused. How many were closed.
    @discardableResult
    public func shedIdleConnections() -> Int {
        let closed = idleCount
        closeIdleConnections()
        return closed
    }
}
