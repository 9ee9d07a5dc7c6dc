import EventLoop
import HTTPWire
import Testing
@testable import ProxyServer

/// A client connection's life cycle without sockets: whole exchanges (hit, miss, upload,
/// revalidation, collapse, tunnel, interception, errors, timeouts, shutdown) driven event by event,
/// with the buffered byte counts set by hand and a clock stepped by hand to fire the one timer.
@Suite struct ConnectionMachineTests {
    final class Origin {}
    final class StoredBody {}
    final class Follower {}
    final class Opener {}
    final class Tunnel {}
    enum Fake: ConnectionResources {
        typealias Origin = ConnectionMachineTests.Origin
        typealias StoredBody = ConnectionMachineTests.StoredBody
        typealias Follower = ConnectionMachineTests.Follower
        typealias Opener = ConnectionMachineTests.Opener
        typealias Tunnel = ConnectionMachineTests.Tunnel
    }

    /// Runs a machine as the connection does, recording each event's actions by name.
    struct Driver {
        var machine = ConnectionMachine<Fake>(timing: .init(head: 10, idle: 60, lowWater: 256))
        var input = 0
        var output = 0
        let clock = ManualClock()
        /// When the armed timer fires, on the clock's monotonic seconds.
        var deadlineAt: Double?
        var requestsEnded = 0
        var closedReported = 0

        @discardableResult
        mutating func send(_ event: ConnectionEvent<Fake>) -> [String] {
            perform(machine.handle(event, Levels(input: input, output: output)))
        }

        mutating func perform(_ a: ConnectionActions) -> [String] {
            var names: [String] = []
            for (step, name) in ConnectionSteps.inOrder where a.steps.contains(step) {
                switch step {
                case .armDeadline, .linger:
                    names.append("\(name)(\(Int(a.seconds)))")
                    deadlineAt = clock.monotonic + a.seconds
                default:
                    names.append(name)
                }
                if step == .cancelDeadline || step == .closeStream { deadlineAt = nil }
                if step == .endRequest { requestsEnded += 1 }
                if step == .closed { closedReported += 1 }
            }
            return names
        }

        /// Steps the clock; fires the timer if it is due.
        @discardableResult
        mutating func advance(_ seconds: Double) -> [String] {
            clock.advance(by: seconds)
            guard let due = deadlineAt, clock.monotonic >= due else { return [] }
            deadlineAt = nil
            return send(.deadline)
        }

        mutating func open() {
            send(.opened(refused: false))
        }

        /// A GET head arrives and is parsed.
        @discardableResult
        mutating func head(keepAlive: Bool = true, body: RequestBody = .done) -> [String] {
            send(.headParsed(RequestStart(keepAlive: keepAlive, body: body, at: clock.monotonic)))
        }

        var state: String { Self.name(machine.state) }

        static func name(_ s: ConnectionState<Fake>) -> String {
            switch s {
            case .readingHead(.timed(let forHead)): forHead ? "head" : "idle"
            case .readingHead(.afterFlush): "afterFlush"
            case .readingHead(.pausedForOutput): "pausedForOutput"
            case .routing: "routing"
            case .exchanging(.origin): "origin"
            case .exchanging(.storedBody): "storedBody"
            case .exchanging(.following): "following"
            case .connecting: "connecting"
            case .intercepting: "intercepting"
            case .tunnelling: "tunnelling"
            case .closing(.flushing): "flushing"
            case .closing(.lingering): "lingering"
            case .closed: "closed"
            }
        }
    }

    static let closeActions = ["endRequest", "cancelDeadline", "closeStream", "closed"]

    @Test func anAcceptedConnectionWaitsForAHeadAndARefusedOneLingers() {
        var d = Driver()
        #expect(d.send(.opened(refused: false)) == ["armDeadline(10)", "enableReading"])
        #expect(d.state == "head")
        var refused = Driver()
        refused.output = 100
        #expect(refused.send(.opened(refused: true)) == ["linger(1)"])
        #expect(refused.state == "lingering")
        #expect(refused.send(.clientReadable) == ["discardInput"])
        #expect(refused.advance(1) == Self.closeActions)
        #expect(refused.closedReported == 1)
    }

    @Test func aHitFromMemoryThenTheIdleTimerStartsOnceTheAnswerIsWritten() {
        var d = Driver()
        d.open()
        d.input = 80
        #expect(d.send(.clientReadable) == ["readRequests"])
        d.input = 0
        #expect(d.head() == ["cancelDeadline", "route"])
        #expect(d.state == "routing")
        d.output = 5_000
        #expect(d.send(.answered) == ["endRequest", "enableReading"])
        #expect(d.state == "afterFlush")
        #expect(d.advance(120) == [], "no timer runs while the answer is being written")
        d.output = 0
        #expect(d.send(.clientDrained) == ["armDeadline(60)"])
        #expect(d.state == "idle")
        #expect(d.advance(59) == [])
        #expect(d.advance(1) == Self.closeActions)
        #expect(d.state == "closed")
        #expect(d.requestsEnded == 2, "ended once answered, and again (a no-op, the line is written once) at close")
    }

    @Test func aMissRelaysTheOriginAndResumesItWhenTheClientCatchesUp() {
        var d = Driver()
        d.open()
        d.head()
        let origin = Origin()
        #expect(d.send(.originStarted(origin, sendsBody: false)) == ["disableReading"])
        #expect(d.state == "origin")
        d.output = 2_000
        #expect(d.send(.clientDrained) == [], "still above the low-water mark")
        d.output = 256
        #expect(d.send(.clientDrained) == ["clientCaughtUp"])
        #expect(d.send(.clientReadable) == ["disableReading"], "no body owed: the next request waits")
        d.output = 0
        #expect(d.send(.answered) == ["release(origin)", "endRequest", "armDeadline(60)", "enableReading"])
        #expect(d.state == "idle")
    }

    @Test func anUploadIsPumpedUntilTheBodyIsInThenReadingStops() {
        var d = Driver()
        d.open()
        d.head(body: .contentLength(remaining: 10))
        let origin = Origin()
        #expect(d.send(.originStarted(origin, sendsBody: true)) == ["enableReading"])
        #expect(d.send(.clientReadable) == ["pumpRequestBody"])
        d.machine.context.body = .done
        #expect(d.send(.clientReadable) == ["disableReading"])
        #expect(d.send(.answered) == ["release(origin)", "endRequest", "armDeadline(60)", "enableReading"])
    }

    @Test func anAnswerBeforeTheBodyIsInClosesAfterLingering() {
        var d = Driver()
        d.open()
        d.head(body: .chunked)
        d.send(.originStarted(Origin(), sendsBody: true))
        d.output = 300
        #expect(d.send(.answered) == ["release(origin)", "endRequest", "linger(2)"])
        #expect(d.machine.context.keepAlive == false)
        d.input = 1_000
        #expect(d.send(.clientReadable) == ["discardInput"])
        #expect(d.advance(2) == Self.closeActions)
    }

    /// The machine alone decides what an answer's head says about the connection: the body the
    /// client still owes, a close-delimited body, the client's own wish and a shutdown all close it.
    @Test(arguments: [
        // (client keep-alive, body owed, close-delimited answer, shutdown) → keep-alive
        (true, false, false, false, true),
        (true, true, false, false, false),
        (true, false, true, false, false),
        (false, false, false, false, false),
        (true, false, false, true, false),
    ])
    func anAnswerKeepsTheConnectionOnlyWhenNothingForbidsIt(
        _ row: (clientKeepAlive: Bool, bodyOwed: Bool, closeDelimited: Bool, shutdown: Bool, keeps: Bool)
    ) {
        var d = Driver()
        d.open()
        d.head(keepAlive: row.clientKeepAlive, body: row.bodyOwed ? .contentLength(remaining: 10) : .done)
        if row.shutdown { d.send(.shutdown) }
        #expect(d.machine.answerKeepsAlive(closeDelimited: row.closeDelimited) == row.keeps)
        // Asked again (a second head, e.g. after a 1xx), the answer does not come back to life.
        #expect(d.machine.answerKeepsAlive(closeDelimited: false) == row.keeps)
        #expect(d.machine.context.keepAlive == row.keeps)
    }

    @Test func aClientThatLeavesMidUploadIsClosedAndItsOriginExchangeReleased() {
        var d = Driver()
        d.open()
        d.head(body: .contentLength(remaining: 1_000))
        d.send(.originStarted(Origin(), sendsBody: true))
        #expect(d.send(.clientEnded) == ["release(origin)"] + Self.closeActions)
        #expect(d.send(.close) == [], "closing twice does nothing")
        #expect(d.closedReported == 1)
    }

    @Test func aClientThatHalfClosesAfterItsRequestStillGetsTheAnswer() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.originStarted(Origin(), sendsBody: false))
        #expect(d.send(.clientEnded) == [])
        #expect(d.machine.context.keepAlive == false)
        d.output = 10
        #expect(d.send(.answered) == ["release(origin)", "endRequest", "cancelDeadline", "flushThenClose"])
        #expect(d.state == "flushing")
        d.output = 0
        #expect(d.send(.clientDrained) == Self.closeActions)
    }

    @Test func aRevalidationAnsweredFromAStoredBodyOnDisk() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.originStarted(Origin(), sendsBody: false))
        // The origin said unchanged: the stored body goes out, window by window.
        #expect(d.send(.storedBodyStarted(StoredBody())) == ["release(origin)", "disableReading", "sendStoredBody"])
        #expect(d.state == "storedBody")
        #expect(d.send(.clientDrained) == ["sendStoredBody"])
        #expect(d.send(.answered) == ["release(storedBody)", "endRequest", "armDeadline(60)", "enableReading"])
    }

    @Test func aHeadRevalidationThatFoundAChangeFetchesAgain() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.originStarted(Origin(), sendsBody: false))
        #expect(d.send(.originStarted(Origin(), sendsBody: false)) == ["release(origin)", "disableReading"])
        #expect(d.state == "origin")
    }

    @Test func aCollapsedFollowerReadsAsTheClientDrainsAndACutResetsTheConnection() {
        var d = Driver()
        d.open()
        d.head()
        #expect(d.send(.followingStarted(Follower())) == ["disableReading", "pollFollower"])
        #expect(d.state == "following")
        #expect(d.send(.clientDrained) == ["pollFollower"])
        #expect(d.send(.cut) == ["release(following)", "reset"] + Self.closeActions)
    }

    @Test func aFollowerWhoseResponseVariesFetchesAlone() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.followingStarted(Follower()))
        #expect(d.send(.originStarted(Origin(), sendsBody: false)) == ["release(following)", "disableReading"])
    }

    @Test func aTunnelOwnsTheConnectionUntilItCloses() {
        var d = Driver()
        d.open()
        d.head()
        #expect(d.send(.connectStarted(Opener())) == ["disableReading"])
        #expect(d.state == "connecting")
        #expect(d.send(.clientReadable) == ["disableReading"])
        #expect(d.send(.tunnelStarted(Tunnel())) == ["cancelDeadline"], "logged when it ends")
        #expect(d.state == "tunnelling")
        #expect(d.send(.clientReadable) == [])
        #expect(d.send(.close) == ["closeTunnel"], "the tunnel closes both streams and reports back")
        #expect(d.send(.tunnelClosed) == ["endRequest", "closed"])
        #expect(d.state == "closed")
    }

    @Test func aConnectThatFailsIsAnsweredThenClosed() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.connectStarted(Opener()))
        d.output = 200
        #expect(d.send(.closeAfterAnswer) == ["cancelDeadline", "flushThenClose"])
        d.output = 0
        #expect(d.send(.clientDrained) == Self.closeActions)
    }

    @Test func closingWhileConnectingCancelsTheOpener() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.connectStarted(Opener()))
        #expect(d.send(.clientFailed) == ["cancelOpener"] + Self.closeActions)
    }

    @Test func anInterceptedConnectStartsTLSOnceItsAnswerIsWritten() {
        var d = Driver()
        d.open()
        d.head()
        d.output = 39
        #expect(d.send(.intercepted) == ["endRequest", "disableReading"])
        #expect(d.send(.clientDrained) == [], "the answer is not all written yet")
        d.output = 0
        #expect(d.send(.clientDrained) == ["startTLS"])
        #expect(d.send(.tlsStarted) == ["armDeadline(10)", "enableReading"])
        #expect(d.state == "head")
    }

    @Test func aRefusedRequestIsAnsweredAndTheConnectionLingers() {
        var d = Driver()
        d.open()
        d.head(body: .chunked)
        d.send(.originStarted(Origin(), sendsBody: true))
        d.output = 100
        #expect(d.send(.refused) == ["release(origin)", "endRequest", "linger(2)"])
        #expect(d.state == "lingering")
        #expect(d.send(.clientDrained) == [], "a lingering connection closes on its timer or the client's close")
        #expect(d.send(.clientEnded) == Self.closeActions)
    }

    @Test func pipelinedRequestsAreReadOneAfterAnotherAndPauseWhileTheClientReadsNothing() {
        var d = Driver()
        d.open()
        d.head()
        d.input = 200
        d.output = 100
        #expect(d.send(.answered) == ["endRequest", "armDeadline(10)", "enableReading", "readRequests"])
        #expect(d.state == "head")
        #expect(d.perform(d.machine.pauseForOutput()) == ["disableReading"])
        #expect(d.state == "pausedForOutput")
        d.output = 0
        #expect(d.send(.clientDrained) == ["armDeadline(10)", "enableReading", "readRequests"])
        #expect(d.state == "head")
    }

    @Test func theHeadTimerFiringWhilePausedForOutputNeitherClosesNorLosesThePause() {
        var d = Driver()
        d.open()
        d.head()
        d.input = 200
        d.output = 2_000_000
        d.send(.answered)
        #expect(d.perform(d.machine.pauseForOutput()) == ["disableReading"])
        #expect(d.advance(10) == [], "the send timeout watches a client that reads nothing")
        #expect(d.state == "pausedForOutput")
        d.output = 200
        #expect(d.send(.clientDrained) == ["armDeadline(10)", "enableReading", "readRequests"])
    }

    @Test func aPauseThatBeganWhileWaitingForAFlushStillTimesTheNextHead() {
        var d = Driver()
        d.open()
        d.head()
        d.output = 2_000_000
        d.send(.answered)
        #expect(d.state == "afterFlush")
        d.input = 30  // part of the next head, while the answer is still queued
        #expect(d.perform(d.machine.pauseForOutput()) == ["disableReading"])
        d.output = 200
        #expect(d.send(.clientDrained) == ["armDeadline(10)", "enableReading", "readRequests"])
        #expect(d.perform(d.machine.headIncomplete()) == [], "the head timer runs")
        d.output = 0
        #expect(d.advance(10) == ["answerTimeout"])
    }

    @Test func aTunnelsCloseIsTakenOnlyFromATunnel() {
        var d = Driver()
        d.open()
        #expect(d.send(.tunnelClosed) == [])
        #expect(d.state == "head")
    }

    @Test func headTimeouts() {
        // Part of a head: 408 when the head time is up.
        var partial = Driver()
        partial.open()
        partial.input = 20
        #expect(partial.perform(partial.machine.headIncomplete()) == [], "the head timer already runs")
        #expect(partial.advance(10) == ["answerTimeout"])
        // Nothing at all: closed quietly.
        var silent = Driver()
        silent.open()
        #expect(silent.advance(10) == Self.closeActions)
        // Answers still being written when the timer fires: it restarts once they are.
        var slow = Driver()
        slow.open()
        slow.output = 1
        #expect(slow.advance(10) == [])
        #expect(slow.state == "afterFlush")
        slow.output = 0
        #expect(slow.send(.clientDrained) == ["armDeadline(60)"])
    }

    @Test func aHeadArrivingAfterTheIdleTimeStartedGetsTheHeadTimer() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.answered)
        #expect(d.state == "idle")
        #expect(d.perform(d.machine.headIncomplete()) == ["armDeadline(10)"])
        #expect(d.state == "head")
    }

    @Test func shutdownClosesIdleConnectionsNowAndBusyOnesAfterTheirAnswer() {
        var idle = Driver()
        idle.open()
        #expect(idle.send(.shutdown) == Self.closeActions)
        var busy = Driver()
        busy.open()
        busy.head()
        busy.send(.originStarted(Origin(), sendsBody: false))
        #expect(busy.send(.shutdown) == [])
        busy.output = 10
        #expect(busy.send(.answered) == ["release(origin)", "endRequest", "cancelDeadline", "flushThenClose"])
        // A request whose head arrives while draining is answered with Connection: close.
        var late = Driver()
        late.open()
        late.input = 30
        late.send(.shutdown)
        late.head(keepAlive: true)
        #expect(late.machine.context.keepAlive == false)
    }

    @Test func aRequestWithoutKeepAliveClosesAfterItsAnswer() {
        var d = Driver()
        d.open()
        d.head(keepAlive: false)
        #expect(d.send(.answered) == ["endRequest"] + Self.closeActions.dropFirst())
    }

    @Test func aBackgroundCheckPausesReadingAndRoutesAgain() {
        var d = Driver()
        d.open()
        d.head()
        #expect(d.send(.checkPending) == ["disableReading"])
        #expect(d.send(.clientReadable) == ["disableReading"])
        #expect(d.send(.checkFinished) == ["route"])
        d.send(.answered)
        #expect(d.send(.checkFinished) == [], "a late verdict is ignored once the request is answered")
    }

    @Test func theNextHeadReplacesTheWholeRequestContext() {
        var d = Driver()
        d.open()
        d.head(body: .contentLength(remaining: 5))
        d.machine.context.answer.started = true
        d.machine.context.upgrading = true
        d.machine.context.authVerdict = .valid
        d.machine.context.bodyForwarded = true
        d.machine.context.answer.log.status = 200
        d.machine.context.body = .done
        d.send(.answered)
        d.head()
        let c = d.machine.context
        #expect(!c.answer.started && !c.upgrading && c.authVerdict == nil && !c.bodyForwarded)
        #expect(c.answer.log.status == 0 && !c.answer.log.written && c.body == .done && c.cache == nil)
    }

    @Test func aHeadIsOnlyTakenWhileReadingHeads() {
        var d = Driver()
        d.open()
        d.head()
        d.send(.originStarted(Origin(), sendsBody: false))
        #expect(d.head() == [])
        #expect(d.state == "origin")
    }
}
