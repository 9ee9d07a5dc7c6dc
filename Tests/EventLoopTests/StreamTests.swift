import Glibc
import Testing
@testable import EventLoop

/// The plain-socket stream against the other end of a socketpair, driven by the real loop.
@Suite struct StreamTests {
    typealias Recorder = StreamRecorder

    @Test func queuedOutputIsWrittenOnceTheCallbacksReturnAndDrainedIsReported() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        defer { close(b) }
        let stream = Stream(loop: loop, acceptedSocket: a)
        let recorder = Recorder(loop: loop)
        recorder.until = { $0.drained > 0 }
        stream.delegate = recorder
        stream.output.append("head ")
        stream.output.append("and body")
        #expect(stream.output.count == 13)   // nothing is written from inside the caller
        runLoop(loop, atMost: 2)
        #expect(stream.output.count == 0)
        #expect(recorder.drained == 1)
        #expect(readAll(b) == Array("head and body".utf8))
        stream.close()
    }

    @Test func bytesArriveAndEndOfStreamStopsReading() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        let stream = Stream(loop: loop, acceptedSocket: a)
        let recorder = Recorder(loop: loop)
        recorder.until = { !$0.events.isEmpty }
        stream.delegate = recorder
        stream.enableReading()
        _ = send(b, "hello", 5, 0)
        close(b)
        runLoop(loop, atMost: 2)
        #expect(recorder.received == Array("hello".utf8))
        #expect(recorder.events == [.endOfStream])
        #expect(!stream.isReading)
        stream.close()
    }

    @Test func aDisabledReaderGetsNothingUntilEnabledAgain() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        defer { close(b) }
        let stream = Stream(loop: loop, acceptedSocket: a)
        let recorder = Recorder(loop: loop)
        stream.delegate = recorder
        stream.enableReading()
        stream.disableReading()
        _ = send(b, "later", 5, 0)
        runLoop(loop, atMost: 0.3)
        #expect(recorder.received.isEmpty)
        recorder.until = { $0.received.count == 5 }
        stream.enableReading()
        runLoop(loop, atMost: 2)
        #expect(recorder.received == Array("later".utf8))
        stream.close()
    }

    @Test func readingPausesAtTheHighWatermarkAndResumesWhenDrained() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        defer { close(b) }
        let stream = Stream(loop: loop, acceptedSocket: a)
        let recorder = Recorder(loop: loop)
        recorder.consume = false
        stream.delegate = recorder
        stream.setReadHighWatermark(16_384)
        stream.enableReading()
        let sent = [UInt8](repeating: 7, count: 100_000)
        let wrote = sent.withUnsafeBytes { send(b, $0.baseAddress, $0.count, 0) }
        #expect(wrote == 100_000)
        runLoop(loop, atMost: 0.3)
        #expect(stream.input.count == 16_384)   // bounded, whatever the peer sends
        #expect(stream.isReading)
        // Draining below the watermark resumes reading by itself.
        var total = 0
        recorder.consume = true
        recorder.until = { r in total + r.received.count >= 100_000 }
        total = stream.input.count
        stream.input.drain(stream.input.count)
        runLoop(loop, atMost: 2)
        #expect(total + recorder.received.count == 100_000)
        stream.close()
    }

    @Test func aReadTimeoutIsReportedOnlyWhileReading() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        defer { close(b) }
        let stream = Stream(loop: loop, acceptedSocket: a)
        let recorder = Recorder(loop: loop)
        stream.delegate = recorder
        stream.setTimeouts(read: 0.1, write: nil)
        stream.enableReading()
        stream.disableReading()
        runLoop(loop, atMost: 0.4)
        #expect(recorder.events.isEmpty)
        recorder.until = { !$0.events.isEmpty }
        stream.enableReading()
        runLoop(loop, atMost: 2)
        #expect(recorder.events == [.timeout])
        #expect(!stream.isReading)
        stream.close()
    }

    @Test func halfCloseSendsEverythingThenEndOfStream() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        defer { close(b) }
        let stream = Stream(loop: loop, acceptedSocket: a)
        let recorder = Recorder(loop: loop)
        recorder.until = { $0.drained > 0 }
        stream.delegate = recorder
        let big = [UInt8](repeating: 1, count: 300_000)
        stream.output.append(big)
        stream.shutdownWriteWhenFlushed()
        var got: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        // The socketpair holds less than 300 KB: read while the loop writes the rest.
        let reader = Timer(loop: loop, repeating: true) {
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(b, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                got += chunk[0..<n]
            }
        }
        reader.schedule(after: 0.005)
        runLoop(loop, atMost: 5)
        reader.cancel()
        got += readAll(b)
        #expect(got.count == 300_000)
        let n = chunk.withUnsafeMutableBytes { recv(b, $0.baseAddress, $0.count, 0) }
        #expect(n == 0)   // end of stream, not EAGAIN
        stream.close()
    }

    /// Both also read TCP urgent data inline, so no byte can hide behind the urgent mark.
    @Test func acceptedAndConnectedTCPStreamsLimitUnsentBytesAndReadUrgentDataInline() throws {
        let loop = EventLoop()
        var accepted: [Int32] = []
        let listener = try Listener(loop: loop, address: SocketAddress(ipLiteral: "127.0.0.1", port: 0)!) { fd, _ in
            accepted.append(fd)
        }
        guard case .success(let connecting) = Stream.connect(
            loop: loop, to: SocketAddress(ipLiteral: "127.0.0.1", port: listener.boundAddress.port)!) else {
            Issue.record("connect failed at once")
            return
        }
        let recorder = Recorder(loop: loop)
        connecting.delegate = recorder
        // Connected on one side, accepted on the other, in whichever order the loop sees them.
        for _ in 0..<40 where recorder.events.isEmpty || accepted.isEmpty { runLoop(loop, atMost: 0.05) }
        #expect(recorder.events == [.connected])
        #expect(unsentLimit(of: connecting.fileDescriptor) == Stream.unsentLimit)
        #expect(urgentDataInline(connecting.fileDescriptor))

        guard let fd = accepted.first else {
            Issue.record("nothing accepted")
            return
        }
        #expect(unsentLimit(of: fd) == 0)   // a bare socket has none: the stream sets it
        #expect(!urgentDataInline(fd))
        let stream = Stream(loop: loop, acceptedSocket: fd)
        #expect(unsentLimit(of: fd) == Stream.unsentLimit)
        #expect(urgentDataInline(fd))
        stream.close()
        connecting.close()
        listener.close()
    }

    @Test func connectReportsConnectedOrTheRefusal() throws {
        let loop = EventLoop()
        var accepted: [Int32] = []
        let listener = try Listener(loop: loop, address: SocketAddress(ipLiteral: "127.0.0.1", port: 0)!) { fd, _ in
            accepted.append(fd)
        }
        let port = listener.boundAddress.port
        guard case .success(let stream) = Stream.connect(loop: loop, to: SocketAddress(ipLiteral: "127.0.0.1", port: port)!) else {
            Issue.record("connect failed at once")
            return
        }
        let recorder = Recorder(loop: loop)
        recorder.until = { !$0.events.isEmpty }
        stream.delegate = recorder
        stream.output.append("queued before the connection")
        runLoop(loop, atMost: 2)
        #expect(recorder.events == [.connected])
        recorder.until = { $0.drained > 0 }
        runLoop(loop, atMost: 2)
        #expect(stream.output.count == 0)
        stream.close()
        listener.close()
        for fd in accepted { close(fd) }

        // A port nobody listens on (the listener's, now closed).
        switch Stream.connect(loop: loop, to: SocketAddress(ipLiteral: "127.0.0.1", port: port)!) {
        case .failure(let e):
            #expect(e.errno == ECONNREFUSED)
        case .success(let refused):
            let r = Recorder(loop: loop)
            r.until = { !$0.events.isEmpty }
            refused.delegate = r
            runLoop(loop, atMost: 2)
            #expect(r.events == [.error(ECONNREFUSED)])
            refused.close()
        }
    }
}
