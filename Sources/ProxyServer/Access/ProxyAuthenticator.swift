import Dispatch
import EventLoop
import HTTPWire
import Locking

/// `Proxy-Authorization: Basic` for the destinations `auth.destinations` names. A credential seen
/// before is answered from memory; an unseen one is checked on a background queue (bcrypt takes
/// milliseconds by design, which an event loop must not spend), one check per distinct
/// credential however many requests carry it, and the answer is remembered.
///
/// Made-up credentials must not be a cheap way to burn CPU or delay real users: the checks
/// waiting or running are bounded in total and per client address (over the bound, the request
/// is refused at once, see `check`), they run on `concurrentChecks` threads with the clients that
/// have the fewest checks pending first (a real user's one check does not wait behind a flood's
/// share), and verdicts are kept least-recently-used first out, valid apart from invalid.
final class ProxyAuthenticator: Sendable {
    enum Verdict: Sendable, Equatable {
        case valid
        case invalid
    }

    /// What became of a request for a check.
    enum CheckAdmission: Sendable, Equatable {
        /// The completion will run with the verdict.
        case queued
        /// No check was started and the completion will not run; `logCount` is set when a log
        /// line is due (how many refusals it reports).
        case refused(PendingCheckLimits.Refusal, logCount: Int?)
    }

    let realm: String
    let destinations: [HostPattern]
    private let users: UsersFile

    /// A credential being checked: who asked first (holding a place in the limits), and whoever
    /// waits for the answer.
    private struct Pending {
        var client: [UInt8]
        var waiters: [@Sendable (Verdict) -> Void]
    }

    private struct State {
        var memory: VerdictMemory
        var pending: [[UInt8]: Pending] = [:]
        /// Credentials waiting for a thread, oldest first.
        var queue: [[UInt8]] = []

        /// The next credential to check: the oldest of the client with the fewest pending checks.
        /// The queue is at most `limits.total` long.
        mutating func takeNext() -> [UInt8]? {
            var best = -1
            var fewest = Int.max
            for (i, value) in queue.enumerated() {
                let n = pending[value].map { limits.pending(of: $0.client) } ?? 0
                if n < fewest {
                    best = i
                    fewest = n
                }
            }
            return best < 0 ? nil : queue.remove(at: best)
        }
        var running = 0
        var limits: PendingCheckLimits
        var refusalLog = LogThrottle()
    }

    private let state: Locked<State>
    private let dispatch = DispatchQueue(label: "larder.proxy-auth", attributes: .concurrent)
    /// Dates what the checking threads remember; the loops pass their own time to the lookups.
    private let clock: any ProxyClock

    /// At most this many checks at once, so a flood of made-up credentials costs two cores at most.
    static let concurrentChecks = 2
    static let validFor = 300.0
    /// Short, so a typo corrected is accepted at once, long enough to blunt repeats of a wrong one.
    static let invalidFor = 5.0
    /// Per kind (valid, invalid).
    static let rememberedLimit = 10_000
    /// Defaults of `auth.max_pending_checks` and `auth.max_pending_checks_per_client`.
    static let defaultPendingLimit = 32
    static let defaultPendingPerClient = 4
    /// What a refused client is told to wait, in seconds.
    static let retryAfter = 1

    init(users: UsersFile, realm: String, destinations: [HostPattern],
         pendingLimit: Int = ProxyAuthenticator.defaultPendingLimit,
         pendingPerClient: Int = ProxyAuthenticator.defaultPendingPerClient,
         clock: any ProxyClock = SystemClock.shared) {
        self.clock = clock
        self.users = users
        self.realm = realm
        self.destinations = destinations
        state = Locked(State(memory: VerdictMemory(capacity: ProxyAuthenticator.rememberedLimit,
                                                   validFor: ProxyAuthenticator.validFor,
                                                   invalidFor: ProxyAuthenticator.invalidFor),
                             limits: PendingCheckLimits(total: pendingLimit, perClient: pendingPerClient)))
    }

    /// Whether requests to `host` need credentials.
    func required(forHost host: [UInt8]) -> Bool {
        destinations.contains { $0.matches(host) }
    }

    /// The remembered verdict for a `Proxy-Authorization` value, if it is fresh.
    func rememberedVerdict(_ value: [UInt8], now: Double) -> Verdict? {
        state.withLock { $0.memory.verdict(value, now: now) }
    }

    /// Checks the value off the loop for `client` (its address); `completion` runs on a background
    /// thread. A value already being checked is joined at no cost; a new one needs a place in the
    /// limits, else it is refused without running anything.
    func check(_ value: [UInt8], client: [UInt8], now: Double,
               completion: @escaping @Sendable (Verdict) -> Void) -> CheckAdmission {
        let (admission, startThread) = state.withLock { s -> (CheckAdmission, Bool) in
            if s.pending[value] != nil {
                s.pending[value]!.waiters.append(completion)
                return (.queued, false)
            }
            if let refusal = s.limits.admit(client) {
                return (.refused(refusal, logCount: s.refusalLog.note(now: now)), false)
            }
            s.pending[value] = Pending(client: client, waiters: [completion])
            s.queue.append(value)
            guard s.running < ProxyAuthenticator.concurrentChecks else { return (.queued, false) }
            s.running += 1
            return (.queued, true)
        }
        if startThread { dispatch.async { [self] in runChecks() } }
        return admission
    }

    /// One checking thread: takes waiting credentials until none is left.
    private func runChecks() {
        while let value = state.withLock({ s -> [UInt8]? in
            guard let next = s.takeNext() else {
                s.running -= 1
                return nil
            }
            return next
        }) {
            let verdict = verify(value)
            let now = clock.monotonic
            let waiters = state.withLock { s -> [@Sendable (Verdict) -> Void] in
                s.memory.remember(value, verdict, now: now)
                guard let done = s.pending.removeValue(forKey: value) else { return [] }
                s.limits.release(done.client)
                return done.waiters
            }
            for w in waiters { w(verdict) }
        }
    }

    private func verify(_ value: [UInt8]) -> Verdict {
        guard let credentials = BasicCredentials.parse(value) else { return .invalid }
        guard let hash = users.hashes[credentials.user] else {
            // An unknown user costs a hash too, so timing does not tell which users exist.
            if let decoy = users.hashes.values.first { _ = PasswordHash.verify(credentials.password, against: decoy) }
            return .invalid
        }
        return PasswordHash.verify(credentials.password, against: hash) ? .valid : .invalid
    }
}

/// How a background check finds its connection again: on the connection's loop, if it is still open.
final class AuthWaiter: @unchecked Sendable {
    let loop: EventLoop
    /// Read and written only on `loop`'s thread.
    weak var connection: ClientConnection?

    init(loop: EventLoop, connection: ClientConnection) {
        self.loop = loop
        self.connection = connection
    }

    func deliver(_ verdict: ProxyAuthenticator.Verdict) {
        loop.execute { [self] in connection?.checkFinished(verdict) }
    }
}
