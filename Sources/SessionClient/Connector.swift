import EventLoop
import Glibc
import HTTPWire

/// Resolves a name and connects to the first address that accepts, within the connect timeout.
/// An https origin with a parent proxy configured is reached through a tunnel: the parent's name
/// is resolved and connected to, asked to `CONNECT` to the origin, and TLS with the origin starts
/// inside, verified as on a direct connection. The timeout covers all of it.
final class Connector {
    /// Unowned like every session reference: the session outlives what it starts, and a strong one
    /// here would tie the session to the pool that keeps its connectors.
    private unowned let session: Session
    private let target: OriginKey
    /// The client address the connection is opened for: its name lookups count against its bound.
    private let client: [UInt8]?
    private var completion: ((Result<Stream, SessionError>) -> Void)?
    private var resolveRequest: ResolveRequest?
    private var addresses: [SocketAddress] = []
    private var attempt: Stream?
    private var timer: Timer?
    private var lastError: Int32 = 0
    /// Idle connections were closed once for this connect, after an EMFILE.
    private var shedIdle = false
    private var attemptAddress: SocketAddress?
    /// The parent proxy the tunnel goes through; nil for a direct connection.
    private let parent: ProxyAddress?
    private var handshake: ParentHandshake?
    /// The TLS handshake with the origin runs inside the parent's tunnel: its failure is final.
    private var insideTunnel = false
    private(set) var isFinished = false

    init(session: Session, target: OriginKey, client: [UInt8]?,
         completion: @escaping (Result<Stream, SessionError>) -> Void) {
        self.session = session
        self.target = target
        self.client = client
        self.completion = completion
        parent = target.scheme == .https ? session.configuration.parentProxy : nil
    }

    /// What is connected to first: the parent for a tunnel, else the target itself.
    private var firstHop: OriginKey { parent?.key ?? target }

    func start() {
        // Tunnels and pooled connections alike: offline, not even a name is looked up.
        if session.offline { return finish(.failure(.offline(upstream: target.description))) }
        let t = Timer(loop: session.loop) { [unowned self] in
            if self.resolveRequest != nil {
                // Still waiting for the name: the error says so, not that the origin was slow.
                let seconds = Int(self.session.configuration.connectTimeout.rounded(.up))
                return self.finish(.failure(.dnsTimeout(host: self.firstHop.host, seconds: seconds)))
            }
            let through = self.parent.map { " through parent proxy \($0.key)" } ?? ""
            self.finish(.failure(.connectTimeout(upstream: self.target.description + through)))
        }
        timer = t
        t.schedule(after: session.configuration.connectTimeout)
        // Answers from the hosts file or the cache come before `resolve` returns.
        let request = session.resolver.resolve(host: firstHop.host, port: firstHop.port, client: client) { [weak self] result in
            guard let self else { return }
            self.resolveRequest = nil
            switch result {
            case .failure(.notFound(let reason)):
                self.finish(.failure(.dnsFailure(host: self.firstHop.host, reason: reason)))
            case .failure(.timedOut(let seconds)):
                self.finish(.failure(.dnsTimeout(host: self.firstHop.host, seconds: seconds)))
            case .failure(.refused(let reason)):
                self.finish(.failure(.dnsBusy(host: self.firstHop.host, reason: reason)))
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
                        self.finish(.failure(.destinationDenied(upstream: self.firstHop.description, reason: refusal)))
                        return
                    }
                }
                self.tryNext()
            }
        }
        if request.isPending { resolveRequest = request }
    }

    func cancel() {
        isFinished = true
        completion = nil
        resolveRequest?.cancel()
        resolveRequest = nil
        attempt?.close()
        attempt = nil
        handshake?.cancel()
        handshake = nil
        timer?.cancel()
        timer = nil
    }

    private func tryNext() {
        guard completion != nil else { return }
        guard !addresses.isEmpty else {
            let upstream = firstHop.description
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
        let started = target.scheme == .https && parent == nil
            ? Stream.connectTLS(loop: session.loop, to: address, context: session.tls, serverName: target.host,
                                origin: target.description)
            : Stream.connect(loop: session.loop, to: address)
        switch started {
        case .failure(let e):
            lastError = e.errno
            if e.errno == EMFILE || e.errno == ENFILE, !shedIdle {
                // Out of descriptors: idle pooled connections go before this request fails.
                shedIdle = true
                if session.shedIdleConnections() > 0 { addresses.insert(address, at: 0) }
            }
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
            if let parent, !stream.isTLS { return askParent(parent, over: stream) }
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
        } else if stream.isTLS, insideTunnel || event != .error(ECONNREFUSED),
                  let reason = stream.tlsFailureReason ?? handshakeCut(event) ?? (insideTunnel ? "TLS handshake failed" : nil) {
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

    /// Connected to the parent: it is asked for a tunnel to the target, and TLS starts inside.
    private func askParent(_ parent: ProxyAddress, over stream: Stream) {
        // No timeout of its own: the connect timeout runs on over the whole setup.
        let h = ParentHandshake(stream: stream, target: target, parent: parent, tlsFollows: true,
                                timeout: nil) { [weak self] result in
            guard let self else { return }
            self.handshake = nil
            switch result {
            case .failure(let error):
                self.finish(.failure(error))
            case .success(let tunnel):
                self.startTLS(inside: tunnel)
            }
        }
        handshake = h
        h.start()
    }

    private func startTLS(inside tunnel: Stream) {
        guard let fd = tunnel.detachSocket() else {
            tunnel.close()
            return finish(.failure(.tlsFailure(upstream: target.description, reason: "the tunnel closed before TLS started")))
        }
        insideTunnel = true
        switch Stream.startTLS(loop: session.loop, socket: fd, context: session.tls, serverName: target.host,
                               origin: target.description) {
        case .failure(let e):
            finish(.failure(.tlsFailure(upstream: target.description, reason: String(cString: strerror(e.errno)))))
        case .success(let stream):
            attempt = stream
            stream.delegate = ConnectWatcher(owner: self)
            stream.enableReading()
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
        handshake?.cancel()
        handshake = nil
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
    private let client: [UInt8]?
    private var completion: ((Result<Stream, SessionError>) -> Void)?
    private var connector: Connector?
    private var handshake: ParentHandshake?

    init(session: Session, target: OriginKey, client: [UInt8]?,
         completion: @escaping (Result<Stream, SessionError>) -> Void) {
        self.session = session
        self.target = target
        self.client = client
        self.completion = completion
    }

    func start() {
        guard let parent = session.configuration.parentProxy else {
            connector = Connector(session: session, target: target, client: client) { [weak self] result in self?.finish(result) }
            connector?.start()
            return
        }
        connector = Connector(session: session, target: parent.key, client: client) { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure(let error):
                self.finish(.failure(error))
            case .success(let stream):
                let h = ParentHandshake(stream: stream, target: self.target, parent: parent, tlsFollows: false,
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

/// `CONNECT target` to a parent proxy on a fresh connection to it, with the parent's credentials;
/// a 2xx answer makes the connection the tunnel (for a raw tunnel, bytes after the answer stay in
/// its input to be relayed). `ParentConnect` judges the answer.
private final class ParentHandshake: StreamDelegate {
    private let stream: Stream
    private let target: OriginKey
    private let parent: ProxyAddress
    private let tlsFollows: Bool
    private let timeout: Double?
    private var completion: ((Result<Stream, SessionError>) -> Void)?
    private var interimAnswers = 0

    init(stream: Stream, target: OriginKey, parent: ProxyAddress, tlsFollows: Bool, timeout: Double?,
         completion: @escaping (Result<Stream, SessionError>) -> Void) {
        self.stream = stream
        self.target = target
        self.parent = parent
        self.tlsFollows = tlsFollows
        self.timeout = timeout
        self.completion = completion
    }

    func start() {
        stream.delegate = self
        // host:port, an IPv6 address in brackets
        stream.output.append(ParentConnect.request(authority: target.description, credentials: parent.credentials))
        // The parent's answer is awaited as long as an origin's would be.
        if let timeout { stream.setTimeouts(read: timeout, write: timeout) }
        stream.enableReading()
    }

    func cancel() {
        completion = nil
        stream.close()
    }

    func streamReadable(_ stream: Stream) {
        let input = stream.input
        while completion != nil, input.count > 0 {
            let step = input.withContiguousPrefix(maxBytes: ParentConnect.maxHeadBytes) { bytes in
                ParentConnect.judge(bytes, target: target.description, parent: parent.key.description,
                                    tlsFollows: tlsFollows)
            }
            switch step {
            case .needMore:
                return
            case .failed(let error):
                return fail(error)
            case .interim(let length):
                input.drain(length)
                interimAnswers += 1
                if interimAnswers > ParentConnect.maxInterimAnswers {
                    return fail(.connectFailed(upstream: parent.key.description,
                                               reason: "more than \(ParentConnect.maxInterimAnswers) interim answers to CONNECT"))
                }
            case .open(let length):
                input.drain(length)
                // Larder's CONNECT must be out whole before the socket changes hands.
                if tlsFollows, stream.output.count > 0 {
                    return fail(.parentSentEarlyBytes(parent: parent.key.description, target: target.description))
                }
                stream.disableReading()
                stream.setTimeouts(read: nil, write: nil)
                let c = completion
                completion = nil
                c?(.success(stream))
                return
            }
        }
    }

    func streamDrained(_ stream: Stream) {}

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected: break
        case .timeout: fail(.requestTimeout(upstream: parent.key.description))
        case .endOfStream, .error: fail(.prematureClose(upstream: parent.key.description))
        }
    }

    private func fail(_ error: SessionError) {
        stream.close()
        let c = completion
        completion = nil
        c?(.failure(error))
    }
}
