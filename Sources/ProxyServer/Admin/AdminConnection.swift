import EventLoop
import HTTPWire
import Logging

/// One connection to the admin endpoint: small requests, answered at once, keep-alive. Bodies
/// are not needed by any route; a request with one is answered and the connection closed.
final class AdminConnection: StreamDelegate {
    unowned let worker: Worker
    let stream: Stream
    let peer: SocketAddress
    let context: AdminContext
    private var request = RequestHead()
    private var closing = false
    private var closed = false
    private var idle: Timer?

    static let idleTimeout = 30.0

    init(worker: Worker, stream: Stream, peer: SocketAddress, context: AdminContext) {
        self.worker = worker
        self.stream = stream
        self.peer = peer
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
        while !closing, input.count > 0 {
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
        let target = request.headers.withBytes(request.target) { String(decoding: $0, as: UTF8.self) }
        let authorization = request.headers.value(of: "authorization")
        let response = context.respond(method: request.method, target: AdminTarget(target),
                                       authorization: authorization, reader: worker.cacheReader)
        let hasBody = request.framing != .none
        worker.logger.info("admin \(peer) \(request.headers.withBytes(request.methodRange) { String(decoding: $0, as: UTF8.self) }) \(target) \(response.status)")
        send(response, close: hasBody || !request.keepAlive || worker.draining, headOnly: request.method == .head)
    }

    private func send(_ r: AdminResponse, close: Bool, headOnly: Bool) {
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

    /// Shutdown: idle connections go now.
    func drain() {
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
