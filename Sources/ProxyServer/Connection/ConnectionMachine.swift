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

/// The steps an event can ask of a connection; see `ConnectionActions`.
struct ConnectionSteps: OptionSet {
    let rawValue: UInt32
    /// Let go of what answered the request (cancel, leave, unpin): `released`, of the kind the
    /// step names.
    static let releaseOrigin = ConnectionSteps(rawValue: 1 << 0)
    static let releaseStoredBody = ConnectionSteps(rawValue: 1 << 22)
    static let releaseFollower = ConnectionSteps(rawValue: 1 << 23)
    /// Cancel the CONNECT being opened: `released`.
    static let cancelOpener = ConnectionSteps(rawValue: 1 << 1)
    /// End with a reset.
    static let reset = ConnectionSteps(rawValue: 1 << 2)
    /// Write the access-log line (once) and let go of the cache's part in the request.
    static let endRequest = ConnectionSteps(rawValue: 1 << 3)
    static let cancelDeadline = ConnectionSteps(rawValue: 1 << 4)
    /// Run the timer for `seconds`.
    static let armDeadline = ConnectionSteps(rawValue: 1 << 5)
    /// Shut our side once flushed; read and drop for up to `seconds`.
    static let linger = ConnectionSteps(rawValue: 1 << 6)
    /// Stop reading; close once the output is written.
    static let flushThenClose = ConnectionSteps(rawValue: 1 << 7)
    /// The tunnel closes both streams and reports back (`tunnelClosed`).
    static let closeTunnel = ConnectionSteps(rawValue: 1 << 8)
    static let closeStream = ConnectionSteps(rawValue: 1 << 9)
    /// Tell the worker the connection is gone.
    static let closed = ConnectionSteps(rawValue: 1 << 10)
    static let disableReading = ConnectionSteps(rawValue: 1 << 11)
    static let enableReading = ConnectionSteps(rawValue: 1 << 12)
    /// Lingering: drop what the client sent.
    static let discardInput = ConnectionSteps(rawValue: 1 << 13)
    static let startTLS = ConnectionSteps(rawValue: 1 << 14)
    /// A head did not arrive in time: answer 408.
    static let answerTimeout = ConnectionSteps(rawValue: 1 << 15)
    /// Move the client's body on to the origin.
    static let pumpRequestBody = ConnectionSteps(rawValue: 1 << 16)
    /// The client's output fell to the low-water mark: the origin may be read again.
    static let clientCaughtUp = ConnectionSteps(rawValue: 1 << 17)
    static let sendStoredBody = ConnectionSteps(rawValue: 1 << 18)
    static let pollFollower = ConnectionSteps(rawValue: 1 << 19)
    /// Parse buffered request heads (the state is `.readingHead`).
    static let readRequests = ConnectionSteps(rawValue: 1 << 20)
    /// Decide where the current request goes.
    static let route = ConnectionSteps(rawValue: 1 << 21)

    /// Every step, in the order they are carried out.
    static let inOrder: [(ConnectionSteps, String)] = [
        (.releaseOrigin, "release(origin)"), (.releaseStoredBody, "release(storedBody)"),
        (.releaseFollower, "release(following)"), (.cancelOpener, "cancelOpener"), (.reset, "reset"), (.endRequest, "endRequest"),
        (.cancelDeadline, "cancelDeadline"), (.armDeadline, "armDeadline"), (.linger, "linger"),
        (.flushThenClose, "flushThenClose"), (.closeTunnel, "closeTunnel"), (.closeStream, "closeStream"),
        (.closed, "closed"), (.disableReading, "disableReading"), (.enableReading, "enableReading"),
        (.discardInput, "discardInput"), (.startTLS, "startTLS"), (.answerTimeout, "answerTimeout"),
        (.pumpRequestBody, "pumpRequestBody"), (.clientCaughtUp, "clientCaughtUp"),
        (.sendStoredBody, "sendStoredBody"), (.pollFollower, "pollFollower"), (.readRequests, "readRequests"),
        (.route, "route"),
    ]
}

/// What the connection is to do. An event's steps are carried out in the order
/// `ConnectionSteps.inOrder` lists them (which every transition is written for), on the state the
/// machine is in afterwards; the resources they act on are taken from that state, or from
/// `released` for what it just left.
///
/// Not generic, and holding resources as plain references: a value returned for every event must
/// not be copied and destroyed through run-time generic witnesses (they cost hundreds of
/// instructions per request).
struct ConnectionActions {
    var steps: ConnectionSteps = []
    /// For `armDeadline` and `linger`.
    var seconds = 0.0
    /// For the `release…` step: the exchange's resource; for `cancelOpener`: the opener.
    var released: AnyObject?

    mutating func insert(_ step: ConnectionSteps) { steps.insert(step) }

    mutating func arm(_ seconds: Double) {
        steps.insert(.armDeadline)
        self.seconds = seconds
    }

    mutating func linger(_ seconds: Double) {
        steps.insert(.linger)
        self.seconds = seconds
    }

    mutating func release<R>(_ exchange: Exchange<R>) {
        switch exchange {
        case .origin(let o):
            steps.insert(.releaseOrigin)
            released = o
        case .storedBody(let b):
            steps.insert(.releaseStoredBody)
            released = b
        case .following(let f):
            steps.insert(.releaseFollower)
            released = f
        }
    }

    mutating func cancel(_ opener: AnyObject) {
        steps.insert(.cancelOpener)
        released = opener
    }
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

    mutating func handle(_ event: ConnectionEvent<R>, _ levels: Levels) -> ConnectionActions {
        var a = ConnectionActions()
        switch event {
        case .opened(let refused):
            if refused {
                linger(Self.refusalLinger, &a)
            } else {
                state = .readingHead(.timed(forHead: true))
                a.arm(timing.head)
                a.insert(.enableReading)
            }
        case .clientReadable:
            switch state {
            case .readingHead: a.insert(.readRequests)
            case .exchanging(.origin) where context.bodyPending: a.insert(.pumpRequestBody)
            case .closing(.lingering): a.insert(.discardInput)
            case .exchanging, .routing, .connecting, .intercepting, .closing(.flushing): a.insert(.disableReading)
            case .tunnelling, .closed: break
            }
        case .clientDrained:
            switch state {
            case .intercepting where levels.output == 0: a.insert(.startTLS)
            case .closing(.flushing) where levels.output == 0: close(&a)
            case .readingHead(.afterFlush) where levels.output == 0: waitForHead(levels, &a)
            case .readingHead(.pausedForOutput):
                // The head timer starts again here: it may have fired while paused, or never run (the
                // pause began while waiting for a flush); the send timeout watched the client meanwhile.
                state = .readingHead(.timed(forHead: true))
                a.arm(timing.head)
                a.insert(.enableReading)
                a.insert(.readRequests)
            case .exchanging(.storedBody): a.insert(.sendStoredBody)
            case .exchanging(.following): a.insert(.pollFollower)
            case .exchanging(.origin) where levels.output <= timing.lowWater: a.insert(.clientCaughtUp)
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
            case .readingHead(.pausedForOutput):
                // The client is not reading its answers: the send timeout watches it, and the head
                // timer starts again once it has caught up (`clientDrained`).
                break
            case .readingHead:
                if levels.output > 0 {
                    // Answers are still going out: the send timeout watches the client meanwhile.
                    state = .readingHead(.afterFlush)
                } else if levels.input == 0 {
                    close(&a)  // idle, or never sent a byte: nothing to answer
                } else {
                    a.insert(.answerTimeout)
                }
            default:
                break
            }
        case .headParsed(let start):
            guard isReadingHead else { break }
            context.begin(start, draining: draining)
            state = .routing
            a.insert(.cancelDeadline)
            a.insert(.route)
        case .checkPending:
            a.insert(.disableReading)
        case .checkFinished:
            if case .routing = state { a.insert(.route) }
        case .answered:
            finish(levels, &a)
        case .refused:
            leaveExchange(&a)
            a.insert(.endRequest)
            linger(Self.rejectionLinger, &a)
        case .cut:
            a.insert(.reset)
            close(&a)
        case .originStarted(let o, let sendsBody):
            leaveExchange(&a)
            state = .exchanging(.origin(o))
            a.insert(sendsBody ? .enableReading : .disableReading)
        case .storedBodyStarted(let b):
            leaveExchange(&a)
            state = .exchanging(.storedBody(b))
            a.insert(.disableReading)
            a.insert(.sendStoredBody)
        case .followingStarted(let f):
            leaveExchange(&a)
            state = .exchanging(.following(f))
            a.insert(.disableReading)
            a.insert(.pollFollower)
        case .connectStarted(let opener):
            state = .connecting(opener)
            a.insert(.disableReading)
        case .tunnelStarted(let t):
            leaveExchange(&a)
            state = .tunnelling(t)
            a.insert(.cancelDeadline)
        case .tunnelClosed:
            // Logged now, with the bytes the tunnel carried.
            guard case .tunnelling = state else { break }
            state = .closed
            a.insert(.endRequest)
            a.insert(.closed)
        case .intercepted:
            state = .intercepting
            a.insert(.disableReading)
            a.insert(.endRequest)
        case .tlsStarted:
            state = .readingHead(.timed(forHead: true))
            context.keepAlive = true
            a.arm(timing.head)
            a.insert(.enableReading)
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
    mutating func pauseForOutput() -> ConnectionActions {
        var a = ConnectionActions()
        guard isReadingHead else { return a }
        state = .readingHead(.pausedForOutput)
        a.insert(.disableReading)
        return a
    }

    /// An answer's head is about to be written: whether it says the connection stays open. Not
    /// when the client still owes a body (it would be read as the next request), nor after a body
    /// delimited by closing the connection.
    mutating func answerKeepsAlive(closeDelimited: Bool) -> Bool {
        if closeDelimited || context.bodyPending { context.keepAlive = false }
        return context.keepAlive
    }

    /// Part of a head is in: the head timer runs, unless it already does.
    mutating func headIncomplete() -> ConnectionActions {
        var a = ConnectionActions()
        if case .readingHead(let wait) = state, wait != .timed(forHead: true) {
            state = .readingHead(.timed(forHead: true))
            a.arm(timing.head)
        }
        return a
    }

    // MARK: - Transitions shared by several events

    /// The answer is queued: read the next request, or close.
    private mutating func finish(_ levels: Levels, _ a: inout ConnectionActions) {
        leaveExchange(&a)
        a.insert(.endRequest)
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
        a.insert(.enableReading)
        if levels.input > 0 { a.insert(.readRequests) }
    }

    private mutating func waitForHead(_ levels: Levels, _ a: inout ConnectionActions) {
        if levels.input == 0, levels.output > 0 {
            state = .readingHead(.afterFlush)
        } else {
            let forHead = levels.input > 0
            state = .readingHead(.timed(forHead: forHead))
            a.arm(forHead ? timing.head : timing.idle)
        }
    }

    private mutating func leaveExchange(_ a: inout ConnectionActions) {
        if case .exchanging(let e) = state {
            state = .routing
            a.release(e)
        }
    }

    private mutating func flushThenClose(_ levels: Levels, _ a: inout ConnectionActions) {
        if levels.output == 0 {
            close(&a)
            return
        }
        state = .closing(.flushing)
        a.insert(.cancelDeadline)
        a.insert(.flushThenClose)
    }

    private mutating func linger(_ seconds: Double, _ a: inout ConnectionActions) {
        state = .closing(.lingering)
        a.linger(seconds)
    }

    private mutating func close(_ a: inout ConnectionActions) {
        switch state {
        case .closed:
            return
        case .tunnelling:
            // The tunnel closes both streams and reports back (`tunnelClosed`).
            a.insert(.closeTunnel)
            return
        case .exchanging(let e):
            a.release(e)
        case .connecting(let opener):
            a.cancel(opener)
        default:
            break
        }
        state = .closed
        a.insert(.endRequest)
        a.insert(.cancelDeadline)
        a.insert(.closeStream)
        a.insert(.closed)
    }
}
