import EventLoop
import HTTPWire
import Logging
import SessionClient
import Statistics

/// One client connection: the shell around `ConnectionMachine`. It turns stream callbacks into
/// events, carries out the actions the machine answers with, reads request heads and moves request
/// bodies. How an answer is written is its responder's (`Responder.swift`); what answers a request
/// lives elsewhere: `RequestRouter` (where it goes), `AccessCheck` (whether it may), `CacheFlow`
/// (the cache's part), `OriginRelay`, `StoredBodySender` and `CollapseFollower` (the three ways an
/// answer arrives), `ConnectHandler` (CONNECT and interception).
final class ClientConnection: StreamDelegate {
    /// The worker owns its connections and closes them all before it goes, so the reference needs
    /// no checking (a checked `unowned` costs an atomic pair on every use, many per request).
    unowned(unsafe) let worker: Worker
    /// Replaced once at most: by the TLS stream on the same socket when a CONNECT is intercepted.
    private(set) var stream: Stream
    let peer: SocketAddress
    private(set) var machine: ConnectionMachine<LiveConnection>
    var writer = MessageWriter(capacity: 2_048)
    var chunkWriter = MessageWriter(capacity: 16)
    private var deadline: Deadline?
    private var inRequestLoop = false
    /// The client's TLS handshake has not completed yet (TLS listener or interception).
    private var tlsHandshakePending: Bool
    /// The intercepted CONNECT this connection continues, if any (`logInterceptedTunnel` logs it).
    var intercepted: InterceptedConnect?
    /// An intercepted CONNECT's destination: origin-form requests on this connection go there.
    var interceptedOrigin: OriginKey? { intercepted?.origin }
    /// Accepted on a TLS listener: a mirror names itself `https://` to this client.
    let overTLS: Bool
    /// Outside `allow_clients`: every request is refused.
    private let clientDenied: Bool
    /// Why the worker refuses this connection outright, if it does: told, then closed.
    let refusal: ConnectionRefusal?
    /// The address's share of the per-client budgets: this connection is counted in it until it
    /// closes. Nil for a connection refused outright.
    let share: ClientShare?
    /// The current request counts in its address's requests at origins (`OriginRelay.forward`),
    /// and on an HTTP/2 stream in the worker's connections (`claimOriginSocket`).
    private(set) var holdsOriginFetch = false
    /// The HTTP/2 connection whose stream this exchange answers (nil: a connection of its own, or
    /// a carrier that has closed). Not retained, and not weak either (that put every retain of the
    /// carrier on the slow path of a side table): `stream`, an in-memory stream, holds the carrier
    /// as its peer, so it is there as long as this connection is.
    private(set) unowned(unsafe) var carrier: H2Connection?
    /// One stream of an HTTP/2 connection: its socket, its budgets' share and its end are the carrier's.
    let isStream: Bool
    /// No request read yet: the first bytes may be HTTP/2's connection preface.
    private var awaitingFirstRequest = true
    /// Queued answer bytes beyond which the producer waits (`http2.stream_output` for a stream).
    /// How collapsed fetches on other threads reach this connection: through a box it owns, so
    /// that the handle's weak reference is to the box. A weak reference to the connection itself
    /// would give it a side table, and every later retain and release of it the slow path.
    lazy var participantHandle = ParticipantHandle(loop: worker.loop, target: participantBox)
    private lazy var participantBox = ConnectionParticipant(self)
    /// The client's address in network order (4 or 16 bytes), for access rules and limits.
    let peerAddress: [UInt8]
    /// The client's address as the access log writes it; formatted only if a line is written.
    lazy var clientAddress: [UInt8] = Array(peer.host.utf8)

    let outputHighWater: Int
    /// Queued response bytes beyond which the origin is paused, on a connection of its own.
    static let defaultOutputHighWater = 1 << 20
    /// Queued request-body bytes beyond which the client is paused.
    static let uploadHighWater = 512 * 1024

    init(worker: Worker, stream: Stream, peer: SocketAddress, tls: Bool, refusal: ConnectionRefusal?,
         share: ClientShare?) {
        self.worker = worker
        self.stream = stream
        self.peer = peer
        self.refusal = refusal
        self.share = share
        tlsHandshakePending = tls
        overTLS = tls
        peerAddress = peer.addressBytes
        let address = peerAddress
        clientDenied = !worker.settings.allowClients.contains { $0.contains(address) }
        isStream = false
        outputHighWater = ClientConnection.defaultOutputHighWater
        machine = ConnectionMachine(timing: .init(head: worker.settings.clientHeaderTimeout,
                                                  idle: worker.settings.clientIdleTimeout,
                                                  lowWater: ClientConnection.defaultOutputHighWater / 4))
    }

    /// One stream of an HTTP/2 connection: one request, read from `stream` (in memory), answered
    /// into it, as on a connection of its own.
    init(worker: Worker, stream: Stream, peer: SocketAddress, overTLS: Bool, carrier: H2Connection) {
        self.worker = worker
        self.stream = stream
        self.peer = peer
        refusal = nil
        share = carrier.share
        tlsHandshakePending = false
        self.overTLS = overTLS
        peerAddress = carrier.peerAddress
        let address = peerAddress
        clientDenied = !worker.settings.allowClients.contains { $0.contains(address) }
        self.carrier = carrier
        isStream = true
        awaitingFirstRequest = false
        outputHighWater = worker.settings.h2StreamOutput
        machine = ConnectionMachine(timing: .init(head: worker.settings.clientHeaderTimeout,
                                                  idle: worker.settings.clientIdleTimeout,
                                                  lowWater: outputHighWater / 4))
    }

    func start() {
        attach(stream)
        deadline = Deadline(loop: worker.loop) { [unowned self] in self.send(.deadline) }
        if let refusal { stream.output.append(refusal.response(worker.settings.localAnswers)) }
        send(.opened(refused: refusal != nil))
    }

    var context: RequestContext {
        _read { yield machine.context }
        _modify { yield &machine.context }
    }

    var request: RequestHead {
        _read { yield machine.context.request }
    }

    // MARK: - Events and actions

    func send(_ event: ConnectionEvent<LiveConnection>) {
        // A closed stream's buffers are gone (a tunnel closes it before it reports back).
        let levels = stream.isClosed ? Levels(input: 0, output: 0)
            : Levels(input: stream.input.count, output: stream.output.count)
        perform(machine.handle(event, levels))
    }

    /// Carries out an event's steps in their one order (see `ConnectionActions.Steps`).
    private func perform(_ a: ConnectionActions) {
        let steps = a.steps
        if steps.isEmpty { return }
        // The step names the kind of what was released.
        if let released = a.released {
            if steps.contains(.releaseOrigin) { unsafeDowncast(released, to: OriginRelay.self).release() }
            if steps.contains(.releaseStoredBody) { unsafeDowncast(released, to: StoredBodySender.self).release() }
            if steps.contains(.releaseFollower) { unsafeDowncast(released, to: CollapseFollower.self).leave() }
            if steps.contains(.cancelOpener) { unsafeDowncast(released, to: TunnelOpener.self).cancel() }
        }
        if steps.contains(.reset) { stream.reset() }
        if steps.contains(.endRequest) { endRequest() }
        if steps.contains(.cancelDeadline) { deadline?.cancel() }
        if steps.contains(.armDeadline) { deadline?.schedule(after: a.seconds) }
        if steps.contains(.linger) {
            stream.input.drain(stream.input.count)
            stream.shutdownWriteWhenFlushed()
            stream.enableReading()
            deadline?.schedule(after: a.seconds)
        }
        if steps.contains(.flushThenClose) {
            stream.disableReading()
            stream.setWriteLowWatermark(0)
        }
        if steps.contains(.closeTunnel), case .tunnelling(let tunnel) = machine.state { tunnel.close() }
        if steps.contains(.closeStream) {
            deadline = nil
            stream.close()
        }
        if steps.contains(.closed) {
            logInterceptedTunnel()
            worker.connectionClosed(self)
        }
        if steps.contains(.disableReading) { stream.disableReading() }
        if steps.contains(.enableReading) { stream.enableReading() }
        if steps.contains(.discardInput) { stream.input.drain(stream.input.count) }
        if steps.contains(.startTLS) { ConnectHandler.continueInTLS(self) }
        if steps.contains(.answerTimeout) { refuse(408, "request head not received in time") }
        if !steps.isDisjoint(with: [.pumpRequestBody, .clientCaughtUp, .sendStoredBody, .pollFollower]),
           case .exchanging(let exchange) = machine.state {
            switch exchange {
            case .origin(let relay):
                if steps.contains(.pumpRequestBody) { relay.pumpRequestBody() }
                if steps.contains(.clientCaughtUp) { relay.clientCaughtUp() }
            case .storedBody(let sender): sender.send()
            case .following(let follower): follower.progress()
            }
        }
        if steps.contains(.readRequests) { readRequests() }
        if steps.contains(.route) { route() }
    }

    // MARK: - Stream events

    func streamReadable(_ stream: Stream) { send(.clientReadable) }

    func streamDrained(_ stream: Stream) { send(.clientDrained) }

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected:
            if tlsHandshakePending {
                tlsHandshakePending = false
                worker.stats.add(.clientTLSHandshakes)
                if worker.settings.http2 != nil, refusal == nil, stream.negotiatedH2 {
                    handOverToHTTP2()
                }
            }
        case .endOfStream:
            if tlsHandshakePending {
                handshakeFailed(in: stream, timedOut: false)
            } else if case .exchanging = machine.state, context.bodyPending {
                worker.logger.debug("client \(peer) closed during upload to \(context.upstreamName)")
            }
            send(.clientEnded)
        case .error, .timeout:
            if tlsHandshakePending {
                handshakeFailed(in: stream, timedOut: event == .timeout)
            } else if event == .timeout {
                worker.logger.notice(
                    "client \(peer) took less than \(Stream.minimumProgress / 1024) KiB of its answer in \(worker.settings.clientIdleTimeout) s; closing with \(stream.output.count) bytes unsent")
            }
            send(.clientFailed)
        }
    }

    /// The client's TLS handshake ended unfinished: logged, with the destination under
    /// interception, and counted, unless the client never started it.
    private func handshakeFailed(in stream: Stream, timedOut: Bool) {
        tlsHandshakePending = false
        let cause = ClientHandshakeFailure.cause(timedOut: timedOut, reason: stream.tlsFailureReason,
                                                 clientSentBytes: (stream.tlsBytesCarried?.fromPeer ?? 0) > 0)
        let failure = ClientHandshakeFailure(peer: peer.description, destination: interceptedOrigin?.description,
                                             caFile: worker.interception?.authorityFile, cause: cause)
        guard let line = failure.message else { return }
        worker.logger.notice("\(line)")
        worker.stats.add(.clientTLSHandshakeFailures)
    }

    // MARK: - Requests

    /// Pipelined requests wait in the input buffer until the previous answer is queued, which
    /// keeps answers in request order.
    private func readRequests() {
        if inRequestLoop { return }
        inRequestLoop = true
        defer { inRequestLoop = false }
        let input = stream.input
        while machine.isReadingHead, input.count > 0 {
            if awaitingFirstRequest {
                switch H2Preface.check(input) {
                case .h2 where worker.settings.http2 != nil && refusal == nil:
                    return handOverToHTTP2()
                case .incomplete:
                    perform(machine.headIncomplete())
                    return
                case .h2, .other:
                    awaitingFirstRequest = false
                }
            }
            if stream.output.count >= outputHighWater {
                // Pipelined requests must not pile up answers in memory (`clientDrained` resumes).
                perform(machine.pauseForOutput())
                return
            }
            let limits = worker.settings.headLimits
            let parsed: Int?
            do {
                parsed = try input.withContiguousPrefix(maxBytes: limits.maxHeadBytes) { bytes throws(HTTPWireError) in
                    try RequestParser.parse(bytes, into: &machine.context.request, limits: limits)
                }
            } catch {
                refuse(error.requestStatus, error.reason)
                return
            }
            guard let length = parsed else {
                if input.count >= limits.maxHeadBytes {
                    refuse(431, HTTPWireError.headTooLarge.reason)
                } else {
                    perform(machine.headIncomplete())
                }
                return
            }
            input.drain(length)
            headParsed()
        }
    }

    /// The request head just parsed into the context starts its request. (Inlined: a call of its
    /// own cost an HTTP/1.1 hit about 60 instructions.)
    @inline(__always)
    private func headParsed() {
        worker.stats.add(Count.request(request.method))
        machine.context.request.removeFieldsNominatedByConnection()
        let body: RequestBody
        switch request.framing {
        case .contentLength(let n) where n > 0: body = .contentLength(remaining: n)
        case .chunked: body = .chunked
        default: body = .done
        }
        send(.headParsed(RequestStart(keepAlive: request.keepAlive && !worker.draining, body: body,
                                      at: worker.clock.monotonic)))
    }

    /// An HTTP/2 stream's request, whole and owing no body, handed to this exchange while it waits
    /// between requests (`isBetweenRequests`): read from `head` and started now, as if it had come
    /// through the stream (held to the same limits and checks, refused the same way), without its
    /// bytes going into the stream's input and being read back out of it. Its translation says
    /// where its parts lie (`RequestParser.adopt`), so it is not scanned again.
    func takeRequest(_ head: UnsafeRawBufferPointer, methodEnd: Int, targetEnd: Int,
                     fields: UnsafeBufferPointer<HeaderField>) {
        guard isBetweenRequests else { return assertionFailure("a request handed to a busy exchange") }
        do {
            try RequestParser.adopt(head, methodEnd: methodEnd, targetEnd: targetEnd, fields: fields,
                                    into: &machine.context.request, limits: worker.settings.headLimits)
        } catch {
            return refuse(error.requestStatus, error.reason)
        }
        headParsed()
    }

    /// Where the request goes; run again after a background check the request waited for. Each
    /// step either lets the request go on to the next or has taken it over (`RouteStep`).
    private func route() {
        if clientDenied {
            worker.stats.add(.deniedClient)
            return refuse(403, "client \(peer.host) is not allowed to use this proxy (allow_clients)")
        }
        if case .contentLength(let n) = request.framing, n > worker.settings.maxRequestBody {
            return refuse(413, "request body of \(n) bytes is over the limit of \(worker.settings.maxRequestBody)")
        }
        guard routeToMirror() == .goOn else { return }
        // One copy of the head for everything that reads it while the request is routed.
        let request = machine.context.request
        let isPurge = request.method == .other && Purge.isPurge(request)
        let router = worker.settings.router
        switch router.route(request, interceptedOrigin: interceptedOrigin, isPurge: isPurge,
                            memo: worker.routeMemo) {
        case .reject(let status, let reason): refuse(status, reason)
        case .respond(let status, let reason, let extraField): answerError(status, reason, extraField: extraField)
        case .unservedHost(let reason):
            worker.stats.add(.deniedDestination)
            answerError(400, reason)
        case .answerLocally: answerLocally()
        case .purge(let target): Purge.handle(target, on: self)
        case .connect(let target): ConnectHandler.handle(target, on: self)
        case .forward(let destination, let path):
            guard OfflineGuard.check(request, on: self) == .goOn else { return }
            if destination.checkAccess,
               AccessCheck.check(host: destination.accessHost, port: destination.origin.port, on: self) == .taken { return }
            if !context.commitWaited { worker.hosts.count(destination.keyedAs) }  // once, if routed again
            guard CacheFlow.lookUp(destination, path: path, request: request, on: self) == .goOn,
                  OfflineGuard.checkUncached(on: self) == .goOn else { return }
            OriginRelay.forward(self, to: destination, path: path)
        }
    }

    /// A background check (credentials, a parent proxy's destination) finished.
    func checkFinished(_ verdict: ProxyAuthenticator.Verdict?) {
        guard case .routing = machine.state else { return }
        if let verdict { context.authVerdict = verdict }
        send(.checkFinished)
    }

    // MARK: - The request body

    /// What became of a call to `moveRequestBody`.
    enum RequestBodyMove {
        /// Nothing more moves now: the rest waits for the client or for room (the client is read
        /// again when there is), or the body went already.
        case waiting
        /// The body's last byte just went; nothing more is read until the answer is out.
        case finished
        /// The body cannot be forwarded (bad chunked framing, over the limit): the exchange ends
        /// with `status`; `reason` is the answer's text, `logged` the log line's.
        case refused(status: Int, reason: String, logged: String)
    }

    /// Moves as much of the request's body as has arrived and fits into `out` (up to
    /// `uploadHighWater` queued), in its own framing: a length-delimited body as it came, a chunked
    /// one decoded and chunked anew, so no byte of the client's framing reaches the origin
    /// unchecked. Reading the client pauses while `out` is full, and stops once the body is in.
    func moveRequestBody(into out: Buffer) -> RequestBodyMove {
        let input = stream.input
        while true {
            if out.count >= ClientConnection.uploadHighWater {
                stream.disableReading()
                return .waiting
            }
            switch context.body {
            case .done:
                return .waiting
            case .contentLength(let remaining):
                let n = min(input.count, remaining)
                if n == 0 {
                    stream.enableReading()
                    return .waiting
                }
                out.move(n, from: input)
                context.body = .contentLength(remaining: remaining - n)
                if n == remaining { return bodyMoved() }
            case .chunked:
                if input.count == 0 {
                    stream.enableReading()
                    return .waiting
                }
                let step: ChunkedDecoder.Step
                do {
                    step = try ChunkedFrontView.step(&context.bodyDecoder, input)
                } catch {
                    return .refused(status: 400, reason: error.reason, logged: "request body: \(error.reason)")
                }
                switch step {
                case .needMore:
                    stream.enableReading()
                    return .waiting
                case .framing(let n):
                    input.drain(n)
                case .data(let n):
                    context.chunkedBodyBytes += n
                    let limit = worker.settings.maxRequestBody
                    if context.chunkedBodyBytes > limit {
                        let reason = "chunked request body over the limit of \(limit) bytes"
                        return .refused(status: 413, reason: reason, logged: reason)
                    }
                    chunkWriter.reset()
                    chunkWriter.appendChunkHeader(size: n)
                    chunkWriter.withBytes { out.append($0) }
                    out.move(n, from: input)
                    out.append(ChunkedFraming.chunkEnd)
                case .done(let n):
                    input.drain(n)
                    out.append(ChunkedFraming.lastChunk)
                    return bodyMoved()
                }
            }
        }
    }

    private func bodyMoved() -> RequestBodyMove {
        context.body = .done
        stream.disableReading()
        return .finished
    }

    // MARK: - Answers

    /// See `ConnectionMachine.answerKeepsAlive`: asked before an answer's head is written
    /// (`Responder.swift`).
    func answerKeepsAlive(closeDelimited: Bool) -> Bool {
        machine.answerKeepsAlive(closeDelimited: closeDelimited)
    }

    // MARK: - Connection life cycle

    /// Makes `new` this connection's stream (at start, and once more when a CONNECT is intercepted):
    /// its callbacks come here and its buffers are bounded.
    func attach(_ new: Stream, tlsPending: Bool = false) {
        // An HTTP/2 stream's exchange keeps its stream for good: that stream is what keeps `carrier`.
        precondition(!isStream || new === stream, "an HTTP/2 stream's exchange given another stream")
        stream = new
        tlsHandshakePending = tlsHandshakePending || tlsPending
        stream.delegate = self
        stream.setWriteLowWatermark(outputHighWater / 4)
        stream.setReadHighWatermark(max(2 * worker.settings.headLimits.maxHeadBytes, ClientConnection.uploadHighWater))
        // A send timeout: a client that takes less than `Stream.minimumProgress` of its answer in the
        // idle time is dropped.
        stream.setTimeouts(read: nil, write: worker.settings.clientIdleTimeout)
    }

    /// Claims, once per request, what a request that opens a socket to an origin (or a tunnel's
    /// destination) holds until it ends: one of its address's requests at origins
    /// (`limits.origin_fetches_per_client`) and, on an HTTP/2 stream, a connection's place in the
    /// worker's budget (`Worker.claimStreamSocket`). False when refused, the refusal answered.
    func claimOriginSocket() -> Bool {
        if holdsOriginFetch { return true }
        guard let share, share.claimOriginFetch(limit: worker.settings.originFetchesPerClient) else {
            worker.noteOriginFetchRefused(client: peer)
            answerError(429, "too many of this client's requests are at origins already", extraField: "Retry-After: 1")
            return false
        }
        if isStream, !worker.claimStreamSocket(client: peer) {
            share.releaseOriginFetch()
            answerError(503, "this proxy has as many connections as it may serve; retry shortly",
                        extraField: "Retry-After: 1")
            return false
        }
        holdsOriginFetch = true
        return true
    }

    /// Writes the request's access-log line (once) and lets go of the cache's part: normally ended
    /// when the fetch completed, anything else must not leave collapsed followers waiting.
    private func endRequest() {
        logRequest()
        if holdsOriginFetch {
            holdsOriginFetch = false
            share?.releaseOriginFetch()
            if isStream { worker.releaseStreamSocket() }
        }
        if let exchange = context.cache {
            context.cache = nil
            exchange.endCollapse(failed: true, table: worker.inFlight)
        }
    }

    /// Server shutdown: idle connections close now, busy ones after their answer.
    func drain() { send(.shutdown) }

    /// Waiting for its next request with nothing of one read: an HTTP/2 stream's exchange may be
    /// handed another stream's request.
    var isBetweenRequests: Bool {
        machine.isReadingHead && !stream.isClosed && stream.input.count == 0
    }

    /// The HTTP/2 connection this stream belongs to has ended: as a reset socket would, at once
    /// (its request's ends, the access-log line, the budgets it held, all now).
    func carrierClosed() {
        carrier = nil
        send(.clientFailed)
    }

    /// The client speaks HTTP/2 (ALPN `h2`, or the connection preface): an `H2Connection` takes
    /// the socket, and this object, having read no request, goes.
    private func handOverToHTTP2() {
        deadline?.cancel()
        deadline = nil
        stream.delegate = nil
        worker.handOverToHTTP2(self)
    }

    /// Shutdown grace over.
    func forceClose() {
        let queued = stream.output.count
        if case .tunnelling = machine.state {
        } else if queued > 0 || (context.answer.started && machine.isBusy) {
            worker.logger.warning("shutdown grace over: cutting the answer to \(peer) with \(queued) bytes still queued")
        } else if machine.isBusy {
            worker.logger.warning("shutdown grace over: abandoning \(peer)'s request to \(context.upstreamName), not answered yet")
        }
        send(.close)
    }
}
