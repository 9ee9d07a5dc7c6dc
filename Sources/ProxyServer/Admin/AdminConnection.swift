import CacheStore
import EventLoop
import HTTPWire
import Logging

/// One connection to the admin endpoint: small requests, answered at once, keep-alive. Only
/// `POST /warm` has a body (its URL list, with Content-Length, read once the request has passed
/// the guard and the token); any other request with one is answered and the connection closed.
final class AdminConnection: StreamDelegate {
    unowned let worker: Worker
    let stream: Stream
    let peer: SocketAddress
    /// The address this connection arrived on: what its `Host` must name.
    let local: SocketAddress
    /// `http`, or `https` with `tls.admin`.
    let scheme: String
    let context: AdminContext
    private var request = RequestHead()
    private var closing = false
    private var closed = false
    /// Shutdown has begun: every answer from now on closes its connection.
    private var draining = false
    private var answered = 0
    private var idle: Timer?
    /// The body of a `POST /warm` being read: its bytes so far and its length.
    private var warmBody: (bytes: [UInt8], length: Int, target: AdminTarget)?
    /// A purge waits for the disk writer: requests behind it wait their turn.
    private var awaitingRemoval = false

    static let idleTimeout = 30.0

    init(worker: Worker, stream: Stream, peer: SocketAddress, local: SocketAddress, scheme: String,
         context: AdminContext) {
        self.worker = worker
        self.stream = stream
        self.peer = peer
        self.local = local
        self.scheme = scheme
        self.context = context
    }

    func start() {
        stream.delegate = self
        let t = Timer(loop: worker.loop) { [unowned self] in self.close() }
        idle = t
        t.schedule(after: AdminConnection.idleTimeout)
        stream.enableReading()
    }

    func streamReadable(_ stream: Stream) {
        guard !closing else { return }
        let input = stream.input
        let limits = HeadLimits(maxHeadBytes: 16 * 1024, maxHeaderCount: 64, maxRequestLineBytes: 8 * 1024)
        while !closing, !awaitingRemoval, input.count > 0 {
            if warmBody != nil {
                guard takeWarmBody(input) else { return }
                continue
            }
            let parsed: Int?
            do {
                parsed = try input.withContiguousPrefix(maxBytes: limits.maxHeadBytes) { bytes throws(HTTPWireError) in
                    try RequestParser.parse(bytes, into: &request, limits: limits)
                }
            } catch {
                send(.error(error.requestStatus, error.reason), close: true, headOnly: false)
                return
            }
            guard let length = parsed else {
                if input.count >= limits.maxHeadBytes { send(.error(431, "request head too large"), close: true, headOnly: false) }
                return
            }
            input.drain(length)
            idle?.schedule(after: AdminConnection.idleTimeout)
            answer()
        }
    }

    private func answer() {
        let text = request.headers.withBytes(request.target) { String(decoding: $0, as: UTF8.self) }
        let target = AdminTarget(text)
        // Logged without the token a dashboard URL carries.
        let line = "admin \(peer) \(request.headers.withBytes(request.methodRange) { String(decoding: $0, as: UTF8.self) }) "
            + AdminTarget.redacted(text)
        let response: AdminResponse
        if let refusal = requestGuard.refusal(guardFacts(path: target.path)) {
            response = .error(refusal.status, refusal.reason)
            worker.logger.warning("\(line) \(refusal.status) refused: \(refusal.reason)")
        } else if request.method == .post, target.path == "/warm",
                  context.tokenRefusal(target: target, authorization: request.headers.value(of: "authorization")) == nil {
            switch request.framing {
            case .contentLength(let n) where n <= AdminWarming.maxBodyBytes:
                warmBody = (bytes: [], length: n, target: target)
                // Reserved as far as a length claimed before any byte is cheap to hold.
                warmBody!.bytes.reserveCapacity(min(n, 1 << 20))
                // curl asks before sending a body of more than 1 MiB.
                if n > 0, request.headers.containsToken("100-continue", inFieldsNamed: "expect") {
                    stream.output.append(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                }
                if n == 0 { finishWarmBody(warmBody!) }
                return
            case .contentLength:
                response = .error(413, "the list is larger than \(AdminWarming.maxBodyBytes) bytes")
            default:
                response = .error(411, "POST /warm needs the list as its body, with Content-Length")
            }
            worker.logger.warning("\(line) \(response.status)")
        } else {
            response = context.respond(method: request.method, target: target,
                                       authorization: request.headers.value(of: "authorization"), reader: worker.cacheReader)
            if let removal = response.removal {
                return answerWhenRemoved(removal, line: line)
            }
            if let later = response.later {
                return answerLater(later, line: line)
            }
            log(response, line: line, path: target.path)
        }
        let hasBody = request.framing != .none
        send(response, close: hasBody || !request.keepAlive || worker.draining, headOnly: request.method == .head)
    }

    /// At the level `AdminLogLevel` gives: answered polling is debug. `path` matters only for
    /// reads (a purge and a reload, answered later, pass none).
    private func log(_ response: AdminResponse, line: String, path: String = "") {
        switch AdminLogLevel.of(method: request.method, path: path, status: response.status) {
        case .error: worker.logger.error("\(line) \(response.status): \(response.body.prefix(200))")
        case let level: worker.logger.log(level: level, "\(line) \(response.status)")
        }
    }

    /// Answers a purge once the writer has committed it; the worker serves everyone else meanwhile.
    private func answerWhenRemoved(_ removal: (outcome: RemovalOutcome, answer: @Sendable (RemovalOutcome.Result) -> AdminResponse),
                       line: String) {
        awaitingRemoval = true
        let close = request.framing != .none || !request.keepAlive
        let headOnly = request.method == .head
        _ = RemovalWait(removal.outcome, loop: worker.loop) { [weak self] result in
            guard let self, !self.closed else { return }
            self.awaitingRemoval = false
            let response = removal.answer(result)
            self.log(response, line: line)
            self.send(response, close: close || self.worker.draining, headOnly: headOnly)
            if !self.closing, self.stream.input.count > 0 { self.streamReadable(self.stream) }
        }
    }

    /// Answers once the answer is made on another thread (a reload, once every worker applied it);
    /// the worker serves everyone else meanwhile, this connection's next requests wait their turn.
    private func answerLater(_ later: @Sendable (@escaping @Sendable (AdminResponse) -> Void) -> Void, line: String) {
        awaitingRemoval = true
        let close = request.framing != .none || !request.keepAlive
        let headOnly = request.method == .head
        let loop = worker.loop
        let me = AdminConnectionRef(self)
        later { response in
            loop.execute {
                guard let self = me.connection, !self.closed else { return }
                self.awaitingRemoval = false
                self.log(response, line: line)
                self.send(response, close: close || self.worker.draining, headOnly: headOnly)
                if !self.closing, self.stream.input.count > 0 { self.streamReadable(self.stream) }
            }
        }
    }

    /// Takes what has arrived of a `POST /warm` body; starts the job once it is whole. False when
    /// nothing could be taken.
    private func takeWarmBody(_ input: Buffer) -> Bool {
        // Taken out while appending, so the array is not copied on every piece.
        guard var body = warmBody else { return false }
        warmBody = nil
        let take = input.withFirstSegment { (segment: UnsafeRawBufferPointer) -> Int in
            let n = min(segment.count, body.length - body.bytes.count)
            body.bytes.append(contentsOf: segment.prefix(n))
            return n
        }
        input.drain(take)
        if body.bytes.count == body.length {
            finishWarmBody(body)
            return true
        }
        warmBody = body
        if take > 0 { idle?.schedule(after: AdminConnection.idleTimeout) }
        return take > 0
    }

    private func finishWarmBody(_ body: (bytes: [UInt8], length: Int, target: AdminTarget)) {
        warmBody = nil
        let response = context.warming.start(body: body.bytes, concurrency: body.target.value("concurrency"),
                                             proxyAuthorization: request.headers.value(of: "proxy-authorization"))
        worker.logger.info("admin \(peer) POST /warm \(response.status)")
        send(response, close: !request.keepAlive || worker.draining, headOnly: false)
    }

    /// With the `admin_hosts` in force now (a reload may change them).
    private var requestGuard: AdminRequestGuard {
        AdminRequestGuard(local: local, scheme: scheme, names: context.hostNames.withLock { $0 })
    }

    private func guardFacts(path: String) -> AdminRequestGuard.Request {
        AdminRequestGuard.Request(method: request.method, path: path, host: request.headers.value(of: "host"),
                                  origin: request.headers.value(of: "origin"),
                                  contentType: request.headers.value(of: "content-type"),
                                  fetchSite: request.headers.value(of: "sec-fetch-site"))
    }

    private func send(_ r: AdminResponse, close: Bool, headOnly: Bool) {
        let close = close || draining || context.stopping.load(ordering: .relaxed)
        answered += 1
        let body = Array(r.body.utf8)
        var head = "HTTP/1.1 \(r.status) \(reasonPhrase(for: r.status))\r\nContent-Type: \(r.contentType)\r\n"
        head += "Content-Length: \(body.count)\r\nCache-Control: no-store\r\n"
        for (n, v) in r.extraFields { head += "\(n): \(v)\r\n" }
        if close { head += "Connection: close\r\n" }
        head += "\r\n"
        stream.output.append(Array(head.utf8))
        if !headOnly { stream.output.append(body) }
        if close {
            closing = true
            stream.disableReading()
            stream.setWriteLowWatermark(0)
            if stream.output.count == 0 { self.close() }
        }
    }

    func streamDrained(_ stream: Stream) {
        if closing, stream.output.count == 0 { close() }
    }

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected: return
        case .endOfStream, .error, .timeout: close()
        }
    }

    /// Shutdown: connections idle between requests go now. One that has not had a request
    /// answered yet, or has one waiting, keeps it (closing after the answer): a prober asking
    /// `/readyz` just as shutdown begins gets its 503, not a reset.
    func drain() {
        draining = true
        guard answered > 0, stream.input.count == 0 else { return }
        if stream.output.count == 0 { close() } else { closing = true }
    }

    func close() {
        guard !closed else { return }
        closed = true
        idle?.cancel()
        idle = nil
        stream.close()
        worker.adminConnectionClosed(self)
    }
}

/// An admin connection for a callback from another thread, which must not keep it alive; read
/// only on the connection's loop.
private final class AdminConnectionRef: @unchecked Sendable {
    weak var connection: AdminConnection?
    init(_ connection: AdminConnection) { self.connection = connection }
}
