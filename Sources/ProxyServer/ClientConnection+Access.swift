import EventLoop
import HTTPWire
import Statistics

/// The checks between a parsed request and its destination: `deny_destinations` by host name,
/// proxy authentication, and — when a parent proxy carries the request — the destination's
/// addresses (without a parent they are checked after DNS, in the session, on every address
/// Larder connects to).
extension ClientConnection {
    /// true: go on. false: the request was answered (403, 407, 429) or waits for a background
    /// check (credentials, a name's addresses), after which `routeRequest` runs again.
    func admitted(toHost host: [UInt8], port: Int) -> Bool {
        if let reason = worker.settings.destinations.refusal(host: host) {
            refuseDestination(reason)
            return false
        }
        guard authenticated(forHost: host) else { return false }
        return admittedThroughParent(host: host, port: port)
    }

    private func refuseDestination(_ reason: String) {
        worker.stats.add(.deniedDestination)
        worker.logger.notice("403 to \(peer): \(reason)")
        respondAndContinue(403, "destination refused: \(reason)")
    }

    // MARK: - Proxy authentication

    private func authenticated(forHost host: [UInt8]) -> Bool {
        guard let auth = worker.settings.authenticator, auth.required(forHost: host) else { return true }
        guard let index = request.headers.firstIndex(of: "proxy-authorization") else {
            worker.stats.add(.authMissing)
            challenge(auth, "this proxy needs credentials (Proxy-Authorization: Basic)")
            return false
        }
        let value = request.headers.withBytes(request.headers.fields[index].value) { Array($0) }
        let now = monotonicSeconds()
        guard let verdict = authVerdict ?? auth.rememberedVerdict(value, now: now) else {
            // Unseen credentials: check them off the loop; reading waits until the answer is in.
            let waiter = AuthWaiter(loop: worker.loop, connection: self)
            switch auth.check(value, client: peerAddress, now: now, completion: { waiter.deliver($0) }) {
            case .queued:
                state = .authenticating
                stream.disableReading()
            case .refused(let refusal, let logCount):
                refuseCheck(refusal, logCount: logCount)
            }
            return false
        }
        // Kept for this request (cleared by the next): `routeRequest` may run again after a
        // destination check, and must not depend on the verdict still being remembered.
        authVerdict = verdict
        guard verdict == .valid else {
            worker.stats.add(.authFailed)
            worker.logger.notice("407 to \(peer): wrong proxy credentials")
            challenge(auth, "wrong proxy credentials")
            return false
        }
        return true
    }

    private func challenge(_ auth: ProxyAuthenticator, _ message: String) {
        respondAndContinue(407, message, extraField: "Proxy-Authenticate: Basic realm=\"\(auth.realm)\", charset=\"UTF-8\"")
    }

    /// Too many credential checks pending: answered at once rather than queued behind them.
    private func refuseCheck(_ refusal: PendingCheckLimits.Refusal, logCount: Int?) {
        let reason: String
        switch refusal {
        case .queueFull:
            worker.stats.add(.authChecksRefusedQueueFull)
            reason = "too many proxy credential checks pending"
        case .clientShareFull:
            worker.stats.add(.authChecksRefusedPerClient)
            reason = "too many proxy credential checks pending from \(peer.host)"
        }
        if let logCount {
            worker.logger.warning("429 to \(logCount) request(s) with unchecked proxy credentials since the last report, latest from \(peer.host): \(reason)")
        }
        respondAndContinue(429, "\(reason); retry shortly",
                           extraField: "Retry-After: \(ProxyAuthenticator.retryAfter)")
    }

    /// A background check's answer, on this connection's loop.
    func authenticationFinished(_ verdict: ProxyAuthenticator.Verdict) {
        guard state == .authenticating else { return }
        state = .readingHead
        authVerdict = verdict
        routeRequest()
    }

    // MARK: - Destinations through a parent proxy

    private func admittedThroughParent(host: [UInt8], port: Int) -> Bool {
        guard worker.session.usesParentProxy else { return true }
        let answer = worker.parentProxyDestinations.check(
            host: String(decoding: host, as: UTF8.self), port: port, rules: worker.settings.destinations,
            now: monotonicSeconds()) { [weak self] in self?.destinationResolved() }
        switch answer {
        case .allowed:
            return true
        case .refused(let reason):
            refuseDestination(reason)
            return false
        case .resolving:
            // The same pause as for a credential check: reading waits, then the request is routed again.
            state = .authenticating
            stream.disableReading()
            return false
        }
    }

    /// The destination's name was resolved, on this connection's loop.
    private func destinationResolved() {
        guard state == .authenticating else { return }
        state = .readingHead
        routeRequest()
    }
}
