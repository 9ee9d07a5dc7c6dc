import EventLoop
import HTTPWire

/// One request/response exchange with an origin (NSURLSessionDataTask's role). Created suspended by
/// `Session.dataTask`; `resume()` starts it. Lives on the session's loop.
///
/// A shell around `OriginExchangeMachine`, which decides everything: the task hands it each event
/// (a call from its owner, the pool or the connection, a parsed head, a delegate callback returned)
/// and carries out the action it answers, which often leads to the next event.
public final class SessionTask {
    private typealias Action = OriginExchangeMachine.Action

    /// Unchecked: the session outlives every task it runs (a worker's lives as long as its loop), and
    /// a checked reference costs a retain and a release at every use, several per request.
    private unowned(unsafe) let session: Session
    /// The session's, held so that a task freed after its session can still leave the list.
    private let deadlines: ResourceDeadlines
    public let origin: OriginKey
    public let method: HTTPMethod
    private let head: [UInt8]
    /// Whom the request is for (network-order address), for the resolver's per-client bound.
    let client: [UInt8]?
    /// Held strongly until the task finishes, as URLSession holds a task's delegate, then let go, so a
    /// delegate that owns its task is freed with it. (A weak reference would cost every task a side
    /// table and every retain of the delegate the slow path.) Set on a finished task, it is not kept.
    public var delegate: (any SessionTaskDelegate)? {
        didSet { if exchange.isFinished { delegate = nil } }
    }

    private var exchange: OriginExchangeMachine
    private var connection: OriginConnection?
    private var pool: HostPool?
    /// The read loop is running: a delegate call inside it that asks to read again is served by it.
    private var reading = false
    private var response = ResponseHead()
    private var decoder = ChunkedDecoder()
    /// `timeoutIntervalForResource`, kept by the session's `ResourceDeadlines`.
    var hasDeadline = false
    var deadline = 0.0
    unowned(unsafe) var olderByDeadline: SessionTask?
    unowned(unsafe) var newerByDeadline: SessionTask?

    init(session: Session, origin: OriginKey, method: HTTPMethod, head: [UInt8], hasBody: Bool,
         isIdempotent: Bool, expectsContinue: Bool, client: [UInt8]?, delegate: any SessionTaskDelegate) {
        self.session = session
        deadlines = session.deadlines
        self.origin = origin
        self.method = method
        self.head = head
        self.client = client
        exchange = OriginExchangeMachine(.init(hasBody: hasBody, isIdempotent: isIdempotent, expectsContinue: expectsContinue,
                                               throughParent: session.usesParentProxy && origin.scheme != .https,
                                               trustsBodylessAnswers: session.configuration.reuseAfterBodylessAnswers))
        self.delegate = delegate
    }

    deinit {
        // Freed without ending (its owner let it go unfinished): it must not stay listed.
        if hasDeadline { deadlines.remove(self) }
    }

    /// The whole exchange took longer than `timeoutIntervalForResource`.
    func resourceDeadlinePassed() {
        run(exchange.resourceDeadlinePassed())
    }

    /// Whether the response came over a connection that had served earlier requests.
    public var usedReusedConnection: Bool { exchange.usedReusedConnection }

    /// Where the request body goes once `taskCanSendBody` has been called; nil before and after.
    public var bodyOutput: Buffer? {
        exchange.acceptsRequestBody ? connection?.stream.output : nil
    }

    /// Bytes of request body queued but not yet written to the origin.
    public var pendingBodyBytes: Int { connection?.stream.output.count ?? 0 }

    public func resume() {
        run(exchange.resume(offline: session.offline))
    }

    /// The whole request body has been written to `bodyOutput`.
    public func finishBody() { exchange.requestBodyWritten() }

    /// Stops reading the response (the consumer is behind); `resumeReading` continues.
    public func suspendReading() {
        run(exchange.suspendReading())
    }

    public func resumeReading() {
        run(exchange.resumeReading())
    }

    /// Abandons the exchange; the connection is closed (it is mid-message). No delegate call follows.
    public func cancel() {
        run(exchange.cancel())
    }

    /// After a 101: the raw connection, now the caller's. The pool forgets it.
    public func takeUpgradedStream() -> Stream? {
        guard let c = connection, case .handOverUpgraded = exchange.takeUpgraded() else { return nil }
        connection = nil
        delegate = nil
        pool?.detach(c)
        c.stream.delegate = nil
        c.stream.setTimeouts(read: nil, write: nil)
        return c.stream
    }

    // MARK: - Driven by the pool and the connection

    func attach(_ conn: OriginConnection, pool: HostPool, reused: Bool) {
        let reused = reused || conn.ridesSharedConnection
        guard case .writeHead(let startReading, let askForBody) = exchange.connectionAssigned(reused: reused) else {
            // Not waiting any more: the pool keeps the connection, resting and looked at before
            // reuse, as nothing here knows what it carried last.
            pool.release(conn, reusable: true, rests: true)
            return
        }
        connection = conn
        conn.task = self
        swap(&response, &conn.headSpace)
        let stream = conn.stream
        let t = session.configuration.timeoutIntervalForRequest
        stream.setTimeouts(read: t, write: t)
        stream.output.append(head)
        if startReading { stream.enableReading() }
        if askForBody { delegate?.taskCanSendBody(self) }
        // The delegate may have cancelled the task (a request body it refused): the connection is
        // closed and gone, and nothing more of it may be read.
        guard connection === conn else { return }
        // Bytes that arrived while the connection sat idle were handled by the pool; anything in the
        // input now is an early answer.
        if stream.input.count > 0 { originReadable() }
    }

    func failBeforeAttach(_ error: SessionError) {
        if case .fail(_, let cleanup) = exchange.connectFailed() { finish(failing: error, cleanup) }
    }

    func originDrained() {
        run(exchange.requestBytesDrained())
    }

    func originReadable() {
        if reading { return }
        guard let conn = connection else { return }
        reading = true
        defer { reading = false }
        let stream = conn.stream
        read(exchange.readable(buffered: stream.input.count), from: stream)
    }

    func originEvent(_ event: StreamEvent) {
        switch event {
        case .connected:
            return
        case .timeout:
            run(exchange.timedOut())
        case .endOfStream, .error:
            run(exchange.originClosed(buffered: connection?.stream.input.count ?? 0))
        }
    }

    // MARK: - Carrying out the machine's actions

    /// Carries out `action`; reading actions go on in `read`, with the connection's input at hand.
    private func run(_ action: Action) {
        switch action {
        case .none:
            return
        case .joinQueue:
            deadlines.add(self)
            let p = session.pool(for: origin)
            pool = p
            p.enqueue(self)
        case .writeHead, .returnConnection:
            // Answers to `connectionAssigned`, carried out by `attach`, which holds the connection.
            return
        case .stopReading:
            connection?.stream.disableReading()
        case .resumeReading:
            guard let c = connection else { return }
            c.stream.enableReading()
            if c.stream.input.count > 0 { originReadable() }
        case .notifyBodyDrained:
            delegate?.taskBodyDrained(self)
        case .parseHead, .decodeChunk, .deliverInformational, .deliverHead, .deliverBody, .checkUnread:
            guard let c = connection else { return }
            read(action, from: c.stream)
        case .deliverUpgrade:
            deadlines.remove(self)
            delegate?.task(self, didReceiveResponse: response)
        case .complete(let verdict):
            complete(verdict)
        case .retryOnFreshConnection:
            if let c = connection { connection = nil; pool?.release(c, reusable: false) }
            pool?.enqueue(self)
        case .fail(let failure, let cleanup):
            finish(failing: error(failure), cleanup)
        case .abandon(let cleanup):
            delegate = nil
            end(cleanup)
        case .handOverUpgraded:
            // Carried out by `takeUpgradedStream`, which asked for it.
            return
        }
    }

    /// Carries out reading actions, and the ones the events they cause are answered with, until one
    /// needs no more of the input. A delegate that cancels meanwhile is noticed by the machine: it
    /// answers whatever follows with `.none`.
    private func read(_ first: Action, from stream: Stream) {
        let input = stream.input
        /// What the input holds after a delegate call. A delegate that cancelled had the connection
        /// closed, and its buffers freed with it: nothing is read from them then.
        func buffered() -> Int { stream.isClosed ? 0 : input.count }
        var action = first
        while true {
            switch action {
            case .parseHead:
                action = parseHead(input, queuedRequestBytes: stream.output.count)
            case .decodeChunk:
                action = decodeChunk(input)
            case .deliverInformational:
                delegate?.task(self, didReceiveInformational: response)
                action = exchange.readable(buffered: buffered())
            case .deliverHead:
                deliverHead()
                action = exchange.headDelivered(buffered: buffered())
            case .deliverBody(let count):
                delegate?.task(self, didReceiveBody: input, count: count)
                action = exchange.bodyDelivered(buffered: buffered())
            case .checkUnread:
                action = exchange.unreadChecked(stream.unreadInput)
            case .none:
                return
            default:
                return run(action)
            }
        }
    }

    /// Lends the final head to the delegate, moved out for the call and back after it: passed as
    /// the stored property, it was copied for the call and the copy destroyed (a retain and a
    /// release of each of its arrays, every response).
    private func deliverHead() {
        guard let d = delegate else { return }
        var head = ResponseHead()
        swap(&head, &response)
        d.task(self, didReceiveResponse: head)
        swap(&head, &response)
    }

    private func parseHead(_ input: Buffer, queuedRequestBytes: Int) -> Action {
        let limits = HeadLimits(maxHeadBytes: session.configuration.maxResponseHeadBytes,
                                maxHeaderCount: session.configuration.maxResponseHeaderCount,
                                maxRequestLineBytes: session.configuration.maxResponseHeadBytes)
        let parsed: Int?
        do {
            parsed = try input.withContiguousPrefix(maxBytes: limits.maxHeadBytes) { bytes throws(HTTPWireError) in
                try ResponseParser.parse(bytes, into: &response, requestMethod: method, limits: limits)
            }
        } catch {
            return exchange.responseInvalid(error)
        }
        guard let length = parsed else {
            return input.count >= limits.maxHeadBytes ? exchange.responseInvalid(.headTooLarge) : .none
        }
        input.drain(length)
        response.removeFieldsNominatedByConnection()
        let action = exchange.responseHead(ResponseFacts(response), requestBytesQueued: queuedRequestBytes > 0)
        if case .deliverHead = action, case .chunked = response.framing { decoder = ChunkedDecoder() }
        return action
    }

    private func decodeChunk(_ input: Buffer) -> Action {
        let step: ChunkedDecoder.Step
        do {
            step = try ChunkedFrontView.step(&decoder, input)
        } catch {
            return exchange.responseInvalid(error)
        }
        switch step {
        case .needMore:
            return .none
        case .framing(let n):
            input.drain(n)
            return exchange.readable(buffered: input.count)
        case .data(let n):
            return exchange.chunkedBodyData(count: n)
        case .done(let n):
            input.drain(n)
            return exchange.chunkedBodyEnded(buffered: input.count)
        }
    }

    private func complete(_ verdict: ConnectionVerdict) {
        deadlines.remove(self)
        if let c = connection {
            connection = nil
            switch verdict {
            case .reuse(let rests):
                swap(&response, &c.headSpace)
                pool?.release(c, reusable: true, rests: rests)
            case .close(let reason):
                if reason.isUnsafe { session.noteDiscardedUnsafe() }
                pool?.release(c, reusable: false)
            }
        }
        finishedDelegate()?.task(self, didCompleteWith: nil)
    }

    private func finish(failing error: SessionError, _ cleanup: OriginExchangeMachine.Cleanup) {
        end(cleanup)
        finishedDelegate()?.task(self, didCompleteWith: error)
    }

    /// Lets go of the connection (closed) or of the place in the queue.
    private func end(_ cleanup: OriginExchangeMachine.Cleanup) {
        deadlines.remove(self)
        switch cleanup {
        case .none:
            break
        case .leaveQueue:
            pool?.remove(self)
        case .closeConnection:
            if let c = connection {
                connection = nil
                pool?.release(c, reusable: false)
            }
        }
    }

    private func error(_ failure: OriginExchangeMachine.Failure) -> SessionError {
        let upstream = origin.description
        switch failure {
        case .offline: return .offline(upstream: upstream)
        case .connectFailed:
            // Answered to `connectFailed` alone, where `failBeforeAttach` passes on the connector's error.
            return .connectFailed(upstream: upstream, reason: "no connection could be opened")
        case .requestTimeout: return .requestTimeout(upstream: upstream)
        case .resourceTimeout: return .resourceTimeout(upstream: upstream)
        case .prematureClose: return .prematureClose(upstream: upstream)
        case .invalidResponse(let e): return .invalidResponse(upstream: upstream, e)
        case .responseHeadTooLarge: return .responseHeadTooLarge(upstream: upstream)
        case .parentChallenge:
            // The parent's challenge for its own credentials: not an answer to pass on, where a
            // client would take it for Larder's.
            let parent = session.parentCarrying(origin)?.key.description ?? upstream
            return .parentRefused(parent: parent, request: "a request for http://\(origin)", status: 407)
        }
    }

    /// The delegate, let go of now that the task has finished: it hears the end, and nothing after.
    private func finishedDelegate() -> (any SessionTaskDelegate)? {
        let d = delegate
        delegate = nil
        return d
    }
}

/// Feeds the chunked decoder a view of the front of a buffer without copying payload: the first
/// segment when it is large enough to hold any framing line, a small pulled-up prefix otherwise.
public enum ChunkedFrontView {
    public static func step(_ decoder: inout ChunkedDecoder, _ input: Buffer) throws(HTTPWireError) -> ChunkedDecoder.Step {
        let lineRoom = decoder.maxLineBytes + 2
        let first = try input.withFirstSegment { bytes throws(HTTPWireError) in
            (try decoder.step(bytes), bytes.count)
        }
        if case .needMore = first.0, first.1 < input.count {
            let window = min(input.count, decoder.maxTrailerBytes + lineRoom)
            return try input.withContiguousPrefix(maxBytes: window) { bytes throws(HTTPWireError) in
                try decoder.step(bytes)
            }
        }
        return first.0
    }
}

/// A chunked body taken out as plain bytes, only as far as the taker has room: what is not taken
/// stays in the buffer, framing included, and holds its producer back. (An HTTP/2 stream's DATA
/// made from an HTTP/1.1 body, either way.)
public struct ChunkedPull {
    private var decoder = ChunkedDecoder()
    /// Payload bytes of the current chunk at the front of the buffer, not taken yet.
    private var pendingData = 0

    public init() {}

    /// The last chunk and its trailer section are read, and every payload byte taken.
    public var isDone: Bool { decoder.isDone && pendingData == 0 }

    /// Moves up to `buffer.count` payload bytes from the front of `input` into `buffer`, draining
    /// the framing on the way: how many were copied, and how many bytes `input` lost in all.
    public mutating func take(from input: Buffer,
                              into buffer: UnsafeMutableRawBufferPointer) throws(HTTPWireError) -> (copied: Int, drained: Int) {
        var copied = 0
        var drained = 0
        while copied < buffer.count {
            if pendingData > 0 {
                let want = min(pendingData, buffer.count - copied)
                let got = input.remove(into: UnsafeMutableRawBufferPointer(rebasing: buffer[copied..<(copied + want)]))
                copied += got
                drained += got
                pendingData -= got
                if got < want { break }
                continue
            }
            guard !decoder.isDone, input.count > 0 else { break }
            switch try ChunkedFrontView.step(&decoder, input) {
            case .needMore:
                return (copied, drained)
            case .framing(let k), .done(let k):
                input.drain(k)
                drained += k
            case .data(let k):
                pendingData = k
            }
        }
        return (copied, drained)
    }
}
