import EventLoop
import FTPWire

/// The session's FTP gateway, as the URL Loading System loads `ftp://` itself: a task for an
/// ftp:// origin gets an in-memory stream and does over it exactly what it does over an HTTP/1.1
/// connection (the same timeouts, framing checks and cache handling); an `FTPExchange` reads the
/// request it writes, carries it out over FTP, and writes the answer back as HTTP/1.1
/// (`Connection: close`: one exchange per stream). Control connections are kept per login
/// between requests and reused.
final class FTPGateway {
    unowned(unsafe) let session: Session
    private var idle: [FTPLoginKey: [FTPControlConnection]] = [:]
    private var idleCount = 0
    private var exchanges: [ObjectIdentifier: FTPExchange] = [:]

    init(session: Session) {
        self.session = session
    }

    /// A stream for one request to `origin`.
    func openStream(for origin: OriginKey, client: [UInt8]?) -> Stream {
        let exchange = FTPExchange(gateway: self, origin: origin, client: client)
        let stream = Stream.inMemory(loop: session.loop, peer: exchange)
        exchange.stream = stream
        exchanges[ObjectIdentifier(exchange)] = exchange
        return stream
    }

    func exchangeEnded(_ exchange: FTPExchange) {
        exchanges[ObjectIdentifier(exchange)] = nil
    }

    // MARK: Control connections

    /// An idle control connection logged in as `login`, if one is kept.
    func takeIdle(_ login: FTPLoginKey) -> FTPControlConnection? {
        while var list = idle[login], let control = list.popLast() {
            idle[login] = list.isEmpty ? nil : list
            idleCount -= 1
            if !control.isClosed { return control }
        }
        return nil
    }

    /// Kept for the next request of its login (one its session left logged in, binary, in its login
    /// directory), within the session's idle limits; else closed.
    func keep(_ control: FTPControlConnection) {
        let limit = session.configuration.maxIdleConnectionsPerHost
        guard !control.isClosed, idleCount < session.configuration.maxIdleConnections,
              idle[control.login, default: []].count < limit else {
            control.close()
            return
        }
        control.onIdleClose = { [unowned self] closed in self.forget(closed) }
        control.enterIdle(timeout: session.configuration.idleConnectionTimeout, loop: session.loop)
        idle[control.login, default: []].append(control)
        idleCount += 1
    }

    private func forget(_ control: FTPControlConnection) {
        guard var list = idle[control.login], let i = list.firstIndex(where: { $0 === control }) else { return }
        list.remove(at: i)
        idle[control.login] = list.isEmpty ? nil : list
        idleCount -= 1
    }

    /// Opens a control connection to `origin` through the session's connector: name lookup,
    /// `deny_destinations` and the other address checks, the connect timeout.
    func connect(_ origin: OriginKey, client: [UInt8]?,
                 completion: @escaping (Result<Stream, SessionError>) -> Void) -> Connector {
        let connector = Connector(session: session, target: origin, client: client, completion: completion)
        connector.start()
        return connector
    }

    /// Closes every idle control connection (shutdown, or out of descriptors).
    func closeIdle() {
        let all = idle.values.flatMap { $0 }
        idle.removeAll()
        idleCount = 0
        for control in all { control.close() }
    }
}
