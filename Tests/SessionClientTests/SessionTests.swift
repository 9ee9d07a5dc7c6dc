import EventLoop
import HTTPWire
import Testing
@testable import SessionClient

/// The session's pool and timeout logic against a real socket origin on the same loop.
@Suite struct SessionTests {
    private func makeSession(_ loop: EventLoop, _ tweak: (inout SessionConfiguration) -> Void = { _ in }) -> Session {
        var c = SessionConfiguration.forTests
        c.connectTimeout = 2
        c.timeoutIntervalForRequest = 2
        tweak(&c)
        return try! Session(loop: loop, configuration: c)
    }

    private func start(_ session: Session, _ recorder: Recorder, port: Int, paths: [String]) -> [SessionTask] {
        paths.enumerated().map { i, path in
            let t = session.dataTask(origin: OriginKey(scheme: .http, host: "127.0.0.1", port: port), method: .get,
                                     head: getHead(path, port: port), hasBody: false, isIdempotent: true,
                                     delegate: recorder)
            recorder.track(t, as: i)
            t.resume()
            return t
        }
    }

    @Test func sequentialRequestsReuseOneConnection() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { i, _ in response("body\(i)") }
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 1)
        var tasks = start(session, recorder, port: origin.port, paths: ["/a"])
        runLoop(loop, atMost: 5)
        recorder.expected = 2
        tasks += start(session, recorder, port: origin.port, paths: ["/b"])
        recorder.track(tasks[1], as: 1)
        runLoop(loop, atMost: 5)
        #expect(recorder.statuses == [200, 200])
        #expect(recorder.bodies.map { String(decoding: $0, as: UTF8.self) } == ["body0", "body1"])
        #expect(origin.acceptedConnections == 1)
        #expect(session.connectionsOpened == 1)
        #expect(session.connectionsReused == 1)
        #expect(tasks[1].usedReusedConnection)
        origin.close()
    }

    @Test func offlineSessionSendsNothingAndOpensNoConnection() throws {
        let loop = EventLoop()
        var served = 0
        let origin = try TestOrigin(loop: loop) { i, _ in served += 1; return response("r\(i)") }
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: origin.port, paths: ["/online"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors == [nil])
        #expect(session.idleConnectionCount == 1)

        // Offline: neither the idle connection nor a new one carries anything; the failure is
        // reported at once.
        session.offline = true
        recorder.expected = 3
        _ = start(session, recorder, port: origin.port, paths: ["/a", "/b"])
        #expect(recorder.errors.dropFirst() == [.offline(upstream: "127.0.0.1:\(origin.port)"),
                                                 .offline(upstream: "127.0.0.1:\(origin.port)")])
        var tunnel: Result<Stream, SessionError>?
        session.openTunnel(host: "127.0.0.1", port: origin.port) { tunnel = $0 }
        guard case .failure(.offline) = tunnel else {
            Issue.record("tunnel opened while offline: \(String(describing: tunnel))")
            return
        }
        runLoop(loop, atMost: 0.3)
        #expect(served == 1)
        #expect(origin.acceptedConnections == 1)
        #expect(session.connectionsReused == 0)

        // Back online (a configuration reload): the pooled connection serves again.
        session.offline = false
        recorder.expected = 4
        _ = start(session, recorder, port: origin.port, paths: ["/again"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.last == .some(nil))
        #expect(served == 2)
        origin.close()
    }

    @Test func connectionsPerHostAreCappedAndWaitersServedInOrder() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { i, _ in response("r\(i)") }
        let session = makeSession(loop) { $0.httpMaximumConnectionsPerHost = 1 }
        let recorder = Recorder(loop: loop, expected: 4)
        _ = start(session, recorder, port: origin.port, paths: ["/0", "/1", "/2", "/3"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.allSatisfy { $0 == nil })
        #expect(recorder.completionOrder == [0, 1, 2, 3])
        #expect(origin.maxConcurrentConnections == 1)
        #expect(origin.acceptedConnections == 1)
        origin.close()
    }

    @Test func finishedTasksAreNotKeptAliveByTheWaitingQueue() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { i, _ in response("r\(i)") }
        let session = makeSession(loop) { $0.httpMaximumConnectionsPerHost = 1 }
        let recorder = Recorder(loop: loop, expected: 8)
        // Every task waits in the queue for the one connection; none may outlive its completion
        // (the queue and a task holding its pool would otherwise keep each other alive).
        weak var first: SessionTask?
        weak var last: SessionTask?
        do {
            let tasks = start(session, recorder, port: origin.port, paths: (0..<8).map { "/\($0)" })
            first = tasks.first
            last = tasks.last
        }
        runLoop(loop, atMost: 5)
        #expect(recorder.completionOrder == Array(0..<8))
        #expect(first == nil)
        #expect(last == nil)
        origin.close()
    }

    @Test func concurrentRequestsOpenSeveralConnectionsUpToTheCap() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { i, _ in response("r\(i)") }
        let session = makeSession(loop) { $0.httpMaximumConnectionsPerHost = 3 }
        let recorder = Recorder(loop: loop, expected: 6)
        _ = start(session, recorder, port: origin.port, paths: (0..<6).map { "/\($0)" })
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.allSatisfy { $0 == nil })
        #expect(origin.acceptedConnections <= 3)
        #expect(origin.acceptedConnections >= 2)
        origin.close()
    }

    @Test func silentOriginTimesOut() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { _, _ in nil }
        let session = makeSession(loop) { $0.timeoutIntervalForRequest = 0.2 }
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: origin.port, paths: ["/hang"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.count == 1)
        #expect(recorder.errors.first == .some(.requestTimeout(upstream: "127.0.0.1:\(origin.port)")))
        #expect(recorder.errors.first??.status == 504)
        origin.close()
    }

    @Test func resourceTimeoutBoundsTheWholeExchange() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { _, _ in nil }
        let session = makeSession(loop) {
            $0.timeoutIntervalForRequest = 10
            $0.timeoutIntervalForResource = 0.2
        }
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: origin.port, paths: ["/slow"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.first == .some(.resourceTimeout(upstream: "127.0.0.1:\(origin.port)")))
        origin.close()
    }

    @Test func resourceDeadlinesFollowEachTaskNotTheFirstOne() throws {
        let loop = EventLoop()
        // "/fast" is answered, anything else never.
        let origin = try TestOrigin(loop: loop) { _, head in head.hasPrefix("GET /fast") ? response("ok") : nil }
        let session = makeSession(loop) {
            $0.timeoutIntervalForRequest = 10
            $0.timeoutIntervalForResource = 0.4
        }
        let recorder = Recorder(loop: loop, expected: 3)
        let started = loop.now
        var tasks = start(session, recorder, port: origin.port, paths: ["/fast", "/slow-1"])
        // A second slow task, resumed later: its deadline is its own, after the first slow one's.
        var late: [SessionTask] = []
        let later = Timer(loop: loop) { late = self.start(session, recorder, port: origin.port, paths: ["/slow-2"]) }
        later.schedule(after: 0.25)
        runLoop(loop, atMost: 5)
        let elapsed = loop.now - started
        tasks += late
        #expect(recorder.errors.count == 3)
        #expect(recorder.errors.first == .some(nil), "the answered task completes at once")
        #expect(recorder.errors.dropFirst().allSatisfy { $0 == .some(.resourceTimeout(upstream: "127.0.0.1:\(origin.port)")) })
        #expect(elapsed >= 0.6, "the late task timed out after its own 0.4 s, not with the first slow one")
        #expect(session.deadlines.count == 0, "finished tasks leave no deadline behind")
        withExtendedLifetime(tasks) {}
        origin.close()
    }

    @Test func refusedConnectionIsReported() throws {
        let loop = EventLoop()
        // Bind and close a listener to get a port nobody listens on.
        let origin = try TestOrigin(loop: loop) { _, _ in nil }
        let port = origin.port
        origin.close()
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: port, paths: ["/"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.first == .some(.connectionRefused(upstream: "127.0.0.1:\(port)")))
        #expect(recorder.errors.first??.status == 502)
    }

    @Test func staleKeepAliveConnectionIsRetriedOnceForIdempotentRequests() throws {
        let loop = EventLoop()
        // The origin promises keep-alive but closes every connection after answering.
        let origin = try TestOrigin(loop: loop) { i, _ in response("r\(i)") }
        origin.closeAfterEachResponse = true
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 1)
        let first = start(session, recorder, port: origin.port, paths: ["/a"])
        runLoop(loop, atMost: 5)
        // Let the close reach the pooled connection's socket buffer without the loop noticing it:
        // the next request goes out on it, fails, and must be retried on a new connection.
        recorder.expected = 2
        let second = start(session, recorder, port: origin.port, paths: ["/b"])
        recorder.track(second[0], as: 1)
        runLoop(loop, atMost: 5)
        _ = first
        #expect(recorder.errors.allSatisfy { $0 == nil })
        #expect(recorder.bodies.count == 2)
        #expect(String(decoding: recorder.bodies[1], as: UTF8.self) == "r1")
        #expect(origin.acceptedConnections == 2)
        origin.close()
    }

    @Test func chunkedResponseBodyIsDecoded() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { _, _ in
            Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n".utf8)
        }
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: origin.port, paths: ["/c"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors == [nil])
        #expect(String(decoding: recorder.bodies[0], as: UTF8.self) == "hello world")
        origin.close()
    }

    @Test func idleCapOfZeroDisablesReuse() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { i, _ in response("r\(i)") }
        let session = makeSession(loop) { $0.maxIdleConnectionsPerHost = 0 }
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: origin.port, paths: ["/a"])
        runLoop(loop, atMost: 5)
        recorder.expected = 2
        let t = start(session, recorder, port: origin.port, paths: ["/b"])
        recorder.track(t[0], as: 1)
        runLoop(loop, atMost: 5)
        #expect(session.connectionsOpened == 2)
        #expect(session.connectionsReused == 0)
        origin.close()
    }

    @Test func malformedResponseIsAnInvalidResponseError() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { _, _ in
            Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello".utf8)
        }
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: origin.port, paths: ["/bad"])
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.first == .some(.invalidResponse(upstream: "127.0.0.1:\(origin.port)",
                                                                 .conflictingContentLength)))
        origin.close()
    }
    /// A forward proxy meets endless hosts: pools with nothing in them are swept once there are
    /// many, while a pool with work under way stays and keeps its connections.
    @Test func unusedPoolsAreSweptAndBusyOnesKept() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { i, _ in response("body\(i)") }
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 1)
        _ = start(session, recorder, port: origin.port, paths: ["/busy"])   // opening, not yet run
        let busyKey = OriginKey(scheme: .http, host: "127.0.0.1", port: origin.port)
        let busy = session.pool(for: busyKey)
        for i in 0..<(Session.poolsBeforeSweep * 3) {
            _ = session.pool(for: OriginKey(scheme: .http, host: "h\(i).test", port: 80))
        }
        runLoop(loop, atMost: 5)   // the sweep runs on the loop's next turn
        #expect(recorder.bodies.first.map { String(decoding: $0, as: UTF8.self) } == "body0")
        #expect(session.poolCount <= Session.poolsBeforeSweep + 1)
        #expect(session.pool(for: busyKey) === busy)
        origin.close()
    }

    /// A failed connect's task, answering its client, may start a request for a new origin at the
    /// very moment the pools need sweeping: the failing pool is still running its callback and must
    /// not be freed under it (it was, when the sweep ran inside `pool(for:)`).
    @Test func aNewOriginReachedFromAFailingPoolsCallbackSweepsLater() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { _, _ in response("second") }
        let closed = try TestOrigin(loop: loop) { _, _ in response("never") }   // its port, then nothing there
        let refusedPort = closed.port
        closed.close()
        let session = makeSession(loop)
        let recorder = Recorder(loop: loop, expected: 2)
        let chain = ChainingDelegate(recorder: recorder) {
            let t = session.dataTask(origin: OriginKey(scheme: .http, host: "127.0.0.1", port: origin.port),
                                     method: .get, head: getHead("/second", port: origin.port), hasBody: false,
                                     isIdempotent: true, delegate: recorder)
            recorder.track(t, as: 1)
            t.resume()
        }
        do {   // held by nothing but the session from here on, as a proxy's tasks are
            let first = session.dataTask(origin: OriginKey(scheme: .http, host: "127.0.0.1", port: refusedPort),
                                         method: .get, head: getHead("/first", port: refusedPort), hasBody: false,
                                         isIdempotent: true, delegate: chain)
            recorder.track(first, as: 0)
            first.resume()
        }
        // One pool short of a sweep: the chained request's new origin is the one that calls for it.
        for i in 0..<(Session.poolsBeforeSweep - 1) {
            _ = session.pool(for: OriginKey(scheme: .http, host: "h\(i).test", port: 80))
        }
        #expect(session.poolCount == Session.poolsBeforeSweep)
        runLoop(loop, atMost: 5)
        #expect(recorder.errors.count == 2)
        #expect(recorder.errors.first != .some(nil))
        #expect(recorder.bodies.last.map { String(decoding: $0, as: UTF8.self) } == "second")
        #expect(session.poolCount == 1)   // the second origin's, with its idle connection
        origin.close()
    }
}

@Suite struct ThisMachineTests {
    @Test func aConnectionThatReachesThisMachineIsRefusedWhenAsked() throws {
        let loop = EventLoop()
        let origin = try TestOrigin(loop: loop) { i, _ in response("r\(i)") }
        var c = SessionConfiguration.forTests
        c.connectTimeout = 2
        c.refuseThisMachine = true
        let session = try Session(loop: loop, configuration: c)
        let recorder = Recorder(loop: loop, expected: 1)
        let t = session.dataTask(origin: OriginKey(scheme: .http, host: "127.0.0.1", port: origin.port), method: .get,
                                 head: getHead("/x", port: origin.port), hasBody: false, isIdempotent: true,
                                 delegate: recorder)
        recorder.track(t, as: 0)
        t.resume()
        runLoop(loop, atMost: 5)
        guard case .destinationDenied(_, let reason)? = recorder.errors.first ?? nil else {
            Issue.record("expected destinationDenied, got \(recorder.errors)"); return
        }
        #expect(reason.contains("is this machine"))
        origin.close()
    }
}

extension SessionConfiguration {
    /// What the tests start from and adjust: Larder's defaults at the time of writing.
    static var forTests: SessionConfiguration {
        SessionConfiguration(httpAdditionalHeaders: [], timeoutIntervalForRequest: 60, timeoutIntervalForResource: 604_800,
                             connectTimeout: 10, httpMaximumConnectionsPerHost: 64, maxIdleConnectionsPerHost: 32,
                             reuseAfterBodylessAnswers: true, refuseThisMachine: false, idleConnectionTimeout: 60,
                             parentProxy: nil, nameServers: [], maxResponseHeadBytes: 65_536, tlsMinimumVersion: "1.2",
                             tlsMaximumVersion: "1.3", caFile: nil, trustExceptions: [])
    }
}

/// Passes everything to `recorder`, and on completion runs `then` (a client's next request).
final class ChainingDelegate: SessionTaskDelegate {
    let recorder: Recorder
    let then: () -> Void

    init(recorder: Recorder, then: @escaping () -> Void) {
        self.recorder = recorder
        self.then = then
    }

    func taskCanSendBody(_ task: SessionTask) {}
    func taskBodyDrained(_ task: SessionTask) {}
    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {}
    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) { recorder.task(task, didReceiveResponse: head) }
    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        recorder.task(task, didReceiveBody: source, count: count)
    }
    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        recorder.task(task, didCompleteWith: error)
        then()
    }
}
