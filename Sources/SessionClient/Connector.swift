import EventLoop
import Glibc
import HTTPWire

/// Resolves a name and connects to the first address that accepts, within the connect timeout.
final class Connector {
    /// Unowned like every session reference: the session outlives what it starts, and a strong one
    /// here would tie the session to the pool that keeps its connectors.
    private unowned let session: Session
    private let target: OriginKey
    private var completion: ((Result<Stream, SessionError>) -> Void)?
    private var resolveRequest: ResolveRequest?
    private var addresses: [SocketAddress] = []
    private var attempt: Stream?
    private var timer: Timer?
    private var lastError: Int32 = 0
    private var attemptAddress: SocketAddress?
    private(set) var isFinished = false

    init(session: Session, target: OriginKey, completion: @escaping (Result<Stream, SessionError>) -> Void) {
        self.session = session
        self.target = target
        self.completion = completion
    }

    func start() {
        // Tunnels and pooled connections alike: offline, not even a name is looked up.
        if session.offline { return finish(.failure(.offline(upstream: target.description))) }
        let t = Timer(loop: session.loop) { [unowned self] in
            self.finish(.failure(.connectTimeout(upstream: self.target.description)))
        }
        timer = t
        t.schedule(after: session.configuration.connectTimeout)
        resolveRequest = session.resolver.resolve(host: target.host, port: target.port) { [weak self] result in
            guard let self else { return }
            self.resolveRequest = nil
            switch result {
            case .failure(.notFound(let reason)):
                self.finish(.failure(.dnsFailure(host: self.target.host, reason: reason)))
            case .success(let list):
                self.addresses = list
                if let gate = self.session.addressGate {
                    var refusal: String?
                    self.addresses.removeAll { address in
                        guard let reason = gate(address) else { return false }
                        refusal = reason
                        return true
                    }
                    if self.addresses.isEmpty, let refusal {
                        self.finish(.failure(.destinationDenied(upstream: self.target.description, reason: refusal)))
                        return
                    }
                }
                self.tryNext()
            }
        }
    }

    func cancel() {
        isFinished = true
        completion = nil
        resolveRequest?.cancel()
        resolveRequest = nil
        attempt?.close()
        attempt = nil
        timer?.cancel()
        timer = nil
    }

    private func tryNext() {
        guard completion != nil else { return }
        guard !addresses.isEmpty else {
            let upstream = target.description
            if lastError == ECONNREFUSED || lastError == 0 {
                finish(.failure(.connectionRefused(upstream: upstream)))
            } else {
                finish(.failure(.connectFailed(upstream: upstream,
                                               reason: String(cString: strerror(lastError)))))
            }
            return
        }
        let address = addresses.removeFirst()
        attemptAddress = address
        let started = target.scheme == .https
            ? Stream.connectTLS(loop: session.loop, to: address, context: session.tls, serverName: target.host,
                                origin: target.description)
            : Stream.connect(loop: session.loop, to: address)
        switch started {
        case .failure(let e):
            lastError = e.errno
            tryNext()
        case .success(let stream):
            attempt = stream
            stream.delegate = ConnectWatcher(owner: self)
            stream.enableReading()
        }
    }

    fileprivate func attemptEnded(_ stream: Stream, _ event: StreamEvent) {
        guard stream === attempt else { return }
        if event == .connected {
            attempt = nil
            stream.delegate = nil
            if reachesThisMachine(stream) {
                stream.close()
                let host = attemptAddress?.host ?? target.host
                finish(.failure(.destinationDenied(upstream: target.description,
                                                   reason: "\(host) is this machine (protect_this_host)")))
                return
            }
            if stream.isTLS, let pinned = session.tls.pinnedFingerprint(for: target.host) {
                let presented = stream.peerCertificateSHA256 ?? "none"
                guard presented == pinned else {
                    stream.close()
                    finish(.failure(.tlsFailure(upstream: target.description,
                                                reason: "certificate fingerprint mismatch: the origin presented sha256 "
                                                    + "\(presented), tls.trust pins \(pinned)")))
                    return
                }
            }
            if stream.isTLS {
                // The session is kept when the connection goes idle or closes (OriginConnection).
                session.tlsHandshakes += 1
                if session.tls.resumedSession(stream) { session.tlsResumptions += 1 }
            }
            finish(.success(stream))
        } else if stream.isTLS, event != .error(ECONNREFUSED), let reason = stream.tlsFailureReason ?? handshakeCut(event) {
            attempt = nil
            stream.close()
            finish(.failure(.tlsFailure(upstream: target.description, reason: reason)))
        } else {
            if case .error(let e) = event { lastError = e } else { lastError = ECONNRESET }
            attempt = nil
            stream.close()
            tryNext()
        }
    }

    /// The connection's two ends have one address: it reached this machine. Checked only where
    /// the configuration asks, and never for a parent proxy (which may well run here).
    private func reachesThisMachine(_ stream: Stream) -> Bool {
        guard session.configuration.refuseThisMachine, session.configuration.parentProxy == nil,
              let peer = attemptAddress, let local = SocketAddress.local(of: stream.fileDescriptor) else { return false }
        return local.sameHost(as: peer)
    }

    /// A TLS connection that ended before its handshake did, without an OpenSSL error.
    private func handshakeCut(_ event: StreamEvent) -> String? {
        switch event {
        case .endOfStream: return "connection closed during the TLS handshake"
        case .error(let e) where e != 0 && e != ECONNREFUSED: return nil
        case .error: return "TLS handshake failed"
        default: return nil
        }
    }

    private func finish(_ result: Result<Stream, SessionError>) {
        isFinished = true
        timer?.cancel()
        timer = nil
        resolveRequest?.cancel()
        resolveRequest = nil
        if case .failure = result { attempt?.close(); attempt = nil }
        guard let c = completion else {
            if case .success(let s) = result { s.close() }
            return
        }
        completion = nil
        c(result)
    }
}

/// Watches a connection attempt until it connects or fails.
private final class ConnectWatcher: StreamDelegate {
    unowned let owner: Connector
    init(owner: Connector) { self.owner = owner }
    func streamReadable(_ stream: Stream) {}
    func streamDrained(_ stream: Stream) {}
    func stream(_ stream: Stream, event: StreamEvent) { owner.attemptEnded(stream, event) }
}

/// An outstanding CONNECT-tunnel connection attempt: a TCP connection to the destination, or —
/// with a parent proxy configured — to the parent, which is then asked to `CONNECT` on.
public final class TunnelOpener {
    private unowned let session: Session
    private let target: OriginKey
    private var completion: ((Result<Stream, SessionError>) -> Void)?
    private var connector: Connector?
    private var handshake: ParentHandshake?

    init(session: Session, target: OriginKey, completion: @escaping (Result<Stream, SessionError>) -> Void) {
        self.session = session
        self.target = target
        self.completion = completion
    }

    func start() {
        guard let parent = session.configuration.parentProxy else {
            connector = Connector(session: session, target: target) { [weak self] result in self?.finish(result) }
            connector?.start()
            return
        }
        let parentKey = OriginKey(scheme: .http, host: parent.host, port: parent.port)
        connector = Connector(session: session, target: parentKey) { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure(let error):
                self.finish(.failure(error))
            case .success(let stream):
                let h = ParentHandshake(stream: stream, target: self.target, parent: parentKey,
                                        timeout: self.session.configuration.timeoutIntervalForRequest) { [weak self] r in
                    self?.finish(r)
                }
                self.handshake = h
                h.start()
            }
        }
        connector?.start()
    }

    private func finish(_ result: Result<Stream, SessionError>) {
        connector = nil
        handshake = nil
        let c = completion
        completion = nil
        c?(result)
    }

    /// The completion will not run; a half-open connection is closed.
    public func cancel() {
        completion = nil
        connector?.cancel()
        connector = nil
        handshake?.cancel()
        handshake = nil
    }
}

/// `CONNECT target` to a parent proxy on a fresh connection to it; a 2xx answer makes the
/// connection the tunnel (bytes after the answer stay in its input for the tunnel to relay).
private final class ParentHandshake: StreamDelegate {
    private let stream: Stream
    private let target: OriginKey
    private let parent: OriginKey
    private let timeout: Double
    private var completion: ((Result<Stream, SessionError>) -> Void)?
    private var response = ResponseHead()

    static let maxHeadBytes = 64 * 1024

    init(stream: Stream, target: OriginKey, parent: OriginKey, timeout: Double,
         completion: @escaping (Result<Stream, SessionError>) -> Void) {
        self.stream = stream
        self.target = target
        self.parent = parent
        self.timeout = timeout
        self.completion = completion
    }

    func start() {
        stream.delegate = self
        let authority = target.description  // host:port, an IPv6 address in brackets
        var w = MessageWriter(capacity: 64 + 2 * authority.utf8.count)
        w.append("CONNECT ")
        w.appendString(authority)
        w.append(" HTTP/1.1\r\nHost: ")
        w.appendString(authority)
        w.append("\r\n\r\n")
        stream.output.append(w.bytes)
        // The parent's answer is awaited as long as an origin's would be.
        stream.setTimeouts(read: timeout, write: timeout)
        stream.enableReading()
    }

    func cancel() {
        completion = nil
        stream.close()
    }

    func streamReadable(_ stream: Stream) {
        let input = stream.input
        let parsed: Int?
        do {
            parsed = try input.withContiguousPrefix(maxBytes: ParentHandshake.maxHeadBytes) { bytes throws(HTTPWireError) in
                try ResponseParser.parse(bytes, into: &response, requestMethod: .connect,
                                         limits: HeadLimits(maxHeadBytes: ParentHandshake.maxHeadBytes))
            }
        } catch {
            return fail(.invalidResponse(upstream: parent.description, error))
        }
        guard let length = parsed else {
            if input.count >= ParentHandshake.maxHeadBytes { fail(.responseHeadTooLarge(upstream: parent.description)) }
            return
        }
        input.drain(length)
        if response.isInformational { return }  // e.g. 100: the final answer follows
        guard (200..<300).contains(response.status) else {
            return fail(.connectFailed(upstream: parent.description,
                                       reason: "the parent proxy answered CONNECT \(target) with \(response.status)"))
        }
        stream.disableReading()
        stream.setTimeouts(read: nil, write: nil)
        let c = completion
        completion = nil
        c?(.success(stream))
    }

    func streamDrained(_ stream: Stream) {}

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected: break
        case .timeout: fail(.requestTimeout(upstream: parent.description))
        case .endOfStream, .error: fail(.prematureClose(upstream: parent.description))
        }
    }

    private func fail(_ error: SessionError) {
        stream.close()
        let c = completion
        completion = nil
        c?(.failure(error))
    }
}
