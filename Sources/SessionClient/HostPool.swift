import EventLoop

/// Connections to one origin (or to the parent proxy): idle ones for reuse (most recent first), a count
/// of busy and opening ones bounded by `httpMaximumConnectionsPerHost`, and tasks waiting in FIFO order.
final class HostPool {
    unowned let session: Session
    let key: OriginKey
    var idle: [OriginConnection] = []
    /// FIFO of waiting tasks from `waitingHead` on; slots before it are emptied as tasks leave, so a
    /// finished task is never kept alive by the queue.
    private var waiting: [SessionTask?] = []
    private var waitingHead = 0
    private var busy = 0
    private var opening = 0

    init(session: Session, key: OriginKey) {
        self.session = session
        self.key = key
    }

    private var waitingCount: Int { waiting.count - waitingHead }

    /// Connections idle, busy or being opened.
    var openCount: Int { idle.count + busy + opening }

    /// Nothing open, opening or waiting: the session may forget the pool.
    var isUnused: Bool { openCount == 0 && waitingCount == 0 && pendingConnectors.isEmpty }

    /// Queues the task and hands out connections while there are any.
    func enqueue(_ task: SessionTask) {
        waiting.append(task)
        dispatch()
    }

    /// A waiting task gave up (cancelled) before it got a connection.
    func remove(_ task: SessionTask) {
        if let i = waiting[waitingHead...].firstIndex(where: { $0 === task }) {
            waiting.remove(at: i)
        }
    }

    private func popWaiting() -> SessionTask? {
        guard waitingHead < waiting.count else { return nil }
        let t = waiting[waitingHead]
        waiting[waitingHead] = nil
        waitingHead += 1
        if waitingHead > 32, waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        return t
    }

    private func dispatch() {
        // Tasks queued before the session went offline: not sent, even on a connection already open.
        while session.offline, let task = popWaiting() {
            task.failBeforeAttach(.offline(upstream: task.origin.description))
        }
        while waitingCount > 0 {
            if let i = idle.lastIndex(where: { !$0.settling }) {
                let conn = idle.remove(at: i)
                session.idleCount -= 1
                if conn.recheckBeforeReuse, conn.stream.unreadInput != .nothing {
                    // Bytes arrived after a body-less answer since it completed: not an answer to
                    // the next request, whatever they look like.
                    session.noteDiscardedUnsafe()
                    conn.close()
                    continue
                }
                conn.leaveIdle()
                busy += 1
                session.noteReused()
                popWaiting()!.attach(conn, pool: self, reused: true)
                continue
            }
            // What is left idle is settling and free in a moment: wait for it rather than open more.
            // Settling connections count against the limit: opening past it would leave more
            // connections than may idle once they all come back, closed and opened again next burst.
            let limit = session.configuration.httpMaximumConnectionsPerHost
            if openCount < limit, opening + idle.count < waitingCount {
                open()
                continue
            }
            return
        }
    }

    private func open() {
        // The connection is for the first waiting task without one: its client's lookups count.
        let forIndex = waitingHead + opening + idle.count
        let client = forIndex < waiting.count ? waiting[forIndex]?.client : nil
        opening += 1
        let connector = Connector(session: session, target: key, client: client) { [unowned self] result in
            self.opening -= 1
            self.pendingConnectors.removeAll { $0.isFinished }
            switch result {
            case .success(let stream):
                self.session.noteOpened()
                let conn = OriginConnection(stream: stream, pool: self)
                if let task = self.popWaiting() {
                    self.busy += 1
                    task.attach(conn, pool: self, reused: false)
                } else {
                    self.makeIdle(conn)
                }
            case .failure(let error):
                // The connection was opened for the task at the head of the queue: it fails; the rest retry.
                if let task = self.popWaiting() { task.failBeforeAttach(error) }
            }
            self.dispatch()
        }
        pendingConnectors.append(connector)
        connector.start()
    }

    /// Keeps connectors alive until they finish (they complete exactly once).
    private var pendingConnectors: [Connector] = []

    /// A task finished with its connection: keep it for reuse or close it.
    func release(_ conn: OriginConnection, reusable: Bool) {
        busy -= 1
        if reusable, !conn.stream.isClosed {
            if conn.recheckBeforeReuse {
                settle(conn)
            } else {
                makeIdle(conn)
            }
        } else {
            conn.close()
        }
        dispatch()
    }

    /// After an answer that has no body by rule (HEAD, 204, 304), where a broken or hostile origin
    /// puts one anyway, the connection rests for one turn of the loop before it is reused: bytes
    /// sent right behind the answer arrive meanwhile, the idle watcher sees them and closes it,
    /// and the check in `dispatch` looks once more. Handing it straight to a waiting request would
    /// have that request read them as its answer.
    private func settle(_ conn: OriginConnection) {
        conn.settling = true
        makeIdle(conn, dispatching: false)
        if settleTimer == nil {
            settleTimer = Timer(loop: session.loop) { [unowned self] in self.settled() }
        }
        settleTimer!.schedule(after: 0)
    }

    private func settled() {
        for conn in idle { conn.settling = false }
        dispatch()
    }

    private var settleTimer: Timer?

    /// A connection leaves the pool for good (upgraded to a tunnel).
    func detach(_ conn: OriginConnection) {
        busy -= 1
        conn.detach()
        dispatch()
    }

    private func makeIdle(_ conn: OriginConnection, dispatching: Bool = true) {
        if idle.count >= session.configuration.maxIdleConnectionsPerHost {
            conn.close()
            return
        }
        conn.enterIdle(timeout: session.configuration.idleConnectionTimeout)
        conn.idleOrder = session.nextIdleOrder()
        idle.append(conn)
        session.idleCount += 1
        if session.idleCount > session.configuration.maxIdleConnections { session.closeLongestIdle() }
        if dispatching { dispatch() }
    }

    /// An idle connection closed or timed out.
    func idleConnectionEnded(_ conn: OriginConnection) {
        if let i = idle.firstIndex(where: { $0 === conn }) {
            idle.remove(at: i)
            session.idleCount -= 1
        }
        conn.close()
    }

    /// When the longest idle of this pool's connections went idle (`idle` runs oldest first).
    var oldestIdleOrder: Int? { idle.first?.idleOrder }

    func closeOldestIdle() {
        guard !idle.isEmpty else { return }
        idleConnectionEnded(idle[0])
    }

    func closeIdle() {
        let all = idle
        idle.removeAll()
        session.idleCount -= all.count
        for c in all { c.close() }
    }
}
