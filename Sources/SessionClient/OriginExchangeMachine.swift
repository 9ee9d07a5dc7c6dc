import EventLoop
import HTTPWire

/// One request/response exchange with an origin, as a pure state machine. `SessionTask` tells it
/// what happened (its methods are the events) and carries out what it answers (an `Action`); the
/// machine does no I/O and calls nobody. Every rule of the exchange is here: how the response is
/// framed and read, 1xx and 101 answers, when a stale pooled connection is tried again, and, in
/// `verdict(bytesAfterEnd:unread:)` alone, whether the connection may serve another request.
///
/// The events of the read path are `@inline(__always)`: inlined into `SessionTask.read`, the
/// action they answer folds into that loop's switch instead of being built and matched per event.
///
/// Events that come after the exchange ended (a delegate that cancelled from inside a callback)
/// answer `.none`; events that contradict the response's framing fail the exchange and close the
/// connection, never reuse it.
struct OriginExchangeMachine {
    /// What the request is, fixed when the task is made.
    struct Request: Equatable {
        var hasBody: Bool
        var isIdempotent: Bool
        /// The head carries `Expect: 100-continue`.
        var expectsContinue: Bool
        /// Sent to a parent proxy (http:// origin through a parent): a 407 is the parent's own.
        var throughParent: Bool
        /// `SessionConfiguration.reuseAfterBodylessAnswers`.
        var trustsBodylessAnswers: Bool
    }

    enum State: Equatable {
        /// Made, not resumed.
        case created
        /// In the pool's queue, without a connection.
        case waiting
        /// Head written (body maybe still going); `answerStarted` once any response byte came.
        case awaitingHead(answerStarted: Bool)
        /// The final head was parsed; its body is being read.
        case receivingBody(BodyProgress)
        /// The response ended; the connection's socket is being looked at (`unreadChecked`).
        case checkingUnread
        /// A 101 was delivered; the connection belongs to whoever takes it.
        case upgraded
        /// Completed, failed, cancelled or handed over: nothing more happens.
        case finished
    }

    enum BodyProgress: Equatable {
        /// No body by rule (HEAD, 204, 304) or framing: the head ends the response.
        case absent
        case contentLength(remaining: Int)
        case chunked
        case untilClose
        /// The origin closed a body delimited by closing: the last bytes are being delivered.
        case closedByOrigin
    }

    enum RequestBody: Equatable {
        case absent
        /// The delegate is still writing it.
        case streaming
        /// `finishBody()` was called: all of it is queued (not necessarily sent).
        case written
    }

    enum Action: Equatable {
        case none
        /// Start the resource deadline and wait in the pool's queue.
        case joinQueue
        /// A connection came for an exchange no longer waiting: back to the pool as it is.
        case returnConnection
        /// Write the request head; start reading unless paused; ask the delegate for the body.
        case writeHead(startReading: Bool, askForBody: Bool)
        case stopReading
        /// Read again, and process what is already buffered.
        case resumeReading
        case notifyBodyDrained
        /// Parse a head from the input: `responseHead`, `responseInvalid`, or nothing yet.
        case parseHead
        /// Step the chunked decoder: `chunkedBodyData`, `chunkedBodyEnded`, `readable` after
        /// framing bytes, `responseInvalid`.
        case decodeChunk
        /// Hand the 1xx head to the delegate, then `readable`.
        case deliverInformational
        /// Hand the final head to the delegate, then `headDelivered`.
        case deliverHead
        /// Hand the 101 head to the delegate; the resource deadline ends; reading stops.
        case deliverUpgrade
        /// Hand this many body bytes at the front of the input to the delegate, then `bodyDelivered`.
        case deliverBody(count: Int)
        /// Nothing cheaper refused reuse: look at the socket, then `unreadChecked`.
        case checkUnread
        /// The response is complete: release the connection as judged, tell the delegate.
        case complete(ConnectionVerdict)
        /// A pooled connection the origin had closed: close it, wait for a fresh one.
        case retryOnFreshConnection
        case fail(Failure, Cleanup)
        /// Cancelled by its owner: clean up, tell nobody.
        case abandon(Cleanup)
        /// The upgraded connection leaves the pool for the caller.
        case handOverUpgraded
    }

    /// What is left to undo when the exchange ends early.
    enum Cleanup: Equatable {
        case none
        case leaveQueue
        case closeConnection
    }

    enum Failure: Equatable {
        case offline
        /// The pool could not open a connection (the connector's error says why).
        case connectFailed
        case requestTimeout
        case resourceTimeout
        case prematureClose
        case invalidResponse(HTTPWireError)
        case responseHeadTooLarge
        /// The parent proxy wants other credentials (its 407 is not the origin's answer).
        case parentChallenge
    }

    let request: Request
    private(set) var state = State.created
    private(set) var requestBody: RequestBody
    /// The final answer came before the request body was surely all sent: the origin may not have
    /// read it, and what it left unread would be taken as the next request.
    private(set) var answeredBeforeBodySent = false
    /// `Expect: 100-continue` was sent and no `100 Continue` came (RFC 9110 §10.1.1).
    private(set) var awaitingContinue: Bool
    private(set) var paused = false
    private(set) var usedReusedConnection = false
    private(set) var retried = false
    /// The final response head, once parsed.
    private(set) var response = ResponseFacts(status: 0)

    init(_ request: Request) {
        self.request = request
        requestBody = request.hasBody ? .streaming : .absent
        awaitingContinue = request.hasBody && request.expectsContinue
    }

    var isFinished: Bool {
        if case .finished = state { return true }
        return false
    }

    /// Whether request body bytes may be written now.
    var acceptsRequestBody: Bool {
        requestBody == .streaming && isReadingResponse
    }

    private var isReadingResponse: Bool {
        switch state {
        case .awaitingHead, .receivingBody: return true
        default: return false
        }
    }

    /// What an early end leaves to undo in the current state.
    private var cleanup: Cleanup {
        switch state {
        case .created, .finished: return .none
        case .waiting: return .leaveQueue
        case .awaitingHead, .receivingBody, .checkingUnread, .upgraded: return .closeConnection
        }
    }

    // MARK: - Events from the owner

    mutating func resume(offline: Bool) -> Action {
        guard case .created = state else { return .none }
        if offline { return fail(.offline) }
        state = .waiting
        return .joinQueue
    }

    mutating func requestBodyWritten() {
        if requestBody == .streaming { requestBody = .written }
    }

    mutating func suspendReading() -> Action {
        paused = true
        return .stopReading
    }

    mutating func resumeReading() -> Action {
        guard paused else { return .none }
        paused = false
        return isReadingResponse ? .resumeReading : .none
    }

    /// The owner gives up: no delegate call follows.
    mutating func cancel() -> Action {
        guard !isFinished else { return .none }
        let undo = cleanup
        state = .finished
        return .abandon(undo)
    }

    mutating func takeUpgraded() -> Action {
        guard case .upgraded = state else { return .none }
        state = .finished
        return .handOverUpgraded
    }

    mutating func timedOut() -> Action { fail(.requestTimeout) }

    mutating func resourceDeadlinePassed() -> Action { fail(.resourceTimeout) }

    // MARK: - Events from the pool

    mutating func connectionAssigned(reused: Bool) -> Action {
        guard case .waiting = state else { return .returnConnection }
        usedReusedConnection = reused
        state = .awaitingHead(answerStarted: false)
        return .writeHead(startReading: !paused, askForBody: request.hasBody)
    }

    mutating func connectFailed() -> Action {
        guard case .waiting = state else { return .none }
        return fail(.connectFailed)
    }

    // MARK: - Events from the connection

    /// The request body's queued bytes were written out.
    func requestBytesDrained() -> Action {
        acceptsRequestBody ? .notifyBodyDrained : .none
    }

    /// `buffered` response bytes wait in the input: what to do with them.
    @inline(__always)
    mutating func readable(buffered: Int) -> Action {
        if paused { return .none }
        switch state {
        case .awaitingHead:
            guard buffered > 0 else { return .none }
            state = .awaitingHead(answerStarted: true)
            return .parseHead
        case .receivingBody(let progress):
            switch progress {
            case .contentLength(let remaining):
                let n = min(buffered, remaining)
                if n == 0 { return .none }
                state = .receivingBody(.contentLength(remaining: remaining - n))
                return .deliverBody(count: n)
            case .untilClose:
                return buffered > 0 ? .deliverBody(count: buffered) : .none
            case .chunked:
                return buffered > 0 ? .decodeChunk : .none
            case .absent:
                return endOfResponse(bytesAfterEnd: false)
            case .closedByOrigin:
                return .none
            }
        case .created, .waiting, .checkingUnread, .upgraded, .finished:
            return .none
        }
    }

    /// A head was parsed. `requestBytesQueued`: request bytes are still waiting to be written.
    @inline(__always)
    mutating func responseHead(_ head: ResponseFacts, requestBytesQueued: Bool) -> Action {
        switch state {
        case .awaitingHead: break
        case .finished: return .none
        default: return fail(.invalidResponse(.malformedStatusLine))
        }
        if head.status == 101 {
            state = .upgraded
            return .deliverUpgrade
        }
        if head.status == 407, request.throughParent { return fail(.parentChallenge) }
        if head.isInformational {
            if head.status == 100 { awaitingContinue = false }
            return .deliverInformational
        }
        response = head
        if request.hasBody, awaitingContinue || requestBody != .written || requestBytesQueued {
            answeredBeforeBodySent = true
        }
        state = .receivingBody(BodyProgress(head.framing))
        return .deliverHead
    }

    /// The parser refused the head, or a chunk's framing.
    mutating func responseInvalid(_ error: HTTPWireError) -> Action {
        fail(error == .headTooLarge ? .responseHeadTooLarge : .invalidResponse(error))
    }

    /// The delegate has the final head.
    @inline(__always)
    mutating func headDelivered(buffered: Int) -> Action {
        switch state {
        case .receivingBody(.absent), .receivingBody(.contentLength(remaining: 0)):
            return endOfResponse(bytesAfterEnd: false)
        default:
            return readable(buffered: buffered)
        }
    }

    /// The delegate took the body bytes; `buffered` are left in the input.
    @inline(__always)
    mutating func bodyDelivered(buffered: Int) -> Action {
        switch state {
        case .receivingBody(.contentLength(remaining: 0)):
            return endOfResponse(bytesAfterEnd: buffered > 0)
        case .receivingBody(.closedByOrigin):
            return endOfResponse(bytesAfterEnd: false)
        case .receivingBody(.absent):
            return fail(.invalidResponse(.invalidContentLength))
        default:
            return readable(buffered: buffered)
        }
    }

    /// The chunked decoder found `count` bytes of chunk data at the front of the input.
    mutating func chunkedBodyData(count: Int) -> Action {
        switch state {
        case .receivingBody(.chunked): return .deliverBody(count: count)
        case .finished: return .none
        default: return fail(.invalidResponse(.contentLengthWithTransferEncoding))
        }
    }

    /// The chunked decoder read the last chunk and the trailers; `buffered` bytes follow them.
    mutating func chunkedBodyEnded(buffered: Int) -> Action {
        switch state {
        case .receivingBody(.chunked): return endOfResponse(bytesAfterEnd: buffered > 0)
        case .finished: return .none
        default: return fail(.invalidResponse(.contentLengthWithTransferEncoding))
        }
    }

    /// The origin closed, or the socket failed; `buffered` bytes are still in the input.
    mutating func originClosed(buffered: Int) -> Action {
        switch state {
        case .finished:
            return .none
        case .receivingBody(.untilClose):
            // The close is the end of the body: what is buffered is its last part.
            state = .receivingBody(.closedByOrigin)
            return buffered > 0 ? .deliverBody(count: buffered) : endOfResponse(bytesAfterEnd: false)
        case .awaitingHead(answerStarted: false)
            where usedReusedConnection && request.isIdempotent && !request.hasBody && !retried && buffered == 0:
            // A pooled connection the origin had already closed: try once more on a fresh one.
            retried = true
            state = .waiting
            return .retryOnFreshConnection
        default:
            return fail(.prematureClose)
        }
    }

    /// What the socket held after the response (asked for by `.checkUnread`).
    @inline(__always)
    mutating func unreadChecked(_ unread: Stream.UnreadInput) -> Action {
        guard case .checkingUnread = state else { return .none }
        return finish(verdict(bytesAfterEnd: false, unread: unread)!)
    }

    // MARK: - The end

    @inline(__always)
    private mutating func endOfResponse(bytesAfterEnd: Bool) -> Action {
        if let verdict = verdict(bytesAfterEnd: bytesAfterEnd, unread: nil) { return finish(verdict) }
        state = .checkingUnread
        return .checkUnread
    }

    /// Whether the connection may serve another request: only when nothing is unread and nothing
    /// is owed. `unread` is nil until the socket was looked at, which costs a system call: the
    /// answer is nil while only that look could still refuse reuse.
    @inline(__always)
    private func verdict(bytesAfterEnd: Bool, unread: Stream.UnreadInput?) -> ConnectionVerdict? {
        if response.framing == .untilClose { return .close(.delimitedByClose) }
        if !response.keepAlive { return .close(.originClosing) }
        if bytesAfterEnd { return .close(.bytesAfterBody) }
        if requestBody == .streaming { return .close(.requestBodyUnfinished) }
        if paused { return .close(.readingPaused) }
        guard let unread else { return nil }
        if unread == .endOfStream { return .close(.originClosed) }
        // Unsafe from here: bytes the next request would read as its answer, or a request body
        // the origin may not have read.
        if answeredBeforeBodySent { return .close(.answeredBeforeBodySent) }
        if announcedBodyWithheld { return .close(.bodyAnnouncedButWithheld) }
        if unread == .bytes { return .close(.strayBytes) }
        return .reuse(rests: response.framing == .none)
    }

    /// A body-less answer (HEAD, 204, 304) whose head announced a body: trusted only when the
    /// configuration says so, and never for a 204.
    private var announcedBodyWithheld: Bool {
        guard response.framing == .none, response.announcesBody else { return false }
        return response.status == 204 || !request.trustsBodylessAnswers
    }

    private mutating func finish(_ verdict: ConnectionVerdict) -> Action {
        state = .finished
        return .complete(verdict)
    }

    private mutating func fail(_ failure: Failure) -> Action {
        guard !isFinished else { return .none }
        let undo = cleanup
        state = .finished
        return .fail(failure, undo)
    }
}

extension OriginExchangeMachine.BodyProgress {
    init(_ framing: BodyFraming) {
        switch framing {
        case .none: self = .absent
        case .contentLength(let n): self = .contentLength(remaining: n)
        case .chunked: self = .chunked
        case .untilClose: self = .untilClose
        }
    }
}

/// What the exchange needs of a response head, copied out of `ResponseHead`: no header storage.
struct ResponseFacts: Equatable {
    var status: Int
    var framing: BodyFraming
    var keepAlive: Bool
    /// The head announces a body, whether or not one follows (see `ResponseHead.announcesBody`).
    var announcesBody: Bool

    init(status: Int, framing: BodyFraming = .none, keepAlive: Bool = true, announcesBody: Bool = false) {
        self.status = status
        self.framing = framing
        self.keepAlive = keepAlive
        self.announcesBody = announcesBody
    }

    init(_ head: ResponseHead) {
        self.init(status: head.status, framing: head.framing, keepAlive: head.keepAlive,
                  announcesBody: head.announcesBody)
    }

    var isInformational: Bool { status >= 100 && status < 200 }
}

/// Whether a connection goes back to the pool after a complete response, and if not, why.
enum ConnectionVerdict: Equatable {
    /// Reusable. `rests`: the answer had no body by rule, the classic place for a broken origin to
    /// put one anyway; the pool lets the loop turn and looks at the socket again before reuse.
    case reuse(rests: Bool)
    case close(CloseReason)
}

enum CloseReason: Equatable {
    /// The body ran until the origin closed.
    case delimitedByClose
    /// `Connection: close`, or HTTP/1.0 without keep-alive.
    case originClosing
    /// Bytes followed the end of a body framed by length or chunks.
    case bytesAfterBody
    /// The delegate had not finished writing the request body.
    case requestBodyUnfinished
    /// The consumer paused reading.
    case readingPaused
    /// The origin closed right after the response.
    case originClosed
    /// The response came before the request body was all sent (or before `100 Continue`).
    case answeredBeforeBodySent
    /// A HEAD, 204 or 304 answer announced a body that is not trusted to stay away.
    case bodyAnnouncedButWithheld
    /// Unread bytes after a response that had to end where it did.
    case strayBytes

    /// Counted in `connectionsDiscardedUnsafe`: reusing it could have desynchronised requests and
    /// answers, not merely wasted a connection.
    var isUnsafe: Bool {
        switch self {
        case .answeredBeforeBodySent, .bodyAnnouncedButWithheld, .strayBytes: return true
        default: return false
        }
    }
}
