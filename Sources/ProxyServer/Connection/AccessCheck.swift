import EventLoop
import HTTPWire
import Statistics

/// The checks between a parsed request and its destination: `deny_destinations` by host name,
/// proxy authentication, and — when a parent proxy carries the request — the destination's
/// addresses (without a parent they are checked after DNS, in the session, on every address
/// Larder connects to).
enum AccessCheck {
    /// `.taken`: the request was answered (403, 407, 429) or waits for a background check
    /// (credentials, a name's addresses), after which the connection routes it again.
    static func check(host: [UInt8], port: Int, on c: ClientConnection) -> RouteStep {
        // The flag first: calling into the rules copies them, a reference count per array.
        if c.worker.settings.destinations.refusesHostNames,
           let reason = c.worker.settings.destinations.refusal(host: host) {
            refuseDestination(reason, on: c)
            return .taken
        }
        guard authenticated(forHost: host, on: c) else { return .taken }
        return admittedThroughParent(host: host, port: port, on: c) ? .goOn : .taken
    }

    private static func refuseDestination(_ reason: String, on c: ClientConnection) {
        c.worker.stats.add(.deniedDestination)
        c.worker.logger.notice("403 to \(c.peer): \(reason)")
        c.answerError(403, "destination refused: \(reason)")
    }

    // MARK: - Proxy authentication

    private static func authenticated(forHost host: [UInt8], on c: ClientConnection) -> Bool {
        let worker = c.worker
        guard let auth = worker.settings.authenticator, auth.required(forHost: host) else { return true }
        let headers = c.request.headers
        guard let index = headers.firstIndex(of: "proxy-authorization") else {
            worker.stats.add(.authMissing)
            challenge(auth, "this proxy needs credentials (Proxy-Authorization: Basic)", on: c)
            return false
        }
        let value = headers.withBytes(headers.fields[index].value) { Array($0) }
        let now = worker.clock.monotonic
        guard let verdict = c.context.authVerdict ?? auth.rememberedVerdict(value, now: now) else {
            // Unseen credentials: check them off the loop; reading waits until the answer is in.
            let waiter = AuthWaiter(loop: worker.loop, connection: c)
            switch auth.check(value, client: c.peerAddress, now: now, completion: { waiter.deliver($0) }) {
            case .queued:
                c.send(.checkPending)
            case .refused(let refusal, let logCount):
                refuseCheck(refusal, logCount: logCount, on: c)
            }
            return false
        }
        // Kept for this request (the next replaces it): the request may be routed again after a
        // destination check, and must not depend on the verdict still being remembered.
        c.context.authVerdict = verdict
        guard verdict == .valid else {
            worker.stats.add(.authFailed)
            worker.logger.notice("407 to \(c.peer): wrong proxy credentials")
            challenge(auth, "wrong proxy credentials", on: c)
            return false
        }
        return true
    }

    private static func challenge(_ auth: ProxyAuthenticator, _ message: String, on c: ClientConnection) {
        c.answerError(407, message, extraField: "Proxy-Authenticate: Basic realm=\"\(auth.realm)\", charset=\"UTF-8\"")
    }

    /// Too many credential checks pending: answered at once rather than queued behind them.
    private static func refuseCheck(_ refusal: PendingCheckLimits.Refusal, logCount: Int?, on c: ClientConnection) {
        let reason: String
        switch refusal {
        case .queueFull:
            c.worker.stats.add(.authChecksRefusedQueueFull)
            reason = "too many proxy credential checks pending"
        case .clientShareFull:
            c.worker.stats.add(.authChecksRefusedPerClient)
            reason = "too many proxy credential checks pending from \(c.peer.host)"
        }
        if let logCount {
            c.worker.logger.warning("429 to \(logCount) request(s) with unchecked proxy credentials since the last report, latest from \(c.peer.host): \(reason)")
        }
        c.answerError(429, "\(reason); retry shortly", extraField: "Retry-After: \(ProxyAuthenticator.retryAfter)")
    }

    // MARK: - Destinations through a parent proxy

    private static func admittedThroughParent(host: [UInt8], port: Int, on c: ClientConnection) -> Bool {
        let worker = c.worker
        guard worker.session.usesParentProxy else { return true }
        // A lookup's answer waits here while the request is routed again: a name whose answer
        // may not be kept (a TTL of 0, a failure) must not start another.
        let answer = c.context.destinationAnswer ?? worker.parentProxyDestinations.check(
            host: String(decoding: host, as: UTF8.self), port: port, client: c.peerAddress,
            rules: worker.settings.destinations) { [weak c] answer in
            guard let c, case .routing = c.machine.state else { return }
            c.context.destinationAnswer = answer
            c.checkFinished(nil)
        }
        switch answer {
        case .allowed:
            return true
        case .refused(let reason):
            refuseDestination(reason, on: c)
            return false
        case .unavailable(let reason):
            worker.noteLookupRefused(reason, client: c.peer)
            c.answerError(503, "\(reason); retry shortly", extraField: "Retry-After: 1")
            return false
        case .resolving:
            // The same pause as for a credential check: reading waits, then the request is routed again.
            c.send(.checkPending)
            return false
        }
    }
}
