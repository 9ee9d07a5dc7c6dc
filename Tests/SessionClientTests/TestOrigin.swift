import EventLoop
import HTTPWire
@testable import SessionClient

/// A tiny origin on the test's own loop: answers each request head with whatever `respond` returns
/// (nil: say nothing), and counts connections.
final class TestOrigin {
    private var listener: Listener!
    private var connections: [OriginPeer] = []
    let respond: (_ requestIndex: Int, _ head: String) -> [UInt8]?
    var closeAfterEachResponse = false
    private(set) var acceptedConnections = 0
    private(set) var requestCount = 0
    private(set) var maxConcurrentConnections = 0
    private var openConnections = 0
    var port: Int { listener.boundAddress.port }

    init(loop: EventLoop, respond: @escaping (_ requestIndex: Int, _ head: String) -> [UInt8]?) throws {
        self.respond = respond
        listener = try Listener(loop: loop, address: SocketAddress(ipLiteral: "127.0.0.1", port: 0)!) {
            [unowned self] fd, _ in
            self.acceptedConnections += 1
            self.openConnections += 1
            self.maxConcurrentConnections = max(self.maxConcurrentConnections, self.openConnections)
            let peer = OriginPeer(origin: self, stream: Stream(loop: loop, acceptedSocket: fd))
            self.connections.append(peer)
        }
    }

    fileprivate func handle(_ peer: OriginPeer) {
        let input = peer.stream.input
        while let end = input.firstIndex(of: "\r\n\r\n") {
            let head = String(decoding: input.copyBytes().prefix(end), as: UTF8.self)
            input.drain(end + 4)
            let index = requestCount
            requestCount += 1
            if let reply = respond(index, head) {
                peer.stream.output.append(reply)
                if closeAfterEachResponse { peer.closeWhenFlushed = true }
            }
        }
    }

    fileprivate func ended(_ peer: OriginPeer) {
        openConnections -= 1
        peer.stream.close()
        connections.removeAll { $0 === peer }
    }

    func close() {
        listener.close()
        for c in connections { c.stream.close() }
        connections.removeAll()
    }
}

final class OriginPeer: StreamDelegate {
    unowned let origin: TestOrigin
    let stream: Stream
    var closeWhenFlushed = false
    init(origin: TestOrigin, stream: Stream) {
        self.origin = origin
        self.stream = stream
        stream.delegate = self
        stream.enableReading()
    }
    func streamReadable(_ stream: Stream) { origin.handle(self) }
    func streamDrained(_ stream: Stream) { if closeWhenFlushed { origin.ended(self) } }
    func stream(_ stream: Stream, event: StreamEvent) { origin.ended(self) }
}

/// Collects what a task reports; stops the loop when `expected` tasks have completed.
final class Recorder: SessionTaskDelegate {
    var statuses: [Int] = []
    var bodies: [[UInt8]] = []
    var errors: [SessionError?] = []
    var completionOrder: [Int] = []
    private var current: [ObjectIdentifier: Int] = [:]
    private var partial: [Int: [UInt8]] = [:]
    let loop: EventLoop
    var expected: Int

    init(loop: EventLoop, expected: Int) {
        self.loop = loop
        self.expected = expected
    }

    func track(_ task: SessionTask, as id: Int) { current[ObjectIdentifier(task)] = id }

    func taskCanSendBody(_ task: SessionTask) {}
    func taskBodyDrained(_ task: SessionTask) {}
    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {}
    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) { statuses.append(head.status) }
    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        let id = current[ObjectIdentifier(task)] ?? -1
        let bytes = source.copyBytes().prefix(count)
        source.drain(count)
        partial[id, default: []].append(contentsOf: bytes)
    }
    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        let id = current[ObjectIdentifier(task)] ?? -1
        errors.append(error)
        bodies.append(partial[id] ?? [])
        completionOrder.append(id)
        if errors.count == expected { loop.stop() }
    }
}

/// Runs the loop until the recorder stops it, or `seconds` pass (then the test fails on its counts).
func runLoop(_ loop: EventLoop, atMost seconds: Double) {
    let guardTimer = Timer(loop: loop) { loop.stop() }
    guardTimer.schedule(after: seconds)
    loop.run()
    guardTimer.cancel()
}

func response(_ body: String, extra: String = "") -> [UInt8] {
    Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\(extra)\r\n\(body)".utf8)
}

func getHead(_ path: String, port: Int) -> [UInt8] {
    Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
}
