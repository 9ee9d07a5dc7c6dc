import EventLoop
import HTTPWire
import Logging
import SessionClient
import Statistics

/// One client connection: reads requests in order, answers each (forwarding it, tunnelling it, or
/// locally), then reads the next. Pipelined requests simply wait in the input buffer until the
/// previous response has been queued, which keeps responses in request order.
final class ClientConnection: StreamDelegate, SessionTaskDelegate {
    enum State {
        /// Waiting for (the rest of) a request head.
        case readingHead
        /// A request is being exchanged with an origin.
        case exchanging
        /// CONNECT: waiting for the upstream connection.
        case connecting
        /// An intercepted CONNECT: its answer is being sent; then TLS starts on the socket.
        case intercepting
        /// Waiting for a background check of the request's proxy credentials (or, through a
        /// parent proxy, of its destination's addresses).
        case authenticating
        /// Bytes pumped both ways; the tunnel owns the streams now.
        case tunnel
        /// The last response is being flushed; then the connection closes.
        case closing
        case closed
    }

    /// What is left of the current request's body.
    enum RequestBody {
        case done
        case contentLength(remaining: Int)
        case chunked
    }

    /// The worker owns its connections and closes them all before it goes, so the reference needs
    /// no checking (a checked `unowned` costs an atomic pair on every use, many per request).
    unowned(unsafe) let worker: Worker
    /// Replaced once at most: by the TLS stream on the same socket when a CONNECT is intercepted.
    private(set) var stream: Stream
    let peer: SocketAddress
    var state = State.readingHead
    var request = RequestHead()
    var writer = MessageWriter(capacity: 2_048)
    var chunkWriter = MessageWriter(capacity: 16)
    var deadline: Timer?
    var deadlineIsForHead = false
    var inRequestLoop = false
    /// Reading of further requests is paused until the client has read the answers queued.
    var requestsPausedForOutput = false
    /// The idle or head timer starts when the queued answers are all written.
    var timerAfterFlush = false

    // The current exchange.
    var task: SessionTask?
    var requestBody = RequestBody.done
    /// The current request's body has gone (or is going) to an origin: it cannot be sent again.
    var bodyForwarded = false
    var bodyDecoder = ChunkedDecoder()
    var clientFraming = ClientFraming.none
    var responseHeadSent = false
    var keepAlive = true
    var continueSent = false
    var upgrading = false
    var responsePaused = false
    /// Where the current request went, for messages; formatted only when one is written.
    var upstream: OriginKey?
    var upstreamName: String { upstream?.description ?? "" }
    /// An intercepted CONNECT's destination: origin-form requests on this connection go there.
    var interceptedOrigin: OriginKey?
    /// The client's TLS handshake has not completed yet (TLS listener or interception).
    var tlsHandshakePending = false
    var connectOpener: TunnelOpener?
    var tunnel: Tunnel?
    /// The cache's part in the current request, if any.
    var cacheExchange: CacheExchange?
    /// A disk-stored body being sent.
    var cachedBody: CachedBodyCursor?
    /// The collapsed fetch this request is answered from, if any.
    var following: CollapseFollower?
    /// The origin read is paused because a collapsed follower lags.
    var collapsePaused = false
    /// While paused for followers: detaches those that stopped reading; made on first need.
    var stallWatch: Timer?
    /// Pauses the origin read while the cache's disk writer is behind; made on first need.
    var storePacer: WriterPacer?
    /// Outside `allow_clients`: every request is refused.
    var clientDenied = false
    /// Set when the connection is refused outright (too many connections): told why, then closed.
    var refusal: ConnectionRefusal?
    /// Counted for `max_connections_per_client`, released at close.
    var addressCounted = false
    /// Closing: our side is shut, the client's remaining bytes are read and dropped until it
    /// closes too or the linger time passes, so it reads our answer instead of a reset.
    var lingering = false
    /// Decoded bytes of the current chunked request body, for `limits.max_request_body`.
    var chunkedBodyBytes = 0
    /// A background credential check's answer, for the request that waited for it.
    var authVerdict: ProxyAuthenticator.Verdict?
    /// How collapsed fetches on other threads reach this connection.
    lazy var participantHandle = ParticipantHandle(loop: worker.loop, target: self)

    // For the access log and the statistics: what happened to the current request.
    var requestStart = 0.0
    var logStatus = 0
    var logBytes = 0
    var logCache: StaticString = "-"
    var logged = true
    lazy var clientAddress: [UInt8] = Array(peer.host.utf8)
    /// The client's address in network order (4 or 16 bytes), for access rules and limits.
    lazy var peerAddress: [UInt8] = peer.addressBytes

    /// Queued response bytes beyond which the origin is paused.
    static let outputHighWater = 1 << 20
    /// Queued request-body bytes beyond which the client is paused.
    static let uploadHighWater = 512 * 1024

    init(worker: Worker, stream: Stream, peer: SocketAddress) {
        self.worker = worker
        self.stream = stream
        self.peer = peer
    }

    func start() {
        let address = peerAddress
        clientDenied = !worker.settings.allowClients.contains { $0.contains(address) }
        attach(stream)
        deadline = Timer(loop: worker.loop) { [unowned self] in self.deadlineReached() }
        if let refusal {
            stream.output.append(refusal.response)
            closeWhenFlushed(lingerFor: 1)
            return
        }
        armDeadline(forHead: true)
        stream.enableReading()
    }

    // MARK: - Stream events

    func streamReadable(_ stream: Stream) {
        switch state {
        case .readingHead: processRequests()
        case .exchanging: if case .done = requestBody { stream.disableReading() } else { pumpRequestBody() }
        case .closing where lingering: stream.input.drain(stream.input.count)
        case .connecting, .intercepting, .authenticating, .closing: stream.disableReading()
        case .tunnel, .closed: break
        }
    }

    func streamDrained(_ stream: Stream) {
        if state == .intercepting {
            if stream.output.count == 0 { continueInTLS() }
            return
        }
        if state == .closing {
            if stream.output.count == 0, !lingering { close() }
            return
        }
        if timerAfterFlush, stream.output.count == 0, state == .readingHead {
            timerAfterFlush = false
            armDeadline(forHead: stream.input.count > 0)
        }
        if cachedBody != nil {
            pumpCachedBody()
            return
        }
        if requestsPausedForOutput, state == .readingHead {
            requestsPausedForOutput = false
            stream.enableReading()
            processRequests()
            return
        }
        if following != nil {
            followerProgress()
            return
        }
        if responsePaused, stream.output.count <= ClientConnection.outputHighWater / 4 {
            responsePaused = false
            resumeOriginIfClear()
        }
    }

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected:
            if tlsHandshakePending {
                tlsHandshakePending = false
                worker.stats.add(.clientTLSHandshakes)
            }
            return
        case .endOfStream:
            switch state {
            case .exchanging:
                if case .done = requestBody {
                    // The client finished sending; let the response go out, then close.
                    keepAlive = false
                } else {
                    worker.logger.debug("client \(peer) closed during upload to \(upstreamName)")
                    close()
                }
            case .readingHead where stream.output.count > 0:
                // A client may half-close right after its request (RFC 9112 §9.6): the answer
                // already queued still goes out.
                closeWhenFlushed()
            default:
                close()
            }
        case .error, .timeout:
            if tlsHandshakePending {
                let why = stream.tlsFailureReason ?? (event == .timeout ? "timed out" : "connection closed")
                worker.logger.notice("TLS handshake with client \(peer) failed: \(why)")
                worker.stats.add(.clientTLSHandshakeFailures)
            } else if event == .timeout {
                let unsent = stream.output.count
                worker.logger.notice(
                    "client \(peer) read nothing of its answer for \(worker.settings.clientIdleTimeout) s; closing with \(unsent) bytes unsent")
            }
            close()
        }
    }

    // MARK: - Requests

    func processRequests() {
        if inRequestLoop { return }
        inRequestLoop = true
        defer { inRequestLoop = false }
        let input = stream.input
        while state == .readingHead, input.count > 0 {
            if stream.output.count >= ClientConnection.outputHighWater {
                // The client is not reading its answers: read no more of its requests until it does,
                // so pipelined requests cannot pile up responses in memory (`streamDrained` resumes).
                stream.disableReading()
                requestsPausedForOutput = true
                return
            }
            let limits = worker.settings.headLimits
            let parsed: Int?
            do {
                parsed = try input.withContiguousPrefix(maxBytes: limits.maxHeadBytes) { bytes throws(HTTPWireError) in
                    try RequestParser.parse(bytes, into: &request, limits: limits)
                }
            } catch {
                reject(error.requestStatus, error.reason)
                return
            }
            guard let length = parsed else {
                if input.count >= limits.maxHeadBytes {
                    reject(431, HTTPWireError.headTooLarge.reason)
                } else if !deadlineIsForHead {
                    armDeadline(forHead: true)
                }
                return
            }
            input.drain(length)
            deadline?.cancel()
            handleRequest()
        }
    }

    func handleRequest() {
        beginLogging()
        request.removeFieldsNominatedByConnection()
        takeRequestBody()
        keepAlive = request.keepAlive && !worker.draining
        responseHeadSent = false
        continueSent = false
        upgrading = false
        authVerdict = nil
        if clientDenied {
            worker.stats.add(.deniedClient)
            reject(403, "client \(peer.host) is not allowed to use this proxy (allow_clients)")
            return
        }
        if case .contentLength(let n) = request.framing, n > worker.settings.maxRequestBody {
            reject(413, "request body of \(n) bytes is over the limit of \(worker.settings.maxRequestBody)")
            return
        }
        routeRequest()
    }

    /// The body the client announced is owed: read exactly once, by the one exchange that forwards
    /// it, or the connection closes after the answer (`finishExchange`). Never re-derived from the
    /// head, so no second exchange can read the next request as a body.
    func takeRequestBody() {
        bodyForwarded = false
        chunkedBodyBytes = 0
        switch request.framing {
        case .contentLength(let n) where n > 0: requestBody = .contentLength(remaining: n)
        case .chunked:
            requestBody = .chunked
            bodyDecoder = ChunkedDecoder()
        default: requestBody = .done
        }
    }

    /// Whether the request has a body still to be read from the client.
    var requestBodyPending: Bool {
        if case .done = requestBody { return false }
        return true
    }

    /// Where the request goes; run again after a credential check the request waited for.
    func routeRequest() {
        if request.method == .connect {
            if worker.settings.reverseOrigin != nil {
                respondAndContinue(405, "CONNECT is not available: this Larder is a reverse proxy for one origin",
                                   extraField: "Allow: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS")
                return
            }
            handleConnect()
            return
        }
        let target: RequestTarget
        switch parseTarget() {
        case .success(let t): target = t
        case .failure(let error):
            reject(error.requestStatus, error.reason)
            return
        }
        let path = target.pathRange(targetLength: request.target.count)
        if request.method == .other, isPurge {
            handlePurge(target)
            return
        }
        if request.method == .trace || request.method == .options,
           let n = OutboundHead.maxForwards(request), n == 0 {
            answerLocally()
            return
        }
        switch target.form {
        case .asterisk:
            answerLocally()
        case .authority:
            reject(400, "authority-form target is only for CONNECT")
        case .origin:
            if let origin = interceptedOrigin {
                let route = OutboundHead.Route(scheme: .https,
                                               authority: authorityBytes(host: Array(origin.host.utf8), port: origin.port,
                                                                         scheme: .https),
                                               absoluteForm: false)
                forward(to: origin, route: route, path: path)
                return
            }
            guard let reverse = worker.settings.reverseOrigin else {
                reject(400, "origin-form request: Larder is a forward proxy; send an absolute URI "
                       + "(http://host/path), or configure reverse_origin")
                return
            }
            forwardReverse(to: reverse, target: target, path: path)
        case .absolute where worker.settings.reverseOrigin != nil:
            // A reverse proxy serves its one origin: an absolute URI names a Host, never a destination.
            forwardReverse(to: worker.settings.reverseOrigin!, target: target, path: path)
        case .absolute:
            if target.scheme == .https, worker.session.usesParentProxy {
                respondAndContinue(501, "https:// requests through a parent proxy are not supported yet")
                return
            }
            guard admitted(toHost: target.host, port: target.port) else { return }
            let origin = OriginKey(scheme: target.scheme, host: target.hostString, port: target.port)
            let route = OutboundHead.Route(scheme: target.scheme,
                                           authority: authorityBytes(host: target.host, port: target.port,
                                                                     scheme: target.scheme),
                                           absoluteForm: worker.session.usesParentProxy)
            forward(to: origin, route: route, path: path)
        }
    }

    func parseTarget() -> Result<RequestTarget, HTTPWireError> {
        let method = request.method
        return request.headers.withBytes(request.target) { bytes in
            do throws(HTTPWireError) {
                return .success(try RequestTarget.parse(bytes, method: method))
            } catch {
                return .failure(error)
            }
        }
    }

    /// `keyedAs` names the origin in the cache key and rules when it is not the one connected to
    /// (reverse mode keys on the Host it forwards).
    func forward(to origin: OriginKey, route: OutboundHead.Route, path: Range<Int>, keyedAs: OriginKey? = nil) {
        let named = keyedAs ?? origin
        worker.hosts.count(named.host)
        if consultCache(origin: origin, keyedAs: named, route: route, path: path) { return }
        startForwarding(to: origin, route: route, path: path)
    }

    /// `path` is the target's path and query (no fragment), offsets into `request.target`.
    func startForwarding(to origin: OriginKey, route: OutboundHead.Route, path pathRange: Range<Int>) {
        let revalidation = outboundRevalidation
        upgrading = request.upgradesToWebSocket && request.version == .http11 && revalidation == nil
        // A revalidation never carries the client's body; a body already sent once is never sent again.
        let hasBody = revalidation == nil && requestBodyPending
        if hasBody, bodyForwarded {
            respondAndContinue(502, "the request's body was already sent to \(origin) and cannot be sent again")
            return
        }
        bodyForwarded = hasBody
        var body = BodyFraming.none
        if hasBody {
            if case .contentLength(let n) = request.framing { body = .contentLength(n) } else { body = .chunked }
        } else if revalidation == nil, request.framing == .contentLength(0) {
            body = .contentLength(0)  // an empty POST or PUT says so (RFC 9110 §8.6), some origins need it
        }
        writer.reset()
        let targetRange = request.target
        request.headers.withBytes(targetRange) { target in
            let path = UnsafeRawBufferPointer(rebasing: target[pathRange])
            OutboundHead.write(request, targetPath: path, route: route, viaName: worker.settings.viaName,
                               additionalHeaders: worker.session.configuration.httpAdditionalHeaders,
                               upgrading: upgrading, revalidation: revalidation, body: body, into: &writer)
        }
        let idempotent: Bool
        switch request.method {
        case .get, .head, .options, .trace, .put, .delete: idempotent = true
        default: idempotent = false
        }
        upstream = origin
        state = .exchanging
        let t = worker.session.dataTask(origin: origin, method: revalidation?.method ?? request.method, head: writer.bytes,
                                        hasBody: hasBody, isIdempotent: idempotent,
                                        expectsContinue: request.expectsContinue, delegate: self)
        task = t
        if hasBody { stream.enableReading() } else { stream.disableReading() }
        t.resume()
    }

    func handleConnect() {
        let target: RequestTarget
        switch parseTarget() {
        case .success(let t): target = t
        case .failure(let error):
            reject(400, error.reason)
            return
        }
        guard worker.settings.connectPorts.contains(target.port) else {
            worker.logger.notice("403 CONNECT from \(peer) to \(target.hostString):\(target.port): port not allowed")
            worker.stats.add(.deniedConnectPort)
            respondAndContinue(403, "CONNECT to port \(target.port) is not allowed")
            return
        }
        guard admitted(toHost: target.host, port: target.port) else { return }
        if let interception = worker.interception, interception.matches(host: target.host) {
            intercept(host: target.hostString, port: target.port)
            return
        }
        state = .connecting
        stream.disableReading()
        upstream = OriginKey(scheme: .http, host: target.hostString, port: target.port)
        connectOpener = worker.session.openTunnel(host: target.hostString, port: target.port) { [unowned self] result in
            self.connectOpener = nil
            switch result {
            case .success(let upstream):
                self.noteResponse(200)
                self.stream.output.append(LocalResponse.connectEstablished)
                self.startTunnel(upstream)
            case .failure(let error):
                self.worker.logger.warning("\(error.status) CONNECT from \(self.peer): \(error.message)")
                self.writer.reset()
                self.noteResponse(error.status)
                self.worker.stats.add(Count.originError(error))
                LocalResponse.error(error.status, error.message, close: true, into: &self.writer)
                self.stream.output.append(self.writer.bytes)
                self.closeWhenFlushed()
            }
        }
    }

    func startTunnel(_ upstream: Stream) {
        logRequest()
        deadline?.cancel()
        state = .tunnel
        let t = Tunnel(stream, upstream) { [unowned self] in
            self.state = .closed
            self.tunnel = nil
            self.worker.connectionClosed(self)
        }
        tunnel = t
        t.start()
    }

    /// TRACE/OPTIONS with `Max-Forwards: 0`, and `OPTIONS *`.
    func answerLocally() {
        if request.framing != .none {
            // A body we would have to skip: simpler and safer to close after answering.
            keepAlive = false
        }
        writer.reset()
        noteResponse(200)
        if request.method == .trace {
            LocalResponse.trace(request, close: !keepAlive, into: &writer)
        } else {
            LocalResponse.options(close: !keepAlive, into: &writer)
        }
        stream.output.append(writer.bytes)
        finishExchange()
    }

    /// A request we refuse: answer with `status` and close (the rest of the stream cannot be trusted).
    func reject(_ status: Int, _ reason: String) {
        worker.logger.notice("\(status) to \(peer): \(reason)")
        if logged { beginLogging() }  // a head that did not parse is still a request to log
        writer.reset()
        noteResponse(status)
        LocalResponse.error(status, reason, close: true, into: &writer)
        stream.output.append(writer.bytes)
        logRequest()
        closeWhenFlushed(lingerFor: 2)
    }

    /// A refusal after a well-formed head: the connection may go on if the request had no body.
    func respondAndContinue(_ status: Int, _ reason: String, extraField: String? = nil) {
        if request.framing != .none { keepAlive = false }
        writer.reset()
        noteResponse(status)
        LocalResponse.error(status, reason, close: !keepAlive, headOnly: request.method == .head,
                            extraField: extraField, into: &writer)
        stream.output.append(writer.bytes)
        finishExchange()
    }

    // MARK: - Request body

    func pumpRequestBody() {
        guard let task, let out = task.bodyOutput else { return }
        let input = stream.input
        while true {
            if out.count >= ClientConnection.uploadHighWater {
                stream.disableReading()
                return
            }
            switch requestBody {
            case .done:
                return
            case .contentLength(let remaining):
                let n = min(input.count, remaining)
                if n == 0 {
                    stream.enableReading()
                    return
                }
                out.move(n, from: input)
                if n == remaining { bodyFinished(task) } else { requestBody = .contentLength(remaining: remaining - n) }
            case .chunked:
                if input.count == 0 {
                    stream.enableReading()
                    return
                }
                let step: ChunkedDecoder.Step
                do {
                    step = try ChunkedFrontView.step(&bodyDecoder, input)
                } catch {
                    worker.logger.notice("400 to \(peer): request body: \(error.reason)")
                    task.cancel()
                    self.task = nil
                    if responseHeadSent {
                        abort()
                    } else {
                        reject(400, error.reason)
                    }
                    return
                }
                switch step {
                case .needMore:
                    stream.enableReading()
                    return
                case .framing(let n):
                    input.drain(n)
                case .data(let n):
                    chunkedBodyBytes += n
                    if chunkedBodyBytes > worker.settings.maxRequestBody {
                        let reason = "chunked request body over the limit of \(worker.settings.maxRequestBody) bytes"
                        task.cancel()
                        self.task = nil
                        if responseHeadSent {
                            worker.logger.notice("413 to \(peer): \(reason)")
                            abort()
                        } else {
                            reject(413, reason)
                        }
                        return
                    }
                    chunkWriter.reset()
                    chunkWriter.appendChunkHeader(size: n)
                    out.append(chunkWriter.bytes)
                    out.move(n, from: input)
                    out.append(ChunkedFraming.chunkEnd)
                case .done(let n):
                    input.drain(n)
                    out.append(ChunkedFraming.lastChunk)
                    bodyFinished(task)
                }
            }
        }
    }

    func bodyFinished(_ task: SessionTask) {
        requestBody = .done
        task.finishBody()
        stream.disableReading()
    }

    // MARK: - SessionTaskDelegate

    func taskCanSendBody(_ task: SessionTask) { pumpRequestBody() }

    func taskBodyDrained(_ task: SessionTask) { pumpRequestBody() }

    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {
        guard request.version == .http11 else { return }
        if head.status == 100 {
            // Relay one 100 Continue, and only to a client that asked for it.
            guard request.expectsContinue, !continueSent else { return }
            continueSent = true
            stream.output.append(LocalResponse.continueHead)
            return
        }
        writer.reset()
        ResponseHeadWriter.write(head, framing: .none, keepAlive: true, clientVersion: request.version,
                                 viaName: worker.settings.viaName, upgrade: false, into: &writer)
        stream.output.append(writer.bytes)
    }

    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) {
        if head.status == 101 {
            guard upgrading, let upgraded = task.takeUpgradedStream() else {
                task.cancel()
                self.task = nil
                respondAndContinue(502, "upstream \(upstreamName) switched protocols without being asked")
                return
            }
            self.task = nil
            writer.reset()
            ResponseHeadWriter.write(head, framing: .none, keepAlive: true, clientVersion: request.version,
                                     viaName: worker.settings.viaName, upgrade: true, into: &writer)
            stream.output.append(writer.bytes)
            startTunnel(upgraded)
            return
        }
        if cacheTakesResponse(head) {
            clientFraming = .none
            return
        }
        noteResponse(head.status)
        worker.stats.add(task.usedReusedConnection ? .originRequestsReusedConnection : .originRequestsNewConnection)
        // Answered before the client's body is all in: the connection closes after this answer
        // (the rest of the body would be read as a request), so the head says so.
        if requestBodyPending { keepAlive = false }
        clientFraming = request.method == .head ? .none
            : ResponseHeadWriter.framing(for: head, clientVersion: request.version)
        if clientFraming == .untilClose { keepAlive = false }
        writer.reset()
        ResponseHeadWriter.write(head, framing: clientFraming, keepAlive: keepAlive, clientVersion: request.version,
                                 viaName: worker.settings.viaName, upgrade: false,
                                 cacheStatus: cacheExchange?.status.serialized(), into: &writer)
        stream.output.append(writer.bytes)
        responseHeadSent = true
    }

    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        if !responseHeadSent {
            // A revalidation answer the cache consumed: its body is not the client's.
            source.drain(count)
            return
        }
        cacheTee(source, count: count)
        noteBody(count, fromCache: false)
        let out = stream.output
        switch clientFraming {
        case .chunked:
            chunkWriter.reset()
            chunkWriter.appendChunkHeader(size: count)
            out.append(chunkWriter.bytes)
            out.move(count, from: source)
            out.append(ChunkedFraming.chunkEnd)
        case .contentLength, .untilClose:
            out.move(count, from: source)
        case .none:
            source.drain(count)
        }
        if out.count > ClientConnection.outputHighWater, !responsePaused {
            responsePaused = true
            task.suspendReading()
        }
    }

    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        self.task = nil
        responsePaused = false
        collapsePaused = false
        stallWatch?.cancel()
        storePacer?.cancel()
        if cacheTaskCompleted(error: error) { return }
        if let error {
            worker.stats.add(Count.originError(error))
            worker.logger.warning("\(error.status) for \(peer): \(error.message)")
            if responseHeadSent {
                // The client must not mistake a truncated body for a complete one.
                abort()
                return
            }
            if case .done = requestBody {} else { keepAlive = false }
            writer.reset()
            noteResponse(error.status)
            LocalResponse.error(error.status, error.message, close: !keepAlive,
                                headOnly: request.method == .head, into: &writer)
            stream.output.append(writer.bytes)
            finishExchange()
            return
        }
        if clientFraming == .chunked { stream.output.append(ChunkedFraming.lastChunk) }
        if case .done = requestBody {} else { keepAlive = false }
        finishExchange()
    }

    /// Resumes the origin read once nothing holds it back: the client, a collapsed follower, the store.
    func resumeOriginIfClear() {
        if !responsePaused, !collapsePaused, !(storePacer?.paused ?? false) { task?.resumeReading() }
    }

    // MARK: - Connection life cycle

    /// The response is queued: read the next request, or close.
    func finishExchange() {
        logRequest()
        // Normally ended when the fetch completed; anything else must not leave followers waiting.
        cacheExchange?.endCollapse(failed: true, table: worker.inFlight)
        cacheExchange = nil
        // A body the client still owes would be read as its next request: close instead, after
        // reading and dropping what it still sends for a moment, or the close would be a reset
        // that can destroy the answer before the client reads it.
        if requestBodyPending {
            keepAlive = false
            closeWhenFlushed(lingerFor: 2)
            return
        }
        guard keepAlive, !worker.draining else {
            closeWhenFlushed()
            return
        }
        state = .readingHead
        requestBody = .done
        clientFraming = .none
        if stream.input.count == 0, stream.output.count > 0 {
            // The answer is still queued: a slow reader must not lose its tail to the idle timer,
            // which starts once everything is written (`streamDrained`).
            timerAfterFlush = true
        } else {
            armDeadline(forHead: stream.input.count > 0)
        }
        stream.enableReading()
        if !inRequestLoop, stream.input.count > 0 { processRequests() }
    }

    func armDeadline(forHead: Bool) {
        deadlineIsForHead = forHead
        deadline?.schedule(after: forHead ? worker.settings.clientHeaderTimeout : worker.settings.clientIdleTimeout)
    }

    func deadlineReached() {
        if state == .closing {
            close()  // the linger time is over
            return
        }
        guard state == .readingHead else { return }
        if stream.output.count > 0 {
            // Answers are still going out: the send timeout watches the client meanwhile, and the
            // idle (or head) time starts once they are written (`streamDrained`).
            timerAfterFlush = true
            return
        }
        if stream.input.count == 0 {
            // Idle, or a connection that never sent a byte: nothing to answer.
            close()
        } else {
            reject(408, "request head not received in time")
        }
    }

    /// Server shutdown: idle connections close now, busy ones after their response.
    func drain() {
        keepAlive = false
        guard state == .readingHead, stream.input.count == 0 else { return }
        // An answer still being written finishes first (within the shutdown grace).
        if stream.output.count == 0 { close() } else { closeWhenFlushed() }
    }

    func forceClose() {
        if let t = tunnel {
            t.close()
            return
        }
        let queued = stream.output.count
        if queued > 0 || responseHeadSent {
            worker.logger.warning("shutdown grace over: cutting the answer to \(peer) with \(queued) bytes still queued")
        } else if state == .exchanging {
            worker.logger.warning("shutdown grace over: abandoning \(peer)'s request to \(upstreamName), not answered yet")
        }
        close()
    }

    /// Closes once the queued output is sent; with `lingerFor`, reads and drops what the client
    /// still sends for up to that many seconds first (answers to requests refused mid-send).
    func closeWhenFlushed(lingerFor seconds: Double? = nil) {
        state = .closing
        deadline?.cancel()
        guard let seconds else {
            stream.disableReading()
            stream.setWriteLowWatermark(0)
            if stream.output.count == 0 { close() }
            return
        }
        lingering = true
        stream.input.drain(stream.input.count)
        stream.shutdownWriteWhenFlushed()
        stream.enableReading()
        deadline?.schedule(after: seconds)
    }

    /// Ends the connection with a reset: a response was cut short.
    func abort() {
        stream.reset()
        close()
    }

    /// Makes `new` this connection's stream (at start, and once more when a CONNECT is intercepted):
    /// its callbacks come here and its buffers are bounded.
    func attach(_ new: Stream) {
        stream = new
        stream.delegate = self
        stream.setWriteLowWatermark(ClientConnection.outputHighWater / 4)
        stream.setReadHighWatermark(max(2 * worker.settings.headLimits.maxHeadBytes, ClientConnection.uploadHighWater))
        // A send timeout: a client that reads nothing of its answer for the idle time is dropped.
        stream.setTimeouts(read: nil, write: worker.settings.clientIdleTimeout)
    }

    func close() {
        guard state != .closed else { return }
        logRequest()
        state = .closed
        deadline?.cancel()
        deadline = nil
        stallWatch?.cancel()
        stallWatch = nil
        leaveCollapse()
        cachedBody = nil  // lets go of a disk body's pin now, not when the connection object goes
        task?.cancel()
        task = nil
        connectOpener?.cancel()
        connectOpener = nil
        stream.close()
        worker.connectionClosed(self)
    }
}
