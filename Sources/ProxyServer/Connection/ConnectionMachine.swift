/// The resources a connection's states own. The live connection names its real ones; tests name
/// plain objects, so the machine runs without sockets, an event loop or an origin.
protocol ConnectionResources {
    /// A request forwarded to an origin, and its response on the way back.
    associatedtype Origin: AnyObject
    /// A stored body being sent from disk.
    associatedtype StoredBody: AnyObject
    /// A response shared from another request's fetch (request collapsing).
    associatedtype Follower: AnyObject
    /// A CONNECT's upstream connection being opened.
    associatedtype Opener: AnyObject
    /// Bytes relayed both ways (CONNECT, WebSocket).
    associatedtype Tunnel: AnyObject
}

/// Where a client connection is. Each state carries what it owns, so no combination the
/// connection cannot be in can be written down.
enum ConnectionState<R: ConnectionResources> {
    /// Waiting for (the rest of) a request head.
    case readingHead(HeadWait)
    /// A head was read; its destination is being decided, or a background check (credentials, a
    /// parent proxy's destination) is awaited.
    case routing
    /// Answering the request.
    case exchanging(Exchange<R>)
    /// CONNECT: the upstream connection is being opened.
    case connecting(R.Opener)
    /// An intercepted CONNECT's answer is going out; then TLS starts on the socket.
    case intercepting
    /// The tunnel owns both streams now.
    case tunnelling(R.Tunnel)
    case closing(Closing)
    case closed
}

/// How a connection waits for its next request head.
enum HeadWait: Equatable {
    /// The head timer (part of a head is in) or the idle timer runs.
    case timed(forHead: Bool)
    /// Answers are still being written: the timer starts once they are, so a slow reader keeps its tail.
    case afterFlush
    /// The client is not reading its answers: its further requests wait until it does.
    case pausedForOutput
}

/// What answers the current request.
enum Exchange<R: ConnectionResources> {
    case origin(R.Origin)
    case storedBody(R.StoredBody)
    case following(R.Follower)
}

enum Closing: Equatable {
    /// The queued output is written, then the connection closes.
    case flushing
    /// Our side is shut; what the client still sends is read and dropped until it closes too or
    /// the linger time passes, so it reads our answer instead of a reset.
    case lingering
}

/// What happened, as the connection tells its machine.
enum ConnectionEvent<R: ConnectionResources> {
    /// The connection was accepted; a refused one has its refusal queued.
    case opened(refused: Bool)
    case clientReadable
    /// The client read some of its answers (the output fell to the low-water mark).
    case clientDrained
    /// The client half-closed.
    case clientEnded
    /// A socket error, a send timeout, a failed TLS handshake: the connection is unusable.
    case clientFailed
    /// The connection's one timer fired.
    case deadline
    /// A head was parsed into the context's request.
    case headParsed(RequestStart)
    /// The route waits for a background check.
    case checkPending
    case checkFinished
    /// The whole answer is queued.
    case answered
    /// A request refused: its error is queued; the rest of the stream cannot be trusted.
    case refused
    /// The answer was cut short: the client must see a reset, not an end.
    case cut
    case originStarted(R.Origin, sendsBody: Bool)
    case storedBodyStarted(R.StoredBody)
    case followingStarted(R.Follower)
    case connectStarted(R.Opener)
    /// CONNECT or WebSocket: the tunnel runs from now on.
    case tunnelStarted(R.Tunnel)
    case tunnelClosed
    /// An intercepted CONNECT's answer is queued.
    case intercepted
    /// TLS started on the socket for an intercepted CONNECT.
    case tlsStarted
    /// An error is queued and nothing more will be: close once it is written.
    case closeAfterAnswer
    /// Server shutdown: idle connections close now, busy ones after their answer.
    case shutdown
    case close
}

/// What the request being started looks like to the connection's life cycle.
struct RequestStart {
    var keepAlive: Bool
    var body: RequestBody
    /// The clock's monotonic seconds when the head was complete.
    var at: Double
}

/// What the connection is to do, in order.
enum ConnectionAction<R: ConnectionResources> {
    /// Parse buffered request heads (the state is `.readingHead`).
    case readRequests
    /// Decide where the current request goes.
    case route
    case enableReading
    case disableReading
    /// Lingering: drop what the client sent.
    case discardInput
    case pumpRequestBody(R.Origin)
    /// The client's output fell to the low-water mark: the origin may be read again.
    case clientCaughtUp(R.Origin)
    case sendStoredBody(R.StoredBody)
    case pollFollower(R.Follower)
    case armDeadline(Double)
    case cancelDeadline
    /// Write the access-log line (once) and let go of the cache's part in the request.
    case endRequest
    /// Let go of what answered the request (cancel, leave, unpin).
    case release(Exchange<R>)
    case cancelOpener(R.Opener)
    case closeTunnel(R.Tunnel)
    /// Stop reading; close once the output is written.
    case flushThenClose
    /// Shut our side once flushed; read and drop for up to that many seconds.
    case linger(Double)
    case startTLS
    /// A head did not arrive in time: answer 408.
    case answerTimeout
    /// End with a reset.
    case reset
    case closeStream
    /// Tell the worker the connection is gone.
    case closed
}

/// The buffered bytes each way, when an event arrives.
struct Levels {
    var input: Int
    var output: Int
}

/// A client connection's life cycle: events in, actions out. Pure — no I/O, no clock — so each
/// transition is decided here, once, and tests drive whole exchanges by hand.
struct ConnectionMachine<R: ConnectionResources> {
    struct Timing {
        /// `limits.client_header_timeout`.
        var head: Double
        /// `limits.client_idle_timeout`.
        var idle: Double
        /// Output at or below which a paused origin read resumes.
        var lowWater: Int
    }

    private(set) var state: ConnectionState<R> = .readingHead(.timed(forHead: true))
    /// The current request's fields; replaced whole when the next head is parsed.
    var context = RequestContext()
    private(set) var draining = false
    let timing: Timing

    /// Seconds a refused connection lingers, and a refused request's connection.
    static var refusalLinger: Double { 1 }
    static var rejectionLinger: Double { 2 }

    init(timing: Timing) {
        self.timing = timing
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    var isReadingHead: Bool {
        if case .readingHead = state { return true }
        return false
    }

    /// A request's head is in and its exchange is not over (for shutdown messages).
    var isBusy: Bool {
        switch state {
        case .routing, .exchanging, .connecting: return true
        default: return false
        }
    }

    mutating func handle(_ event: ConnectionEvent<R>, _ levels: Levels) -> ActionList<R> {
        var a = ActionList<R>()
        switch event {
        case .opened(let refused):
            if refused {
                linger(Self.refusalLinger, &a)
            } else {
                state = .readingHead(.timed(forHead: true))
                a.append(.armDeadline(timing.head))
                a.append(.enableReading)
            }
        case .clientReadable:
            switch state {
            case .readingHead: a.append(.readRequests)
            case .exchanging(.origin(let o)) where context.bodyPending: a.append(.pumpRequestBody(o))
            case .closing(.lingering): a.append(.discardInput)
            case .exchanging, .routing, .connecting, .intercepting, .closing(.flushing): a.append(.disableReading)
            case .tunnelling, .closed: break
            }
        case .clientDrained:
            switch state {
            case .intercepting where levels.output == 0: a.append(.startTLS)
            case .closing(.flushing) where levels.output == 0: close(&a)
            case .readingHead(.afterFlush) where levels.output == 0: waitForHead(levels, &a)
            case .readingHead(.pausedForOutput):
                state = .readingHead(.timed(forHead: true))
                a.append(.enableReading)
                a.append(.readRequests)
            case .exchanging(.storedBody(let b)): a.append(.sendStoredBody(b))
            case .exchanging(.following(let f)): a.append(.pollFollower(f))
            case .exchanging(.origin(let o)) where levels.output <= timing.lowWater: a.append(.clientCaughtUp(o))
            default: break
            }
        case .clientEnded:
            switch state {
            case .exchanging where !context.bodyPending:
                // The client finished sending; its answer still goes out, then the connection closes.
                context.keepAlive = false
            case .readingHead where levels.output > 0:
                // A client may half-close right after its request (RFC 9112 §9.6).
                flushThenClose(levels, &a)
            default:
                close(&a)
            }
        case .clientFailed, .close:
            close(&a)
        case .deadline:
            switch state {
            case .closing:
                close(&a)
            case .readingHead:
                if levels.output > 0 {
                    // Answers are still going out: the send timeout watches the client meanwhile.
                    state = .readingHead(.afterFlush)
                } else if levels.input == 0 {
                    close(&a)  // idle, or never sent a byte: nothing to answer
                } else {
                    a.append(.answerTimeout)
                }
            default:
                break
            }
        case .headParsed(let start):
            guard isReadingHead else { break }
            context = RequestContext(request: context.request, start: start, draining: draining)
            state = .routing
            a.append(.cancelDeadline)
            a.append(.route)
        case .checkPending:
            a.append(.disableReading)
        case .checkFinished:
            if case .routing = state { a.append(.route) }
        case .answered:
            finish(levels, &a)
        case .refused:
            leaveExchange(&a)
            a.append(.endRequest)
            linger(Self.rejectionLinger, &a)
        case .cut:
            a.append(.reset)
            close(&a)
        case .originStarted(let o, let sendsBody):
            leaveExchange(&a)
            state = .exchanging(.origin(o))
            a.append(sendsBody ? .enableReading : .disableReading)
        case .storedBodyStarted(let b):
            leaveExchange(&a)
            state = .exchanging(.storedBody(b))
            a.append(.disableReading)
            a.append(.sendStoredBody(b))
        case .followingStarted(let f):
            leaveExchange(&a)
            state = .exchanging(.following(f))
            a.append(.disableReading)
            a.append(.pollFollower(f))
        case .connectStarted(let opener):
            state = .connecting(opener)
            a.append(.disableReading)
        case .tunnelStarted(let t):
            leaveExchange(&a)
            state = .tunnelling(t)
            a.append(.endRequest)
            a.append(.cancelDeadline)
        case .tunnelClosed:
            state = .closed
            a.append(.closed)
        case .intercepted:
            state = .intercepting
            a.append(.disableReading)
            a.append(.endRequest)
        case .tlsStarted:
            state = .readingHead(.timed(forHead: true))
            context.keepAlive = true
            a.append(.armDeadline(timing.head))
            a.append(.enableReading)
        case .closeAfterAnswer:
            leaveExchange(&a)
            flushThenClose(levels, &a)
        case .shutdown:
            draining = true
            context.keepAlive = false
            // Only an idle connection goes now; an answer being written finishes first.
            if isReadingHead, levels.input == 0 { flushThenClose(levels, &a) }
        }
        return a
    }

    /// The client reads no more answers: stop reading its requests until it does.
    mutating func pauseForOutput() -> ActionList<R> {
        var a = ActionList<R>()
        guard isReadingHead else { return a }
        state = .readingHead(.pausedForOutput)
        a.append(.disableReading)
        return a
    }

    /// Part of a head is in: the head timer runs, unless it already does.
    mutating func headIncomplete() -> ActionList<R> {
        var a = ActionList<R>()
        if case .readingHead(let wait) = state, wait != .timed(forHead: true) {
            state = .readingHead(.timed(forHead: true))
            a.append(.armDeadline(timing.head))
        }
        return a
    }

    // MARK: - Transitions shared by several events

    /// The answer is queued: read the next request, or close.
    private mutating func finish(_ levels: Levels, _ a: inout ActionList<R>) {
        leaveExchange(&a)
        a.append(.endRequest)
        if context.bodyPending {
            // A body the client still owes would be read as its next request.
            context.keepAlive = false
            linger(Self.rejectionLinger, &a)
            return
        }
        guard context.keepAlive, !draining else {
            flushThenClose(levels, &a)
            return
        }
        waitForHead(levels, &a)
        a.append(.enableReading)
        if levels.input > 0 { a.append(.readRequests) }
    }

    private mutating func waitForHead(_ levels: Levels, _ a: inout ActionList<R>) {
        if levels.input == 0, levels.output > 0 {
            state = .readingHead(.afterFlush)
        } else {
            let forHead = levels.input > 0
            state = .readingHead(.timed(forHead: forHead))
            a.append(.armDeadline(forHead ? timing.head : timing.idle))
        }
    }

    private mutating func leaveExchange(_ a: inout ActionList<R>) {
        if case .exchanging(let e) = state {
            state = .routing
            a.append(.release(e))
        }
    }

    private mutating func flushThenClose(_ levels: Levels, _ a: inout ActionList<R>) {
        if levels.output == 0 {
            close(&a)
            return
        }
        state = .closing(.flushing)
        a.append(.cancelDeadline)
        a.append(.flushThenClose)
    }

    private mutating func linger(_ seconds: Double, _ a: inout ActionList<R>) {
        state = .closing(.lingering)
        a.append(.linger(seconds))
    }

    private mutating func close(_ a: inout ActionList<R>) {
        switch state {
        case .closed:
            return
        case .tunnelling(let t):
            // The tunnel closes both streams and reports back (`tunnelClosed`).
            a.append(.closeTunnel(t))
            return
        case .exchanging(let e):
            a.append(.release(e))
        case .connecting(let opener):
            a.append(.cancelOpener(opener))
        default:
            break
        }
        state = .closed
        a.append(.endRequest)
        a.append(.cancelDeadline)
        a.append(.closeStream)
        a.append(.closed)
    }
}

/// A few actions, kept inline: an event's actions cost no allocation.
struct ActionList<R: ConnectionResources> {
    private var items: (ConnectionAction<R>?, ConnectionAction<R>?, ConnectionAction<R>?, ConnectionAction<R>?,
                        ConnectionAction<R>?, ConnectionAction<R>?, ConnectionAction<R>?, ConnectionAction<R>?)
        = (nil, nil, nil, nil, nil, nil, nil, nil)
    private(set) var count = 0

    mutating func append(_ action: ConnectionAction<R>) {
        switch count {
        case 0: items.0 = action
        case 1: items.1 = action
        case 2: items.2 = action
        case 3: items.3 = action
        case 4: items.4 = action
        case 5: items.5 = action
        case 6: items.6 = action
        case 7: items.7 = action
        default: preconditionFailure("more than eight actions for one event")
        }
        count += 1
    }

    subscript(i: Int) -> ConnectionAction<R> {
        switch i {
        case 0: return items.0!
        case 1: return items.1!
        case 2: return items.2!
        case 3: return items.3!
        case 4: return items.4!
        case 5: return items.5!
        case 6: return items.6!
        default: return items.7!
        }
    }
}
