import HTTPWire
import Statistics

/// The checks between a parsed request and its destination: `deny_destinations` by host name
/// (addresses are checked after DNS, in the session), and proxy authentication.
extension ClientConnection {
    /// true: go on. false: the request was answered (403, 407) or waits for a credential check,
    /// after which `routeRequest` runs again.
    func admitted(toHost host: [UInt8]) -> Bool {
        if let reason = worker.settings.destinations.refusal(host: host) {
            worker.stats.add(.deniedDestination)
            worker.logger.notice("403 to \(peer): \(reason)")
            respondAndContinue(403, "destination refused: \(reason)")
            return false
        }
        guard let auth = worker.settings.authenticator, auth.required(forHost: host) else { return true }
        guard let index = request.headers.firstIndex(of: "proxy-authorization") else {
            worker.stats.add(.authMissing)
            challenge(auth, "this proxy needs credentials (Proxy-Authorization: Basic)")
            return false
        }
        let value = request.headers.withBytes(request.headers.fields[index].value) { Array($0) }
        let verdict: ProxyAuthenticator.Verdict
        if let known = authVerdict ?? auth.rememberedVerdict(value, now: monotonicSeconds()) {
            verdict = known
        } else {
            // Unseen credentials: check them off the loop; reading waits until the answer is in.
            state = .authenticating
            stream.disableReading()
            let waiter = AuthWaiter(loop: worker.loop, connection: self)
            auth.check(value) { waiter.deliver($0) }
            return false
        }
        authVerdict = nil
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

    /// A background check's answer, on this connection's loop.
    func authenticationFinished(_ verdict: ProxyAuthenticator.Verdict) {
        guard state == .authenticating else { return }
        state = .readingHead
        authVerdict = verdict
        routeRequest()
    }
}
