import EventLoop
import HTTPWire
import Testing
@testable import SessionClient

/// `OriginExchangeMachine` driven without sockets: each scenario is a list of events, each with the
/// action the machine must answer.
@Suite struct OriginExchangeMachineTests {
    typealias Machine = OriginExchangeMachine
    typealias Action = Machine.Action

    /// One event, as `SessionTask` would feed it.
    enum Event: Sendable {
        case resume, resumeOffline
        case assigned(reused: Bool)
        case connectFailed
        case bodyWritten, drained
        case suspend, resumeReading
        case readable(Int)
        case head(ResponseFacts, bytesQueued: Bool)
        case invalid(HTTPWireError)
        case headDelivered(Int)
        case bodyDelivered(Int)
        case chunkData(Int)
        case chunkEnd(Int)
        case closed(Int)
        case unread(Stream.UnreadInput)
        case timeout, deadline, cancel, takeUpgraded

        static func head(_ facts: ResponseFacts) -> Event { .head(facts, bytesQueued: false) }
    }

    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var request = Machine.Request(hasBody: false, isIdempotent: true, expectsContinue: false, throughParent: false,
                                      trustsBodylessAnswers: true)
        var steps: [(Event, Action)]
        var testDescription: String { name }
    }

    static func apply(_ event: Event, to m: inout Machine) -> Action {
        switch event {
        case .resume: return m.resume(offline: false)
        case .resumeOffline: return m.resume(offline: true)
        case .assigned(let reused): return m.connectionAssigned(reused: reused)
        case .connectFailed: return m.connectFailed()
        case .bodyWritten: m.requestBodyWritten(); return .none
        case .drained: return m.requestBytesDrained()
        case .suspend: return m.suspendReading()
        case .resumeReading: return m.resumeReading()
        case .readable(let n): return m.readable(buffered: n)
        case .head(let facts, let queued): return m.responseHead(facts, requestBytesQueued: queued)
        case .invalid(let e): return m.responseInvalid(e)
        case .headDelivered(let n): return m.headDelivered(buffered: n)
        case .bodyDelivered(let n): return m.bodyDelivered(buffered: n)
        case .chunkData(let n): return m.chunkedBodyData(count: n)
        case .chunkEnd(let n): return m.chunkedBodyEnded(buffered: n)
        case .closed(let n): return m.originClosed(buffered: n)
        case .unread(let u): return m.unreadChecked(u)
        case .timeout: return m.timedOut()
        case .deadline: return m.resourceDeadlinePassed()
        case .cancel: return m.cancel()
        case .takeUpgraded: return m.takeUpgraded()
        }
    }

    // MARK: - Building blocks

    static let ok5 = ResponseFacts(status: 200, framing: .contentLength(5))
    static let chunked = ResponseFacts(status: 200, framing: .chunked)
    static let untilClose = ResponseFacts(status: 200, framing: .untilClose, keepAlive: false)
    static let noContent = ResponseFacts(status: 204)
    static let notModified = ResponseFacts(status: 304)
    static let empty = ResponseFacts(status: 200, framing: .contentLength(0))

    /// Resumed and given a fresh connection; the request has no body.
    static let sent: [(Event, Action)] = [
        (.resume, .joinQueue),
        (.assigned(reused: false), .writeHead(startReading: true, askForBody: false)),
    ]
    /// The same, on a pooled connection.
    static let sentOnReused: [(Event, Action)] = [
        (.resume, .joinQueue),
        (.assigned(reused: true), .writeHead(startReading: true, askForBody: false)),
    ]
    /// Resumed with a body; the delegate is asked for it.
    static let sentWithBody: [(Event, Action)] = [
        (.resume, .joinQueue),
        (.assigned(reused: false), .writeHead(startReading: true, askForBody: true)),
    ]
    static func headRead(_ facts: ResponseFacts, queued: Bool = false) -> [(Event, Action)] {
        [(.readable(64), .parseHead), (.head(facts, bytesQueued: queued), .deliverHead)]
    }
    static let withBody = Machine.Request(hasBody: true, isIdempotent: false, expectsContinue: false, throughParent: false,
                                          trustsBodylessAnswers: true)
    static let expectingContinue = Machine.Request(hasBody: true, isIdempotent: false, expectsContinue: true,
                                                   throughParent: false, trustsBodylessAnswers: true)
    static let cautious = Machine.Request(hasBody: false, isIdempotent: true, expectsContinue: false, throughParent: false,
                                          trustsBodylessAnswers: false)
    static let viaParent = Machine.Request(hasBody: false, isIdempotent: true, expectsContinue: false, throughParent: true,
                                           trustsBodylessAnswers: true)

    static func close(_ reason: CloseReason) -> Action { .complete(.close(reason)) }

    // MARK: - Framing and reuse

    static let framing: [Scenario] = [
        Scenario(name: "Content-Length body in one read, connection reused",
                 steps: sent + headRead(ok5) + [
                    (.headDelivered(5), .deliverBody(count: 5)),
                    (.bodyDelivered(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: false))),
                 ]),
        Scenario(name: "Content-Length body in pieces",
                 steps: sent + headRead(ok5) + [
                    (.headDelivered(0), .none),
                    (.readable(3), .deliverBody(count: 3)),
                    (.bodyDelivered(0), .none),
                    (.readable(2), .deliverBody(count: 2)),
                    (.bodyDelivered(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: false))),
                 ]),
        Scenario(name: "Content-Length: 0 ends with the head, no rest",
                 steps: sent + headRead(empty) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: false))),
                 ]),
        Scenario(name: "chunked body, framing, data, last chunk",
                 steps: sent + headRead(chunked) + [
                    (.headDelivered(20), .decodeChunk),
                    (.readable(17), .decodeChunk),          // after a chunk-size line
                    (.chunkData(5), .deliverBody(count: 5)),
                    (.bodyDelivered(12), .decodeChunk),
                    (.chunkEnd(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: false))),
                 ]),
        Scenario(name: "chunked body waits for more bytes",
                 steps: sent + headRead(chunked) + [
                    (.headDelivered(0), .none),
                    (.readable(0), .none),
                    (.readable(3), .decodeChunk),
                 ]),
        Scenario(name: "body delimited by close: delivered up to the close, never reused",
                 steps: sent + headRead(untilClose) + [
                    (.headDelivered(4), .deliverBody(count: 4)),
                    (.bodyDelivered(0), .none),
                    (.closed(3), .deliverBody(count: 3)),
                    (.bodyDelivered(0), close(.delimitedByClose)),
                 ]),
        Scenario(name: "body delimited by close ends with nothing buffered",
                 steps: sent + headRead(untilClose) + [
                    (.headDelivered(0), .none),
                    (.closed(0), close(.delimitedByClose)),
                 ]),
        Scenario(name: "delimited by close even when the origin said keep-alive",
                 steps: sent + headRead(ResponseFacts(status: 200, framing: .untilClose)) + [
                    (.headDelivered(0), .none),
                    (.closed(0), close(.delimitedByClose)),
                 ]),
        Scenario(name: "304 ends with the head and rests before reuse",
                 steps: sent + headRead(notModified) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: true))),
                 ]),
        Scenario(name: "HEAD answer announcing a body is trusted when configured",
                 steps: sent + headRead(ResponseFacts(status: 200, announcesBody: true)) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: true))),
                 ]),
        Scenario(name: "1xx heads go to the delegate, the final one follows",
                 steps: sent + [
                    (.readable(80), .parseHead),
                    (.head(ResponseFacts(status: 103)), .deliverInformational),
                    (.readable(40), .parseHead),
                    (.head(ok5), .deliverHead),
                    (.headDelivered(5), .deliverBody(count: 5)),
                    (.bodyDelivered(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: false))),
                 ]),
        Scenario(name: "100 Continue before the final answer: the body was awaited, reuse",
                 request: expectingContinue,
                 steps: sentWithBody + [
                    (.readable(25), .parseHead),
                    (.head(ResponseFacts(status: 100)), .deliverInformational),
                    (.drained, .notifyBodyDrained),
                    (.bodyWritten, .none),
                    (.drained, .none),
                    (.readable(40), .parseHead),
                    (.head(empty), .deliverHead),
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), .complete(.reuse(rests: false))),
                 ]),
        Scenario(name: "101 hands the connection over",
                 steps: sent + [
                    (.readable(60), .parseHead),
                    (.head(ResponseFacts(status: 101)), .deliverUpgrade),
                    (.readable(10), .none),
                    (.takeUpgraded, .handOverUpgraded),
                    (.takeUpgraded, .none),
                    (.closed(0), .none),
                 ]),
        Scenario(name: "the origin closing an upgraded connection not yet taken fails the exchange",
                 steps: sent + [
                    (.readable(60), .parseHead),
                    (.head(ResponseFacts(status: 101)), .deliverUpgrade),
                    (.closed(0), .fail(.prematureClose, .closeConnection)),
                 ]),
        Scenario(name: "a parent's 407 is refused, not passed on",
                 request: viaParent,
                 steps: sent + [
                    (.readable(60), .parseHead),
                    (.head(ResponseFacts(status: 407, framing: .contentLength(0))), .fail(.parentChallenge, .closeConnection)),
                 ]),
        Scenario(name: "an origin's 407 is an answer like any other",
                 steps: sent + headRead(ResponseFacts(status: 407, framing: .contentLength(0))) + [
                    (.headDelivered(0), .checkUnread),
                 ]),
    ]

    // MARK: - Reuse refused, one reason each

    static let refusals: [Scenario] = [
        Scenario(name: "Connection: close",
                 steps: sent + headRead(ResponseFacts(status: 200, framing: .contentLength(5), keepAlive: false)) + [
                    (.headDelivered(5), .deliverBody(count: 5)),
                    (.bodyDelivered(0), close(.originClosing)),
                 ]),
        Scenario(name: "bytes after a Content-Length body",
                 steps: sent + headRead(ok5) + [
                    (.headDelivered(12), .deliverBody(count: 5)),
                    (.bodyDelivered(7), close(.bytesAfterBody)),
                 ]),
        Scenario(name: "bytes after the last chunk",
                 steps: sent + headRead(chunked) + [
                    (.headDelivered(9), .decodeChunk),
                    (.chunkEnd(4), close(.bytesAfterBody)),
                 ]),
        Scenario(name: "request body not finished by the delegate",
                 request: withBody,
                 steps: sentWithBody + headRead(empty) + [
                    (.headDelivered(0), close(.requestBodyUnfinished)),
                 ]),
        Scenario(name: "reading paused by the consumer",
                 steps: sent + headRead(ok5) + [
                    (.headDelivered(0), .none),
                    (.readable(5), .deliverBody(count: 5)),
                    (.suspend, .stopReading),
                    (.bodyDelivered(0), close(.readingPaused)),
                 ]),
        Scenario(name: "the origin closed behind the response",
                 steps: sent + headRead(ok5) + [
                    (.headDelivered(5), .deliverBody(count: 5)),
                    (.bodyDelivered(0), .checkUnread),
                    (.unread(.endOfStream), close(.originClosed)),
                 ]),
        Scenario(name: "answer before the request body was written (body queued, not sent)",
                 request: withBody,
                 steps: sentWithBody + [(.bodyWritten, .none)] + headRead(empty, queued: true) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), close(.answeredBeforeBodySent)),
                 ]),
        Scenario(name: "final answer without 100 Continue",
                 request: expectingContinue,
                 steps: sentWithBody + [(.bodyWritten, .none)] + headRead(empty) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), close(.answeredBeforeBodySent)),
                 ]),
        Scenario(name: "204 announcing a body is never trusted",
                 steps: sent + headRead(ResponseFacts(status: 204, announcesBody: true)) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), close(.bodyAnnouncedButWithheld)),
                 ]),
        Scenario(name: "304 announcing a body, when bodyless answers are not trusted",
                 request: cautious,
                 steps: sent + headRead(ResponseFacts(status: 304, announcesBody: true)) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.nothing), close(.bodyAnnouncedButWithheld)),
                 ]),
        Scenario(name: "bytes after a 204",
                 steps: sent + headRead(noContent) + [
                    (.headDelivered(7), .checkUnread),
                    (.unread(.bytes), close(.strayBytes)),
                 ]),
        Scenario(name: "bytes after a 304",
                 steps: sent + headRead(notModified) + [
                    (.headDelivered(0), .checkUnread),
                    (.unread(.bytes), close(.strayBytes)),
                 ]),
        Scenario(name: "bytes after a HEAD answer announcing a body",
                 steps: sent + headRead(ResponseFacts(status: 200, announcesBody: true)) + [
                    (.headDelivered(30), .checkUnread),
                    (.unread(.bytes), close(.strayBytes)),
                 ]),
        Scenario(name: "bytes after Content-Length: 0 (no rest, but looked at)",
                 steps: sent + headRead(empty) + [
                    (.headDelivered(3), .checkUnread),
                    (.unread(.bytes), close(.strayBytes)),
                 ]),
    ]

    // MARK: - Failures, hostile sequences, the owner's calls

    static let failures: [Scenario] = [
        Scenario(name: "resumed while offline", steps: [(.resumeOffline, .fail(.offline, .none)), (.resume, .none)]),
        Scenario(name: "resumed twice", steps: [(.resume, .joinQueue), (.resume, .none)]),
        Scenario(name: "connect failed while waiting",
                 steps: [(.resume, .joinQueue), (.connectFailed, .fail(.connectFailed, .leaveQueue)),
                         (.assigned(reused: false), .returnConnection)]),
        Scenario(name: "cancelled before resuming", steps: [(.cancel, .abandon(.none)), (.resume, .none)]),
        Scenario(name: "cancelled while waiting, then given a connection",
                 steps: [(.resume, .joinQueue), (.cancel, .abandon(.leaveQueue)), (.assigned(reused: true), .returnConnection)]),
        Scenario(name: "cancelled by the delegate mid-body: later events are ignored",
                 steps: sent + headRead(ok5) + [
                    (.headDelivered(3), .deliverBody(count: 3)),
                    (.cancel, .abandon(.closeConnection)),
                    (.bodyDelivered(0), .none),
                    (.readable(2), .none),
                    (.closed(0), .none),
                    (.timeout, .none),
                    (.cancel, .none),
                 ]),
        Scenario(name: "request timeout while waiting for the head",
                 steps: sent + [(.timeout, .fail(.requestTimeout, .closeConnection)), (.readable(10), .none)]),
        Scenario(name: "resource deadline while waiting in the queue",
                 steps: [(.resume, .joinQueue), (.deadline, .fail(.resourceTimeout, .leaveQueue))]),
        Scenario(name: "resource deadline mid-body",
                 steps: sent + headRead(ok5) + [(.headDelivered(0), .none), (.deadline, .fail(.resourceTimeout, .closeConnection))]),
        Scenario(name: "unparsable head",
                 steps: sent + [(.readable(9), .parseHead), (.invalid(.malformedStatusLine),
                                                              .fail(.invalidResponse(.malformedStatusLine), .closeConnection))]),
        Scenario(name: "head too large",
                 steps: sent + [(.readable(9), .parseHead), (.invalid(.headTooLarge), .fail(.responseHeadTooLarge, .closeConnection))]),
        Scenario(name: "broken chunk framing",
                 steps: sent + headRead(chunked) + [(.headDelivered(4), .decodeChunk),
                                                    (.invalid(.invalidChunkSize), .fail(.invalidResponse(.invalidChunkSize), .closeConnection))]),
        Scenario(name: "EOF before the head on a fresh connection",
                 steps: sent + [(.closed(0), .fail(.prematureClose, .closeConnection))]),
        Scenario(name: "EOF mid-head",
                 steps: sentOnReused + [(.readable(9), .parseHead), (.closed(9), .fail(.prematureClose, .closeConnection))]),
        Scenario(name: "EOF mid Content-Length body",
                 steps: sent + headRead(ok5) + [(.headDelivered(2), .deliverBody(count: 2)), (.bodyDelivered(0), .none),
                                                (.closed(0), .fail(.prematureClose, .closeConnection))]),
        Scenario(name: "EOF mid chunked body",
                 steps: sent + headRead(chunked) + [(.headDelivered(0), .none), (.closed(0), .fail(.prematureClose, .closeConnection))]),
        Scenario(name: "stale pooled connection: retried once on a fresh one, then fails",
                 steps: sentOnReused + [
                    (.closed(0), .retryOnFreshConnection),
                    (.assigned(reused: true), .writeHead(startReading: true, askForBody: false)),
                    (.closed(0), .fail(.prematureClose, .closeConnection)),
                 ]),
        Scenario(name: "stale pooled connection with a request body: not retried",
                 request: Machine.Request(hasBody: true, isIdempotent: true, expectsContinue: false, throughParent: false,
                                          trustsBodylessAnswers: true),
                 steps: [(.resume, .joinQueue), (.assigned(reused: true), .writeHead(startReading: true, askForBody: true)),
                         (.closed(0), .fail(.prematureClose, .closeConnection))]),
        Scenario(name: "stale pooled connection, request not idempotent: not retried",
                 request: Machine.Request(hasBody: false, isIdempotent: false, expectsContinue: false, throughParent: false,
                                          trustsBodylessAnswers: true),
                 steps: sentOnReused + [(.closed(0), .fail(.prematureClose, .closeConnection))]),
        Scenario(name: "a chunked end while a Content-Length body is read",
                 steps: sent + headRead(ok5) + [(.headDelivered(0), .none),
                                                (.chunkEnd(0), .fail(.invalidResponse(.contentLengthWithTransferEncoding), .closeConnection))]),
        Scenario(name: "chunk data while a Content-Length body is read",
                 steps: sent + headRead(ok5) + [(.headDelivered(0), .none),
                                                (.chunkData(3), .fail(.invalidResponse(.contentLengthWithTransferEncoding), .closeConnection))]),
        Scenario(name: "a chunked end before any head",
                 steps: sent + [(.chunkEnd(0), .fail(.invalidResponse(.contentLengthWithTransferEncoding), .closeConnection))]),
        Scenario(name: "body bytes reported delivered for a bodyless answer",
                 steps: sent + headRead(notModified) + [(.bodyDelivered(0), .fail(.invalidResponse(.invalidContentLength), .closeConnection))]),
        Scenario(name: "a second head where the body should be",
                 steps: sent + headRead(ok5) + [(.headDelivered(0), .none),
                                                (.head(ok5), .fail(.invalidResponse(.malformedStatusLine), .closeConnection))]),
        Scenario(name: "more bytes than Content-Length announced: only its bytes are body",
                 steps: sent + headRead(ok5) + [(.headDelivered(0), .none), (.readable(9), .deliverBody(count: 5)),
                                                (.bodyDelivered(4), close(.bytesAfterBody))]),
        Scenario(name: "paused: nothing is read until resumed",
                 steps: sent + headRead(ok5) + [
                    (.suspend, .stopReading),
                    (.headDelivered(5), .none),
                    (.readable(5), .none),
                    (.resumeReading, .resumeReading),
                    (.resumeReading, .none),
                    (.readable(5), .deliverBody(count: 5)),
                 ]),
        Scenario(name: "paused before the connection came: it is not read",
                 steps: [(.resume, .joinQueue), (.suspend, .stopReading),
                         (.assigned(reused: false), .writeHead(startReading: false, askForBody: false)),
                         (.readable(10), .none)]),
        Scenario(name: "resumed reading while waiting: nothing to read yet",
                 steps: [(.resume, .joinQueue), (.suspend, .stopReading), (.resumeReading, .none)]),
    ]

    static func run(_ scenario: Scenario) {
        var machine = Machine(scenario.request)
        for (i, (event, expected)) in scenario.steps.enumerated() {
            let action = apply(event, to: &machine)
            #expect(action == expected, "step \(i): \(event) answered \(action), expected \(expected)")
        }
    }

    @Test(arguments: framing) func framingAndReuse(_ scenario: Scenario) { Self.run(scenario) }
    @Test(arguments: refusals) func reuseRefused(_ scenario: Scenario) { Self.run(scenario) }
    @Test(arguments: failures) func failuresAndHostileSequences(_ scenario: Scenario) { Self.run(scenario) }

    @Test func everyCloseReasonIsReachedAndOnlyDesyncRisksCountAsUnsafe() {
        var reached: [CloseReason] = []
        for scenario in Self.framing + Self.refusals + Self.failures {
            for (_, action) in scenario.steps {
                if case .complete(.close(let reason)) = action, !reached.contains(reason) { reached.append(reason) }
            }
        }
        let all: [CloseReason] = [.delimitedByClose, .originClosing, .bytesAfterBody, .requestBodyUnfinished, .readingPaused,
                                  .originClosed, .answeredBeforeBodySent, .bodyAnnouncedButWithheld, .strayBytes]
        #expect(Set(all.map { "\($0)" }) == Set(reached.map { "\($0)" }))
        #expect(all.filter(\.isUnsafe) == [.answeredBeforeBodySent, .bodyAnnouncedButWithheld, .strayBytes])
    }

    @Test func requestBodyIsAcceptedOnlyWhileTheExchangeRuns() {
        var m = Machine(Self.withBody)
        #expect(!m.acceptsRequestBody)
        _ = m.resume(offline: false)
        #expect(!m.acceptsRequestBody)
        _ = m.connectionAssigned(reused: false)
        #expect(m.acceptsRequestBody)
        _ = m.readable(buffered: 10)
        _ = m.responseHead(Self.ok5, requestBytesQueued: false)
        #expect(m.acceptsRequestBody, "an early answer does not stop the body")
        m.requestBodyWritten()
        #expect(!m.acceptsRequestBody)
        #expect(m.answeredBeforeBodySent)
    }

    @Test func usedReusedConnectionFollowsTheLatestConnection() {
        var m = Machine(Self.framing[0].request)
        _ = m.resume(offline: false)
        _ = m.connectionAssigned(reused: true)
        #expect(m.usedReusedConnection)
        #expect(m.originClosed(buffered: 0) == .retryOnFreshConnection)
        _ = m.connectionAssigned(reused: false)
        #expect(!m.usedReusedConnection)
        #expect(m.retried)
    }
}
