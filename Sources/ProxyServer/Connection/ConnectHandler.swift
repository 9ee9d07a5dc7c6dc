import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// CONNECT: a tunnel to the destination, or — for destinations `tls.intercept` names — TLS
/// interception: the tunnel is answered 200 as usual, then the client's TLS is terminated on the
/// same socket with a certificate minted for the destination, and the requests inside are served
/// like any other (from the cache when they may be, from the origin over verified TLS otherwise).
enum ConnectHandler {
    static func handle(_ target: RequestTarget, on c: ClientConnection) {
        let worker = c.worker
        guard worker.settings.connectPorts.contains(target.port) else {
            worker.logger.notice("403 CONNECT from \(c.peer) to \(target.hostString):\(target.port): port not allowed")
            worker.stats.add(.deniedConnectPort)
            return c.answerError(403, "CONNECT to port \(target.port) is not allowed")
        }
        // An intercepted CONNECT opens no tunnel: offline, the requests inside are judged one by one.
        // A CONNECT stream of an HTTP/2 connection has no socket of its own to start TLS on: it
        // is tunnelled untouched.
        let intercepted = !c.isStream && (worker.interception?.matches(host: target.host) ?? false)
        guard OfflineGuard.check(c.request, intercepted: intercepted, on: c) == .goOn,
              AccessCheck.check(host: target.host, port: target.port, on: c) == .goOn else { return }
        if intercepted {
            return intercept(OriginKey(scheme: .https, host: target.hostString, port: target.port), on: c)
        }
        c.context.upstream = OriginKey(scheme: .http, host: target.hostString, port: target.port)
        // A tunnel of its own connection is counted with it; one of many on an HTTP/2 connection
        // counts as a request at an origin and a connection of its own, while it lasts.
        if c.isStream { guard c.claimOriginSocket() else { return } }
        let opener = worker.session.openTunnel(host: target.hostString, port: target.port,
                                               client: c.peerAddress) { [unowned c] result in
            switch result {
            case .success(let upstream):
                c.tunnelEstablished()
                startTunnel(upstream, on: c)
            case .failure(let error):
                if case .dnsBusy = error {
                    c.worker.noteLookupRefused(error.message, client: c.peer)
                } else {
                    c.worker.logger.warning("\(error.status) CONNECT from \(c.peer): \(error.message)")
                    c.worker.stats.add(Count.originError(error))
                }
                c.tunnelFailed(error.status, error.message)
            }
        }
        // An opener that fails at once has answered already.
        if case .routing = c.machine.state { c.send(.connectStarted(opener)) }
    }

    /// Bytes pumped both ways from now on; the tunnel owns both streams.
    static func startTunnel(_ upstream: Stream, on c: ClientConnection) {
        // Logged when it ends, with the bytes it carried each way.
        // A stream's tunnel holds what any of its answers may (`http2.stream_output`) each way.
        let highWater = c.isStream ? c.outputHighWater : Tunnel.defaultHighWater
        let tunnel = Tunnel(c.stream, upstream, loop: c.worker.loop, highWater: highWater) { [unowned c] t in
            c.noteTunnel(toClient: t.bytesFromB, fromClient: t.bytesFromA)
            c.send(.tunnelClosed)
        }
        c.send(.tunnelStarted(tunnel))
        tunnel.start()
    }

    private static func intercept(_ origin: OriginKey, on c: ClientConnection) {
        c.context.upstream = origin
        c.worker.stats.add(.connectsIntercepted)
        c.answerIntercepted(origin)
    }

    /// The CONNECT answer is out: the TLS handshake starts on the socket.
    static func continueInTLS(_ c: ClientConnection) {
        let worker = c.worker
        guard let origin = c.context.upstream, let interception = worker.interception else { return c.send(.close) }
        // A client that already sent TLS bytes did not wait for the answer; they cannot be handed to
        // OpenSSL after the fact.
        guard c.stream.input.count == 0 else {
            worker.logger.notice("interception of \(origin): client \(c.peer) sent data before the CONNECT answer")
            return c.send(.close)
        }
        let context: TLSServerContext
        switch interception.context(for: origin.host) {
        case .success(let ctx): context = ctx
        case .failure(let error):
            worker.logger.error("interception of \(origin.host): no certificate: \(error)")
            return c.send(.close)
        }
        guard let fd = c.stream.detachSocket(), let tls = Stream.acceptTLS(loop: worker.loop, socket: fd, context: context) else {
            worker.logger.error("interception of \(origin.host): cannot start TLS")
            return c.send(.close)
        }
        c.attach(tls, tlsPending: true)
        c.send(.tlsStarted)
    }
}
