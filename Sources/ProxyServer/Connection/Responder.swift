import CachePolicy
import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// Whose answer a response is, which decides its `Cache-Status` (RFC 9211).
enum AnswerSource {
    /// Made by Larder without asking anyone (a refusal, a local answer): a detail for the status.
    case local
    /// An error Larder answers with: as `local` before the request went to an origin,
    /// `detail=origin-error` (standing in for the origin's answer) after.
    case larder
    /// Refused because Larder is offline.
    case offline
    /// An origin's answer: the cache's lookup status, or `fwd=method` for a request the cache does
    /// not look up.
    case origin
    /// From the cache, or shared from another request's fetch, as the lookup reports it.
    case lookup(CacheStatus)
}

/// A stored response, or part of one, as it is answered from the cache.
enum StoredAnswer {
    case full(storedHead: [UInt8], age: Int64)
    case notModified(ResponseHead, age: Int64)
    case partial(ResponseHead, start: Int, end: Int, length: Int, age: Int64)
    case unsatisfiable(length: Int)
}

/// The responder: how the current request on an HTTP/1.x connection is answered. Every response
/// head is written here, framed for the client, with the `Connection` field the connection's
/// machine decided (`answerKeepsAlive`) and the `Cache-Status` that `cacheStatus(_:status:)` alone
/// chooses; bodies are framed here; and what the access-log line says of the answer is noted here.
/// Exchanges (a forward, a hit, a follower, a range fill, CONNECT) say what to answer through
/// these calls and never write to the client's stream or the answer's state themselves; another
/// kind of stream (an HTTP/2 one) answers through the same calls.
///
/// Methods of the connection rather than an object of their own: the connection is referenced
/// weakly (its stream's delegate), so every retain of it takes the slow path of the reference
/// count, and a separate object would retain it on each call of the hit path.
extension ClientConnection {
    /// The head is out: from now on a failure can only be a cut.
    var answerStarted: Bool { context.answer.started }

    /// Answer bytes queued and not yet written to the client.
    var answerQueued: Int { stream.output.count }

    /// The client is not reading fast enough: whoever produces the answer should wait.
    var answerBackedUp: Bool { answerQueued > outputHighWater }

    // MARK: - Heads

    /// An origin's final response, relayed: framed for this client.
    func forwardHead(_ head: ResponseHead) {
        if let m = context.mirror, mirrorHolds(m, head, storedAge: nil, cacheStatus: cacheStatus(.origin, status: head.status),
                                               sharedWithout: nil) { return }
        let framing = request.method == .head ? .none
            : ResponseHeadWriter.framing(for: head, clientVersion: request.version)
        writeHead(head, framing: framing, cacheStatus: cacheStatus(.origin, status: head.status), sharedWithout: nil)
    }

    /// Another request's response, shared (request collapsing): its `Set-Cookie` fields and the
    /// qualified fields in `omitting` stay out.
    func sharedHead(_ head: ResponseHead, lookup: CacheStatus, omitting: [[UInt8]]) {
        if let m = context.mirror, mirrorHolds(m, head, storedAge: nil, cacheStatus: cacheStatus(.lookup(lookup), status: head.status),
                                               sharedWithout: omitting) { return }
        let framing = ResponseHeadWriter.framing(for: head, clientVersion: request.version)
        writeHead(head, framing: framing, cacheStatus: cacheStatus(.lookup(lookup), status: head.status),
                  sharedWithout: omitting)
    }

    private func writeHead(_ head: ResponseHead, framing: ClientFraming, cacheStatus: CacheStatusField,
                           sharedWithout: [[UInt8]]?) {
        let keepAlive = answerKeepsAlive(closeDelimited: framing == .untilClose)
        noteResponse(head.status)
        context.answer.framing = framing
        context.answer.started = true
        writer.reset()
        ResponseHeadWriter.write(head, framing: framing, keepAlive: keepAlive, clientVersion: request.version,
                                 viaName: worker.settings.viaName, upgrade: false, cacheStatus: cacheStatus,
                                 sharedWithout: sharedWithout, into: &writer)
        sendHead()
    }

    /// A stored response, or part of it (`status` is the one its head carries), with the lookup's
    /// status and `personal`: this client's own field lines (a revalidation answer's `Set-Cookie`).
    func storedHead(_ answer: StoredAnswer, status: Int, lookup: CacheStatus, personal: [UInt8]) {
        if let m = context.mirror, storedAnswerHeld(m, answer, lookup: lookup) { return }
        let keepAlive = answerKeepsAlive(closeDelimited: false)
        noteResponse(status)
        context.answer.framing = .contentLength
        context.answer.started = true
        let field = cacheStatus(.lookup(lookup), status: status)
        let version = request.version
        let viaName = worker.settings.viaName
        writer.reset()
        switch answer {
        case .full(let storedHead, let age):
            CachedResponseWriter.full(storedHead: storedHead, age: age, cacheStatus: field, keepAlive: keepAlive,
                                      clientVersion: version, viaName: viaName, personal: personal, into: &writer)
        case .notModified(let storedHead, let age):
            CachedResponseWriter.notModified(storedHead: storedHead, age: age, cacheStatus: field, keepAlive: keepAlive,
                                             clientVersion: version, viaName: viaName, personal: personal,
                                             into: &writer)
        case .partial(let storedHead, let start, let end, let length, let age):
            CachedResponseWriter.partial(storedHead: storedHead, start: start, end: end, length: length, age: age,
                                         cacheStatus: field, keepAlive: keepAlive, clientVersion: version,
                                         viaName: viaName, personal: personal, into: &writer)
        case .unsatisfiable(let length):
            CachedResponseWriter.unsatisfiable(length: length, cacheStatus: field, keepAlive: keepAlive,
                                               clientVersion: version, viaName: viaName, into: &writer)
        }
        sendHead()
    }

    /// Queues the final answer head in `writer` (and a body written with it): on an HTTP/2
    /// stream the head goes to its connection as it is, not through the stream's output and back.
    private func sendHead() {
        if isStream { return sendHeadOnStream() }
        writer.withBytes { stream.output.append($0) }
    }

    /// Apart from `sendHead`, so that the HTTP/1.1 path's call carries no closure holding the
    /// connection (a retain and a release per answer).
    @inline(never)
    private func sendHeadOnStream() {
        let out = stream.output
        writer.withBytes { bytes in
            if let carrier, let n = carrier.takeAnswerHead(bytes, of: stream) {
                if n < bytes.count { out.append(UnsafeRawBufferPointer(rebasing: bytes[n...])) }
            } else {
                out.append(bytes)
            }
        }
    }

    /// A stored answer a mirror holds back (a document, a redirect) or refuses (a file too young).
    private func storedAnswerHeld(_ m: MirrorExchange, _ answer: StoredAnswer, lookup: CacheStatus) -> Bool {
        switch answer {
        case .full(let bytes, let age):
            guard let head = CachedResponseWriter.parse(bytes) else { return false }
            return mirrorHolds(m, head, storedAge: age, cacheStatus: cacheStatus(.lookup(lookup), status: head.status),
                               sharedWithout: nil)
        case .partial(let head, _, _, _, let age):
            guard case .ageCheckedFile = m.plan else { return false }
            return mirrorHolds(m, head, storedAge: age, cacheStatus: cacheStatus(.lookup(lookup), status: 206),
                               sharedWithout: nil)
        case .notModified, .unsatisfiable:
            return false
        }
    }

    /// A 1xx before the final answer. One `100 Continue`, and only to a client that asked for it;
    /// an HTTP/1.0 client gets none.
    func interim(_ head: ResponseHead) {
        guard request.version == .http11 else { return }
        if head.status == 100 {
            guard request.expectsContinue, !context.answer.continueSent else { return }
            context.answer.continueSent = true
            stream.output.append(LocalResponse.continueHead)
            return
        }
        writer.reset()
        ResponseHeadWriter.write(head, framing: .none, keepAlive: true, clientVersion: request.version,
                                 viaName: worker.settings.viaName, upgrade: false, into: &writer)
        writer.withBytes { stream.output.append($0) }
    }

    /// 101 to an upgrade the client asked for: the connection becomes a tunnel after it.
    func switchingProtocols(_ head: ResponseHead) {
        noteResponse(head.status)
        context.answer.started = true
        writer.reset()
        ResponseHeadWriter.write(head, framing: .none, keepAlive: true, clientVersion: request.version,
                                 viaName: worker.settings.viaName, upgrade: true, into: &writer)
        writer.withBytes { stream.output.append($0) }
    }

    // MARK: - Bodies

    /// `count` body bytes of a relayed response, taken from `source`.
    func forwardBody(from source: Buffer, count: Int) {
        noteBody(count, fromCache: false)
        if let m = context.mirror, m.isHolding {
            source.withContiguousPrefix(maxBytes: count) { mirrorTakes(m, $0) }
            return source.drain(count)
        }
        let out = stream.output
        switch context.answer.framing {
        case .chunked:
            chunkWriter.reset()
            chunkWriter.appendChunkHeader(size: count)
            chunkWriter.withBytes { out.append($0) }
            out.move(count, from: source)
            out.append(ChunkedFraming.chunkEnd)
        case .contentLength, .untilClose:
            out.move(count, from: source)
        case .none:
            source.drain(count)
        }
    }

    /// Body bytes, copied (the caller notes them, `noteBody`).
    func sendBody(_ bytes: UnsafeRawBufferPointer) {
        if let m = context.mirror, m.isHolding { return mirrorTakes(m, bytes) }
        let out = stream.output
        switch context.answer.framing {
        case .chunked:
            chunkWriter.reset()
            chunkWriter.appendChunkHeader(size: bytes.count)
            chunkWriter.withBytes { out.append($0) }
            out.append(bytes)
            out.append(ChunkedFraming.chunkEnd)
        case .contentLength, .untilClose:
            out.append(bytes)
        case .none:
            break
        }
    }

    /// Body bytes of a stored response that `owner` keeps alive: on an HTTP/2 stream, a small whole
    /// body goes to the connection as it is (its frames copy it from there), not through the
    /// stream's output and back; otherwise queued by reference if large, copied if small.
    func sendStoredBody(_ bytes: UnsafeRawBufferPointer, keepingAlive owner: AnyObject) {
        if isStream, context.mirror == nil, let carrier,
           carrier.takeAnswerBody(bytes, keepingAlive: owner, of: stream) { return }
        // Small ones are cheaper to copy than to track.
        if bytes.count >= CacheFlow.referenceThreshold {
            sendBody(reference: bytes, keepingAlive: owner)
        } else {
            sendBody(bytes)
        }
    }

    /// Body bytes of a stored response, queued by reference: `owner` keeps them alive until written.
    func sendBody(reference bytes: UnsafeRawBufferPointer, keepingAlive owner: AnyObject) {
        if let m = context.mirror, m.isHolding { return mirrorTakes(m, bytes) }
        assert(context.answer.framing == .contentLength, "a stored body goes out as it is")
        stream.output.appendReference(bytes, keepingAlive: owner, inPiecesOf: stream.referencePiece)
    }

    /// The whole answer is queued: the connection's machine decides what comes next.
    func finishAnswer() {
        if let m = context.mirror, m.isHolding { return finishMirrorAnswer(m) }
        if context.answer.framing == .chunked { stream.output.append(ChunkedFraming.lastChunk) }
        stream.gatherForOneRecord()  // a small answer's head and body in one TLS record
        send(.answered)
    }

    /// The answer breaks off: the client must not mistake what it got for the whole of it.
    func cutAnswer() {
        if let m = context.mirror, m.isHolding { return cutMirrorAnswer(m) }
        send(.cut)
    }

    // MARK: - Answers Larder makes

    /// An error after a well-formed head: the connection goes on unless the client still owes a
    /// body. After the request went to an origin, it stands in for the origin's answer.
    func answerError(_ status: Int, _ reason: String, extraField: String? = nil, source: AnswerSource = .larder) {
        let keepAlive = answerKeepsAlive(closeDelimited: false)
        let headOnly = request.method == .head
        writeError(status, reason, keepAlive: keepAlive, headOnly: headOnly, extraField: extraField, source: source)
        send(.answered)
    }

    /// A request refused: answered with `status`, then the connection closes (the rest of the
    /// stream cannot be trusted).
    func refuse(_ status: Int, _ reason: String) {
        worker.logger.notice("\(status) to \(peer): \(reason)")
        if context.answer.log.written {
            // A head that did not parse is still a request, counted and logged.
            worker.stats.add(Count.request(request.method))
            context.answer.log = RequestLog(start: worker.clock.monotonic)
        }
        // Never an origin's error, whatever the connection did before: the client's own fault.
        writeError(status, reason, keepAlive: false, headOnly: false, extraField: nil, source: .local)
        send(.refused)
    }

    /// A CONNECT whose destination could not be reached: answered, then the connection closes.
    func tunnelFailed(_ status: Int, _ reason: String) {
        writeError(status, reason, keepAlive: false, headOnly: false, extraField: nil, source: .larder)
        send(.closeAfterAnswer)
    }

    private func writeError(_ status: Int, _ reason: String, keepAlive: Bool, headOnly: Bool, extraField: String?,
                            source: AnswerSource) {
        noteResponse(status)
        context.answer.started = true
        writer.reset()
        LocalResponse.error(status, reason, keepAlive: keepAlive, clientVersion: request.version, headOnly: headOnly,
                            extraField: extraField, cacheStatus: cacheStatus(source, status: status), into: &writer)
        sendHead()
        if !headOnly { context.answer.log.bytes += reason.utf8.count + 1 }  // the body: the reason and a newline
    }

    /// TRACE/OPTIONS with `Max-Forwards: 0`, and `OPTIONS *`.
    func answerLocally() {
        let keepAlive = answerKeepsAlive(closeDelimited: false)
        let field = cacheStatus(.local, status: 200)
        noteResponse(200)
        context.answer.started = true
        writer.reset()
        if request.method == .trace {
            context.answer.log.bytes += LocalResponse.trace(request, keepAlive: keepAlive, cacheStatus: field,
                                                            into: &writer)
        } else {
            LocalResponse.options(keepAlive: keepAlive, clientVersion: request.version, cacheStatus: field,
                                  into: &writer)
        }
        sendHead()
        send(.answered)
    }

    /// CONNECT: the tunnel to the destination is open.
    func tunnelEstablished() {
        noteResponse(200)
        stream.output.append(worker.settings.localAnswers.connectEstablished)
    }

    /// CONNECT to a destination that is intercepted: answered as a tunnel, then TLS starts. Its
    /// access-log line waits for the connection's end (`logInterceptedTunnel`).
    func answerIntercepted(_ origin: OriginKey) {
        noteResponse(200)
        stream.output.append(worker.settings.localAnswers.connectIntercepted)
        intercepted = InterceptedConnect(origin: origin, request: request, log: context.answer.log)
        context.answer.log.written = true
        send(.intercepted)
    }

    /// The one place a `Cache-Status` is chosen (CONNECT's answers and refused connections' carry
    /// theirs serialized once per configuration, `LocalAnswers`).
    private func cacheStatus(_ source: AnswerSource, status: Int) -> CacheStatusField {
        // The settings are read in place: a copy of the struct costs a reference count per field.
        switch source {
        case .lookup(let lookup):
            return .status(lookup, worker.settings.cache.cacheName)
        case .origin:
            if let exchange = context.cache { return .status(exchange.status, worker.settings.cache.cacheName) }
            return .bytes(worker.settings.localAnswers.forwardedForMethod(originStatus: status))
        case .local:
            return .bytes(worker.settings.localAnswers.local(status))
        case .larder:
            if context.upstream == nil { return .bytes(worker.settings.localAnswers.local(status)) }
            return .bytes(worker.settings.localAnswers.originError(after: context.cache?.status))
        case .offline:
            return .status(CacheStatus(detail: "offline"), worker.settings.cache.cacheName)
        }
    }

    // MARK: - The access log

    func noteResponse(_ status: Int) {
        worker.stats.add(.response(status: status))
        context.answer.log.status = status
    }

    func noteBody(_ count: Int, fromCache: Bool) {
        worker.stats.add(fromCache ? .clientBytesFromCache : .clientBytesFromOrigin, count)
        context.answer.log.bytes += count
    }

    func noteLookup(_ result: Count) {
        worker.stats.add(result)
        context.answer.log.cache = RequestLog.cacheWord(for: result)
    }

    /// A collapsed request that fetched on its own after all: a miss of its own, in the log.
    func noteFetchedAlone() {
        context.answer.log.cache = "miss"
    }

    /// What a tunnel carried each way, logged when it ends.
    func noteTunnel(toClient: Int, fromClient: Int) {
        context.answer.log.bytes += toClient
        context.answer.log.bytesFromClient = fromClient
    }

    /// Writes the access-log line of the current request, once. The duration comes from the
    /// worker's monotonic clock, to the microsecond.
    func logRequest() {
        guard !context.answer.log.written else { return }
        context.answer.log.written = true
        guard let buffer = worker.accessLog else { return }
        let clock = worker.clock
        let log = context.answer.log
        buffer.append(AccessLogBuffer.Entry(client: clientAddress, request: request, origin: interceptedOrigin,
                                            status: log.status, bodyBytes: log.bytes,
                                            bytesFromClient: log.bytesFromClient, cache: log.cache,
                                            seconds: clock.monotonic - log.start, time: clock.wallSeconds,
                                            overHTTP2: isStream))
    }

    /// The intercepted CONNECT's line, once its connection has ended: like a tunnel's, with the
    /// bytes that crossed the client's socket each way (TLS records, the handshake included).
    func logInterceptedTunnel() {
        intercepted?.logTunnel(carriedBy: stream, client: clientAddress, worker: worker)
    }
}
