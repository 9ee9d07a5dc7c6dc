import EventLoop

/// Connections to one origin (or to the parent proxy), and the tasks waiting for them. What to do
/// is decided by `HostPoolMachine`; this shell feeds it events and carries out its actions: opening
/// connections, handing them to tasks, idling and closing them, and keeping the session's counts.
final class HostPool {
    typealias Machine = HostPoolMachine<OriginConnection, SessionTask>

    /// Unchecked: the session keeps its pools and outlives them (the tasks that also hold a pool
    /// are its own), and a checked reference costs a retain and a release at every use.
    unowned(unsafe) let session: Session
    let key: OriginKey
    private var machine: Machine
    /// Keeps connectors alive until they finish (they complete exactly once).
    private var pendingConnectors: [Connector] = []
    /// The first connection to this https origin is being opened and may turn out HTTP/2.
    private var probing = false
    /// Opens that wait for that probe (the clients they are for).
    private var deferredOpens: [[UInt8]?] = []
    /// The origin answered ALPN with `http/1.1` (or none): no more probing.
    private var speaksHTTP11 = false
    private var settleTimer: Timer?
    /// The machine's idle count as last added into the session's (`Session.idleCount`).
    private var idleReported = 0

    init(session: Session, key: OriginKey) {
        self.session = session
        self.key = key
        machine = Machine(limits: .init(maxConnections: session.configuration.httpMaximumConnectionsPerHost,
                                        maxIdle: session.configuration.maxIdleConnectionsPerHost))
    }

    /// Connections idle, busy or being opened.
    var openCount: Int { machine.openCount }

    /// Idle connections, resting ones included.
    var idleCount: Int { machine.idleCount }

    /// Nothing open, opening or waiting: the session may forget the pool.
    var isUnused: Bool {
        machine.openCount == 0 && machine.waitingCount == 0 && pendingConnectors.isEmpty && deferredOpens.isEmpty
    }

    /// When the longest idle of this pool's connections went idle.
    var oldestIdleOrder: Int? { machine.oldestIdle?.idleOrder }

    // MARK: - Events from tasks

    /// Queues the task and hands out connections while there are any.
    func enqueue(_ task: SessionTask) {
        machine.enqueue(task)
        dispatch()
    }

    /// A waiting task gave up (cancelled) before it got a connection.
    func remove(_ task: SessionTask) {
        machine.remove(task)
    }

    /// A task finished with its connection: reusable as its exchange judged it, `rests` after a
    /// body-less answer.
    func release(_ conn: OriginConnection, reusable: Bool, rests: Bool = false) {
        // A stream of an HTTP/2 connection carries one exchange: never kept for another.
        perform(machine.released(conn, reusable: reusable && !conn.stream.isClosed && !conn.stream.isInMemory,
                                 rests: rests))
        dispatch()
    }

    /// A connection leaves the pool for good (upgraded to a tunnel).
    func detach(_ conn: OriginConnection) {
        machine.detached()
        conn.detach()
        dispatch()
    }

    // MARK: - Events from idle connections and the session

    /// An idle connection closed, timed out, or sent bytes nobody asked for.
    func idleConnectionEnded(_ conn: OriginConnection) {
        machine.idleEnded(conn)
        reportIdleCount()
        conn.close()
    }

    func closeOldestIdle() {
        if let conn = machine.oldestIdle { idleConnectionEnded(conn) }
    }

    func closeIdle() {
        let all = machine.removeAllIdle()
        reportIdleCount()
        for c in all { c.close() }
    }

    // MARK: - Carrying out the machine's actions

    private func dispatch() {
        while let action = machine.nextAction(offline: session.offline) { perform(action) }
    }

    /// Carries out what the machine answered to an event, and what it answers to an inspection;
    /// each time, first brings the session's count of idle connections up to date with the
    /// machine's. Inlined, so that the action is matched where the machine built it.
    @inline(__always)
    private func perform(_ first: Machine.Action?, connectError: SessionError? = nil) {
        var next = first
        while let action = next.take() {
            reportIdleCount()
            switch consume action {
            case .open(let task):
                open(for: task)
            case .inspect(let conn):
                next = machine.inspected(conn, strayBytes: conn.stream.unreadInput != .nothing)
            case .hand(let conn, let task, let reused):
                if reused {
                    conn.leaveIdle()
                    session.noteReused()
                }
                task.attach(conn, pool: self, reused: reused)
            case .keepIdle(let conn, let resting):
                conn.enterIdle(timeout: session.configuration.idleConnectionTimeout)
                conn.idleOrder = session.nextIdleOrder()
                if resting { scheduleSettle() }
                if session.idleCount > session.configuration.maxIdleConnections { session.closeLongestIdle() }
            case .close(let conn):
                conn.close()
            case .discard(let conn):
                session.noteDiscardedUnsafe()
                conn.close()
            case .fail(let task, .offline):
                task.failBeforeAttach(.offline(upstream: task.origin.description))
            case .fail(let task, .connectFailed):
                if let connectError { task.failBeforeAttach(connectError) }
            }
        }
    }

    private func reportIdleCount() {
        session.idleCount += machine.idleCount - idleReported
        idleReported = machine.idleCount
    }

    private func open(for task: SessionTask?) {
        // ftp:// (without a parent proxy, which would take it in absolute form): the gateway
        // answers it over a stream of its own, as HTTP/1.1.
        if key.scheme == .ftp {
            let conn = OriginConnection(stream: session.ftp.openStream(for: key, client: task?.client), pool: self)
            conn.ridesSharedConnection = true
            perform(machine.opened(conn))
            return
        }
        // An HTTP/2 connection to the origin takes the request as one more stream: no connect.
        if key.scheme == .https, let stream = session.h2Stream(for: key) {
            let conn = OriginConnection(stream: stream, pool: self)
            conn.ridesSharedConnection = true
            perform(machine.opened(conn))
            return
        }
        // While the first connection to an https origin is finding out whether it speaks HTTP/2,
        // more requests wait for it rather than open connections of their own: one HTTP/2
        // connection takes them all.
        if probing {
            deferredOpens.append(task?.client)
            return
        }
        if key.scheme == .https, session.configuration.http2, !speaksHTTP11 { probing = true }
        connect(client: task?.client)
    }

    private func connect(client: [UInt8]?) {
        let connector = Connector(session: session, target: key, client: client) { [unowned self] result in
            self.pendingConnectors.removeAll { $0.isFinished }
            let wasProbing = self.probing
            self.probing = false
            switch result {
            case .success(let connected):
                var stream = connected
                if connected.negotiatedH2 {
                    guard let first = self.session.adoptH2(connected, for: self.key) else {
                        self.perform(self.machine.openFailed(),
                                     connectError: .tlsFailure(upstream: self.key.description,
                                                               reason: "the origin chose HTTP/2 and no stream could be opened"))
                        self.openDeferred(after: .tlsFailure(upstream: self.key.description,
                                                             reason: "the origin chose HTTP/2 and no stream could be opened"))
                        self.dispatch()
                        return
                    }
                    stream = first
                } else if connected.isTLS {
                    self.speaksHTTP11 = true
                }
                self.session.noteOpened()
                self.perform(self.machine.opened(OriginConnection(stream: stream, pool: self)))
                if wasProbing { self.openDeferred(after: nil) }
            case .failure(let error):
                self.perform(self.machine.openFailed(), connectError: error)
                if wasProbing { self.openDeferred(after: error) }
            }
            self.dispatch()
        }
        pendingConnectors.append(connector)
        connector.start()
    }

    /// The probe is over: the opens that waited for it get streams, connections of their own, or
    /// the probe's error.
    private func openDeferred(after error: SessionError?) {
        let waiting = deferredOpens
        deferredOpens.removeAll()
        for client in waiting {
            if let error {
                perform(machine.openFailed(), connectError: error)
            } else if let stream = session.h2Stream(for: key) {
                let conn = OriginConnection(stream: stream, pool: self)
                conn.ridesSharedConnection = true
                perform(machine.opened(conn))
            } else {
                connect(client: client)
            }
        }
    }

    /// After an answer that has no body by rule (HEAD, 204, 304), where a broken or hostile origin
    /// puts one anyway, the connection rests for one turn of the loop before it is reused: bytes
    /// sent right behind the answer arrive meanwhile, the idle watcher sees them and closes it,
    /// and `.inspect` looks once more. Handing it straight to a waiting request would have that
    /// request read them as its answer.
    private func scheduleSettle() {
        if settleTimer == nil {
            settleTimer = Timer(loop: session.loop) { [unowned self] in
                self.machine.settled()
                self.dispatch()
            }
        }
        settleTimer!.schedule(after: 0)
    }
}
