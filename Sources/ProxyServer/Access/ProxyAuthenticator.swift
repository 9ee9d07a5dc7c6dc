import CachePolicy
import Dispatch
import EventLoop
import Locking

/// `Proxy-Authorization: Basic` for the destinations `auth.destinations` names. A credential seen
/// before is answered from memory; an unseen one is checked on a background queue (bcrypt takes
/// milliseconds by design, which an event loop must not spend), one check per distinct
/// credential however many requests carry it, and the answer is remembered.
final class ProxyAuthenticator: Sendable {
    enum Verdict: Sendable, Equatable {
        case valid
        case invalid
    }

    let realm: String
    let destinations: [String]
    private let users: UsersFile

    private struct Remembered {
        var verdict: Verdict
        var until: Double
    }

    private struct State {
        var remembered: [[UInt8]: Remembered] = [:]
        /// Credentials being checked, with whoever waits for the answer.
        var pending: [[UInt8]: [@Sendable (Verdict) -> Void]] = [:]
    }

    private let state = Locked(State())
    /// At most this many checks at once, so a flood of made-up credentials costs two cores at most.
    private let checks = DispatchSemaphore(value: 2)
    private let queue = DispatchQueue(label: "larder.proxy-auth", attributes: .concurrent)

    static let validFor = 300.0
    /// Short, so a typo corrected is accepted at once, long enough to blunt repeats of a wrong one.
    static let invalidFor = 5.0
    static let rememberedLimit = 10_000

    init(users: UsersFile, realm: String, destinations: [String]) {
        self.users = users
        self.realm = realm
        self.destinations = destinations
    }

    /// Whether requests to `host` need credentials.
    func required(forHost host: [UInt8]) -> Bool {
        destinations.contains { CacheRule.hostMatches($0, host) }
    }

    /// The remembered verdict for a `Proxy-Authorization` value, if it is fresh.
    func rememberedVerdict(_ value: [UInt8], now: Double) -> Verdict? {
        state.withLock { s in
            guard let r = s.remembered[value], r.until > now else { return nil }
            return r.verdict
        }
    }

    /// Checks the value off the loop; `completion` runs on a background thread.
    func check(_ value: [UInt8], completion: @escaping @Sendable (Verdict) -> Void) {
        let first = state.withLock { s -> Bool in
            if s.pending[value] != nil {
                s.pending[value]!.append(completion)
                return false
            }
            s.pending[value] = [completion]
            return true
        }
        guard first else { return }
        queue.async { [self] in
            checks.wait()
            let verdict = verify(value)
            checks.signal()
            let now = monotonicSeconds()
            let waiters = state.withLock { s -> [@Sendable (Verdict) -> Void] in
                if s.remembered.count >= ProxyAuthenticator.rememberedLimit {
                    s.remembered.removeAll(keepingCapacity: true)
                }
                s.remembered[value] = Remembered(
                    verdict: verdict,
                    until: now + (verdict == .valid ? ProxyAuthenticator.validFor : ProxyAuthenticator.invalidFor))
                return s.pending.removeValue(forKey: value) ?? []
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
        loop.execute { [self] in connection?.authenticationFinished(verdict) }
    }
}
