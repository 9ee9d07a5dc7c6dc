/// The connections of one host and the tasks waiting for them, as a pure state machine: `HostPool`
/// tells it what happened and carries out what it answers. A connection is idle (free; the most
/// recent is handed out first), resting (idle, but back from a body-less answer: not handed out
/// until the loop has turned, see `HostPool.settle`), busy or opening; the per-host cap counts them
/// all. Tasks wait in FIFO order. Generic over what a connection and a waiter are, so that tests
/// drive it with stand-ins. The events of every request (`nextAction`, `released`) are
/// `@inline(__always)`: the action they build is matched right there by `HostPool`.
struct HostPoolMachine<Connection: AnyObject, Waiter: AnyObject> {
    struct Limits: Equatable {
        /// Connections idle, busy or opening (`httpMaximumConnectionsPerHost`).
        var maxConnections: Int
        /// Idle connections, resting ones included (`maxIdleConnectionsPerHost`).
        var maxIdle: Int
    }

    struct IdleConnection {
        let connection: Connection
        /// Not handed out until `settled`.
        var resting: Bool
        /// Its last answer had no body by rule: its socket is looked at again before reuse.
        let recheck: Bool
    }

    enum Action {
        /// Open a new connection; `waiter` is the first waiting task without one (whose client's
        /// name lookups it counts against), if any. Answer with `opened` or `openFailed`.
        case open(for: Waiter?)
        /// Look for bytes on an idle connection before reusing it; answer with `inspected`.
        case inspect(Connection)
        case hand(Connection, to: Waiter, reused: Bool)
        /// The connection goes idle; a resting one needs `settled` once the loop has turned.
        case keepIdle(Connection, resting: Bool)
        case close(Connection)
        /// Bytes arrived on it while it was idle: close it, counted as unsafe.
        case discard(Connection)
        case fail(Waiter, WaiterFailure)
    }

    enum WaiterFailure: Equatable {
        case offline
        /// The connection opened for it failed (the connector's error says why).
        case connectFailed
    }

    let limits: Limits
    /// Oldest first.
    private(set) var idle: [IdleConnection] = []
    private(set) var busy = 0
    private(set) var opening = 0
    /// FIFO of waiting tasks from `waitingHead` on; slots before it are emptied as tasks leave, so
    /// a finished task is never kept alive by the queue.
    private var waiting: [Waiter?] = []
    private var waitingHead = 0
    /// Taken from idle and being looked at (`.inspect`): until `inspected`, nothing else is handed out.
    private var inspecting: Connection?

    init(limits: Limits) {
        self.limits = limits
    }

    var waitingCount: Int { waiting.count - waitingHead }
    var idleCount: Int { idle.count }
    /// Connections idle, busy or being opened: what the per-host cap counts.
    var openCount: Int { idle.count + busy + opening }
    /// The connection idle longest.
    var oldestIdle: Connection? { idle.first?.connection }

    // MARK: - Events

    /// A task wants a connection; `nextAction` hands one out when it can.
    mutating func enqueue(_ waiter: Waiter) {
        waiting.append(waiter)
    }

    /// A waiting task gave up before it got a connection.
    mutating func remove(_ waiter: Waiter) {
        if let i = waiting[waitingHead...].firstIndex(where: { $0 === waiter }) {
            waiting.remove(at: i)
        }
    }

    /// The next thing to do for the waiting tasks, nil when there is nothing. Call until nil after
    /// every event that may free a connection or add a waiter.
    @inline(__always)
    mutating func nextAction(offline: Bool) -> Action? {
        // Tasks queued before the session went offline: not sent, even on a connection already open.
        if offline, let waiter = popWaiting() { return .fail(waiter, .offline) }
        guard waitingCount > 0, inspecting == nil else { return nil }
        if let i = idle.lastIndex(where: { !$0.resting }) {
            // Mostly the last: the most recent, and resting ones are rare.
            let entry = i == idle.count - 1 ? idle.removeLast() : idle.remove(at: i)
            if entry.recheck {
                inspecting = entry.connection
                return .inspect(entry.connection)
            }
            return handOut(entry.connection)
        }
        // What is left idle is resting and free in a moment: wait for it rather than open more.
        // Resting connections count against the cap: opening past it would leave more connections
        // than may idle once they all come back, closed and opened again next burst.
        if openCount < limits.maxConnections, opening + idle.count < waitingCount {
            let forIndex = waitingHead + opening + idle.count
            opening += 1
            return .open(for: forIndex < waiting.count ? waiting[forIndex] : nil)
        }
        return nil
    }

    /// What the look asked for by `.inspect` found; nil for a connection not being looked at.
    mutating func inspected(_ connection: Connection, strayBytes: Bool) -> Action? {
        guard inspecting === connection else { return nil }
        inspecting = nil
        // Bytes after a body-less answer: not an answer to the next request, whatever they look like.
        if strayBytes { return .discard(connection) }
        guard waitingCount > 0 else { return .close(connection) }
        return handOut(connection)
    }

    mutating func opened(_ connection: Connection) -> Action {
        opening -= 1
        if let waiter = popWaiting() {
            busy += 1
            return .hand(connection, to: waiter, reused: false)
        }
        return keep(connection, resting: false)
    }

    /// The connection was opened for the task at the head of the queue: it fails, the rest wait on.
    mutating func openFailed() -> Action? {
        opening -= 1
        return popWaiting().map { .fail($0, .connectFailed) }
    }

    /// A task is done with its connection: `reusable` as its exchange judged it (and still open);
    /// `rests` after a body-less answer.
    @inline(__always)
    mutating func released(_ connection: Connection, reusable: Bool, rests: Bool) -> Action {
        busy -= 1
        return reusable ? keep(connection, resting: rests) : .close(connection)
    }

    /// A busy connection left the pool for good (upgraded to a tunnel).
    mutating func detached() {
        busy -= 1
    }

    /// The loop has turned since the resting connections came back.
    mutating func settled() {
        for i in idle.indices { idle[i].resting = false }
    }

    /// An idle connection closed, timed out, sent bytes nobody asked for, or is shed: it leaves
    /// (whatever the connection, it is closed). Whether it was idle here.
    @discardableResult
    mutating func idleEnded(_ connection: Connection) -> Bool {
        guard let i = idle.firstIndex(where: { $0.connection === connection }) else { return false }
        idle.remove(at: i)
        return true
    }

    /// Every idle connection leaves (shutdown, out of descriptors); the caller closes them.
    mutating func removeAllIdle() -> [Connection] {
        let all = idle.map(\.connection)
        idle.removeAll()
        return all
    }

    // MARK: - Keeping and handing out

    private mutating func keep(_ connection: Connection, resting: Bool) -> Action {
        if idle.count >= limits.maxIdle { return .close(connection) }
        idle.append(IdleConnection(connection: connection, resting: resting, recheck: resting))
        return .keepIdle(connection, resting: resting)
    }

    private mutating func handOut(_ connection: Connection) -> Action {
        busy += 1
        return .hand(connection, to: popWaiting()!, reused: true)
    }

    private mutating func popWaiting() -> Waiter? {
        guard waitingHead < waiting.count else { return nil }
        // Mostly a request's own task, queued and handed a connection at once: the only one.
        if waitingHead == 0, waiting.count == 1 { return waiting.removeLast() }
        let waiter = waiting[waitingHead]
        waiting[waitingHead] = nil
        waitingHead += 1
        if waitingHead > 32, waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        return waiter
    }
}
