import EventLoop

/// How many password checks may wait or run at once: in total, and per client address. A check
/// costs a slow hash by design, so without these a client sending made-up credentials queues
/// unbounded work in front of everyone else's first request.
struct PendingCheckLimits: Sendable {
    enum Refusal: Sendable, Equatable {
        /// Every client's checks together fill the queue.
        case queueFull
        /// This client address already has its share waiting.
        case clientShareFull
    }

    let total: Int
    let perClient: Int
    private(set) var pending = 0
    private var byClient: [[UInt8]: Int] = [:]

    init(total: Int, perClient: Int) {
        self.total = max(1, total)
        self.perClient = max(1, min(perClient, total))
    }

    /// Takes a place for one more check from `client`, or says why there is none.
    mutating func admit(_ client: [UInt8]) -> Refusal? {
        let mine = byClient[client, default: 0]
        if mine >= perClient { return .clientShareFull }
        if pending >= total { return .queueFull }
        pending += 1
        byClient[client] = mine + 1
        return nil
    }

    /// Gives back a place taken by `admit` when its check is over.
    mutating func release(_ client: [UInt8]) {
        guard let mine = byClient[client] else { return }
        pending -= 1
        byClient[client] = mine > 1 ? mine - 1 : nil
    }

    func pending(of client: [UInt8]) -> Int { byClient[client, default: 0] }
}

/// Verdicts on `Proxy-Authorization` values, each with the time it stops counting. Valid and
/// invalid ones are kept apart, each bounded and least-recently-used first out, so made-up
/// credentials (however many) never push out a real user's, and nothing is ever wiped wholesale.
struct VerdictMemory: Sendable {
    private var valid: LRUCache<[UInt8], Double>
    private var invalid: LRUCache<[UInt8], Double>
    let validFor: Double
    let invalidFor: Double

    init(capacity: Int, validFor: Double, invalidFor: Double) {
        valid = LRUCache(capacity: capacity)
        invalid = LRUCache(capacity: capacity)
        self.validFor = validFor
        self.invalidFor = invalidFor
    }

    /// The verdict on `value` if one is remembered and still fresh at `now`.
    mutating func verdict(_ value: [UInt8], now: Double) -> ProxyAuthenticator.Verdict? {
        if let until = valid.value(for: value), until > now { return .valid }
        if let until = invalid.value(for: value), until > now { return .invalid }
        return nil
    }

    mutating func remember(_ value: [UInt8], _ verdict: ProxyAuthenticator.Verdict, now: Double) {
        switch verdict {
        case .valid: valid.set(now + validFor, for: value)
        case .invalid: invalid.set(now + invalidFor, for: value)
        }
    }

    var count: (valid: Int, invalid: Int) { (valid.count, invalid.count) }
}

/// Says when a stream of like events deserves a log line: at most one per `interval`, telling
/// how many happened since the last one, so a flood costs one line a second.
struct LogThrottle: Sendable {
    let interval: Double
    private var loggedAt = -Double.infinity
    private var unlogged = 0

    init(interval: Double = 1) {
        self.interval = interval
    }

    /// Counts one event; returns how many to report (this one included) when a line is due.
    mutating func note(now: Double) -> Int? {
        unlogged += 1
        guard now - loggedAt >= interval else { return nil }
        loggedAt = now
        defer { unlogged = 0 }
        return unlogged
    }
}
