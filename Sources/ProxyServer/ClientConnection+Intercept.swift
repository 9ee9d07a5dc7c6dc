import EventLoop
import SessionClient

/// TLS interception of a CONNECT (`tls.intercept`): the tunnel is answered 200 as usual, then the
/// client's TLS is terminated on the same socket with a certificate minted for the destination, and
/// the requests inside are served like any other — from the cache when they may be, from the
/// origin over verified TLS otherwise.
extension ClientConnection {
    func intercept(host: String, port: Int) {
        state = .intercepting
        stream.disableReading()
        upstream = OriginKey(scheme: .https, host: host, port: port)
        noteResponse(200)
        worker.stats.add(.connectsIntercepted)
        stream.output.append(LocalResponse.connectEstablished)
        logRequest()
    }

    /// The CONNECT answer is out: the TLS handshake starts on the socket.
    func continueInTLS() {
        guard let origin = upstream, let interception = worker.interception else { close(); return }
        // A client that already sent TLS bytes did not wait for the answer; they cannot be handed to
        // OpenSSL after the fact.
        guard stream.input.count == 0 else {
            worker.logger.notice("interception of \(origin): client \(peer) sent data before the CONNECT answer")
            close()
            return
        }
        let context: TLSServerContext
        switch interception.context(for: origin.host) {
        case .success(let c): context = c
        case .failure(let error):
            worker.logger.error("interception of \(origin.host): no certificate: \(error)")
            close()
            return
        }
        guard let fd = stream.detachSocket(), let tls = Stream.acceptTLS(loop: worker.loop, socket: fd, context: context) else {
            worker.logger.error("interception of \(origin.host): cannot start TLS")
            close()
            return
        }
        attach(tls)
        tlsHandshakePending = true
        interceptedOrigin = origin
        state = .readingHead
        keepAlive = true
        armDeadline(forHead: true)
        stream.enableReading()
    }
}
