import EventLoop
import HTTPWire

/// One request/response exchange with an origin (NSURLSessionDataTask's role). Created suspended by
/// `Session.dataTask`; `resume()` starts it. Lives on the session's loop.
public final class SessionTask {
    private enum State {
        /// Made, not resumed.
        case created
        /// In the pool's FIFO, waiting for a connection.
        case waiting
        /// Head sent (body maybe still going); waiting for the response head.
        case awaitingHead
        /// Final head delivered; body arriving.
        case receivingBody
        /// A 101 was delivered; the connection belongs to whoever takes it.
        case upgraded
        /// Completed, failed or cancelled: nothing more happens.
        case finished
    }

    private unowned let session: Session
    /// The session's, held so that a task freed after its session can still leave the list.
    private let deadlines: ResourceDeadlines
    public let origin: OriginKey
    public let method: HTTPMethod
    private let head: [UInt8]
    private let hasBody: Bool
    private let isIdempotent: Bool
    /// Whom the request is for (network-order address), for the resolver's per-client bound.
    let client: [UInt8]?
    /// Held strongly until the task finishes, as URLSession holds a task's delegate, then let go, so a
    /// delegate that owns its task is freed with it. (A weak reference would cost every task a side
    /// table and every retain of the delegate the slow path.) Set on a finished task, it is not kept.
    public var delegate: (any SessionTaskDelegate)? {
        didSet { if state == .finished { delegate = nil } }
    }

    private var state = State.created
    private var connection: OriginConnection?
    private var pool: HostPool?
    private var reusedConnection = false
    private var retried = false
    private var bodyFinished = false
    private var responseStarted = false
    private var paused = false
    /// The final response head arrived before the whole request body was written: the origin may
    /// not have read it, and what it left unread would be taken as the next request.
    private var answeredBeforeBodySent = false
    /// `Expect: 100-continue` was sent and no `100 Continue` has come: the origin may answer
    /// without reading the body at all (RFC 9110 §10.1.1).
    private var awaitingContinue: Bool
    private var processing = false
    private var response = ResponseHead()
    private var framing = BodyFraming.none
    private var remaining = 0
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
        self.hasBody = hasBody
        self.isIdempotent = isIdempotent
        self.client = client
        self.awaitingContinue = hasBody && expectsContinue
        self.delegate = delegate
        bodyFinished = !hasBody
    }

    deinit {
        // Freed without ending (its owner let it go unfinished): it must not stay listed.
        if hasDeadline { deadlines.remove(self) }
    }

    /// The whole exchange took longer than `timeoutIntervalForResource`.
    func resourceDeadlinePassed() {
        fail(.resourceTimeout(upstream: origin.description))
    }

    /// Whether the response came over a connection that had served earlier requests.
    public var usedReusedConnection: Bool { reusedConnection }

    /// Where the request body goes once `taskCanSendBody` has been called; nil before and after.
    public var bodyOutput: Buffer? {
        guard state == .awaitingHead || state == .receivingBody, !bodyFinished else { return nil }
        return connection?.stream.output
    }

    /// Bytes of request body queued but not yet written to the origin.
    public var pendingBodyBytes: Int { connection?.stream.output.count ?? 0 }

    public func resume() {
        guard state == .created else { return }
        if session.offline { return fail(.offline(upstream: origin.description)) }
        deadlines.add(self)
        let p = session.pool(for: origin)
        pool = p
        state = .waiting
        p.enqueue(self)
    }

    /// The whole request body has been written to `bodyOutput`.
    public func finishBody() { bodyFinished = true }

    /// Stops reading the response (the consumer is behind); `resumeReading` continues.
    public func suspendReading() {
        paused = true
        connection?.stream.disableReading()
    }

    public func resumeReading() {
        guard paused else { return }
        paused = false
        guard let c = connection, state == .awaitingHead || state == .receivingBody else { return }
        c.stream.enableReading()
        if c.stream.input.count > 0 { originReadable() }
    }

    /// Abandons the exchange; the connection is closed (it is mid-message). No delegate call follows.
    public func cancel() {
        guard state != .finished else { return }
        let wasWaiting = state == .waiting
        state = .finished
        delegate = nil
        deadlines.remove(self)
        if let c = connection {
            connection = nil
            pool?.release(c, reusable: false)
        } else if wasWaiting {
            pool?.remove(self)
        }
    }

    /// After a 101: the raw connection, now the caller's. The pool forgets it.
    public func takeUpgradedStream() -> Stream? {
        guard state == .upgraded, let c = connection else { return nil }
        connection = nil
        state = .finished
        delegate = nil
        pool?.detach(c)
        c.stream.delegate = nil
        c.stream.setTimeouts(read: nil, write: nil)
        return c.stream
    }

    // MARK: - Driven by the pool and the connection

    func attach(_ conn: OriginConnection, pool: HostPool, reused: Bool) {
        guard state == .waiting else {
            pool.release(conn, reusable: true)
            return
        }
        connection = conn
        conn.task = self
        swap(&response, &conn.headSpace)
        reusedConnection = reused
        responseStarted = false
        state = .awaitingHead
        let stream = conn.stream
        let t = session.configuration.timeoutIntervalForRequest
        stream.setTimeouts(read: t, write: t)
        stream.output.append(head)
        if !paused { stream.enableReading() }
        if hasBody { delegate?.taskCanSendBody(self) }
        // The delegate may have cancelled the task (a request body it refused): the connection is
        // closed and gone, and nothing more of it may be read.
        guard state == .awaitingHead, connection === conn else { return }
        // Bytes that arrived while the connection sat idle were handled by the pool; anything in the
        // input now is an early answer.
        if stream.input.count > 0 { originReadable() }
    }

    func failBeforeAttach(_ error: SessionError) {
        guard state == .waiting else { return }
        fail(error)
    }

    func originDrained() {
        if hasBody, !bodyFinished, state == .awaitingHead || state == .receivingBody {
            delegate?.taskBodyDrained(self)
        }
    }

    func originReadable() {
        if processing || paused { return }
        guard let conn = connection else { return }
        processing = true
        defer { processing = false }
        let input = conn.stream.input
        if input.count > 0 { responseStarted = true }
        while !paused, connection != nil {
            switch state {
            case .awaitingHead:
                if !parseHead(input) { return }
            case .receivingBody:
                if !deliverBody(input) { return }
            default:
                return
            }
        }
    }

    func originEvent(_ event: StreamEvent) {
        switch event {
        case .connected:
            return
        case .timeout:
            fail(.requestTimeout(upstream: origin.description))
        case .endOfStream, .error:
            if state == .receivingBody, framing == .untilClose, let c = connection {
                let n = c.stream.input.count
                if n > 0 { delegate?.task(self, didReceiveBody: c.stream.input, count: n) }
                if state == .receivingBody { complete(reusable: false) }
                return
            }
            if state == .awaitingHead, !responseStarted, reusedConnection, isIdempotent, !hasBody, !retried {
                // A pooled connection the origin had already closed: try once more on a fresh one.
                retried = true
                if let c = connection { connection = nil; pool?.release(c, reusable: false) }
                state = .waiting
                pool?.enqueue(self)
                return
            }
            fail(.prematureClose(upstream: origin.description))
        }
    }

    // MARK: - Response processing

    /// Returns whether to keep looping.
    private func parseHead(_ input: Buffer) -> Bool {
        let limits = HeadLimits(maxHeadBytes: session.configuration.maxResponseHeadBytes,
                                maxHeaderCount: session.configuration.maxResponseHeaderCount,
                                maxRequestLineBytes: session.configuration.maxResponseHeadBytes)
        let parsed: Int?
        do {
            parsed = try input.withContiguousPrefix(maxBytes: limits.maxHeadBytes) { bytes throws(HTTPWireError) in
                try ResponseParser.parse(bytes, into: &response, requestMethod: method, limits: limits)
            }
        } catch .headTooLarge {
            fail(.responseHeadTooLarge(upstream: origin.description))
            return false
        } catch {
            fail(.invalidResponse(upstream: origin.description, error))
            return false
        }
        guard let length = parsed else {
            if input.count >= limits.maxHeadBytes { fail(.responseHeadTooLarge(upstream: origin.description)) }
            return false
        }
        input.drain(length)
        response.removeFieldsNominatedByConnection()
        if response.status == 101 {
            state = .upgraded
            deadlines.remove(self)
            delegate?.task(self, didReceiveResponse: response)
            return false
        }
        if response.status == 407, let parent = session.parentCarrying(origin) {
            // The parent's challenge for its own credentials: not an answer to pass on, where a
            // client would take it for Larder's.
            fail(.parentRefused(parent: parent.key.description, request: "a request for http://\(origin)", status: 407))
            return false
        }
        if response.isInformational {
            if response.status == 100 { awaitingContinue = false }
            delegate?.task(self, didReceiveInformational: response)
            return state == .awaitingHead
        }
        state = .receivingBody
        if hasBody, awaitingContinue || !bodyFinished || connection.map({ $0.stream.output.count > 0 }) ?? false {
            answeredBeforeBodySent = true
        }
        framing = response.framing
        switch framing {
        case .contentLength(let n): remaining = n
        case .chunked: decoder = ChunkedDecoder()
        default: break
        }
        delegate?.task(self, didReceiveResponse: response)
        guard state == .receivingBody else { return false }
        switch framing {
        case .none, .contentLength(0):
            complete(reusable: response.keepAlive)
            return false
        default:
            return true
        }
    }

    /// Returns whether to keep looping.
    private func deliverBody(_ input: Buffer) -> Bool {
        switch framing {
        case .contentLength:
            let n = min(input.count, remaining)
            if n == 0 { return false }
            remaining -= n
            delegate?.task(self, didReceiveBody: input, count: n)
            guard state == .receivingBody else { return false }
            if remaining == 0 {
                complete(reusable: response.keepAlive && input.count == 0)
                return false
            }
            return true
        case .untilClose:
            let n = input.count
            if n == 0 { return false }
            delegate?.task(self, didReceiveBody: input, count: n)
            return state == .receivingBody
        case .chunked:
            return deliverChunked(input)
        case .none:
            complete(reusable: response.keepAlive)
            return false
        }
    }

    private func deliverChunked(_ input: Buffer) -> Bool {
        if input.count == 0 { return false }
        let step: ChunkedDecoder.Step
        do {
            step = try ChunkedFrontView.step(&decoder, input)
        } catch {
            fail(.invalidResponse(upstream: origin.description, error))
            return false
        }
        switch step {
        case .needMore:
            return false
        case .framing(let n):
            input.drain(n)
            return true
        case .data(let n):
            delegate?.task(self, didReceiveBody: input, count: n)
            return state == .receivingBody
        case .done(let n):
            input.drain(n)
            complete(reusable: response.keepAlive && input.count == 0)
            return false
        }
    }

    /// A body-less answer (HEAD, 204, 304) whose head announced a body: reused only when the
    /// configuration trusts origins to send none (a 204 announcing one is never trusted).
    private var announcedBodyWithheld: Bool {
        guard framing == .none, response.announcesBody else { return false }
        return response.status == 204 || !session.configuration.reuseAfterBodylessAnswers
    }

    private func complete(reusable: Bool) {
        guard state != .finished else { return }
        state = .finished
        deadlines.remove(self)
        if let c = connection {
            connection = nil
            var reuse = reusable && bodyFinished && !paused
            let unread = reuse ? c.stream.unreadInput : .nothing
            if unread == .endOfStream { reuse = false }
            if reuse, answeredBeforeBodySent || announcedBodyWithheld || unread == .bytes {
                // Bytes after a complete response (a body on a HEAD, 204 or 304 answer, or a
                // second response nobody asked for) or a request body the origin did not wait
                // for: the connection's framing cannot be trusted any more.
                reuse = false
                session.noteDiscardedUnsafe()
            }
            c.recheckBeforeReuse = framing == .none
            if reuse { swap(&response, &c.headSpace) }
            pool?.release(c, reusable: reuse)
        }
        finishedDelegate()?.task(self, didCompleteWith: nil)
    }

    private func fail(_ error: SessionError) {
        guard state != .finished else { return }
        let wasWaiting = state == .waiting
        state = .finished
        deadlines.remove(self)
        if let c = connection {
            connection = nil
            pool?.release(c, reusable: false)
        } else if wasWaiting {
            pool?.remove(self)
        }
        finishedDelegate()?.task(self, didCompleteWith: error)
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
