import Glibc
import Testing
@testable import EventLoop

/// What only the plain transport does: the one-byte peek, urgent data inline, the hand-over of its
/// socket, and the write timeout measured in bytes the peer acknowledged. Over loopback TCP where
/// the kernel's TCP behaviour matters, over a socketpair otherwise.
@Suite struct PlainTransportTests {
    @Test func unreadInputPeeksWithoutTakingTheBytes() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        let stream = Stream(loop: loop, acceptedSocket: a)
        #expect(!stream.isTLS)
        #expect(stream.unreadInput == .nothing)
        _ = send(b, "x", 1, 0)
        #expect(stream.unreadInput == .bytes)
        #expect(stream.unreadInput == .bytes)   // still there: a peek
        let recorder = StreamRecorder(loop: loop)
        recorder.until = { $0.received.count == 1 }
        stream.delegate = recorder
        stream.enableReading()
        runLoop(loop, atMost: 2)
        #expect(recorder.received == Array("x".utf8))
        #expect(stream.unreadInput == .nothing)
        close(b)
        #expect(stream.unreadInput == .endOfStream)
        stream.close()
        #expect(stream.unreadInput == .endOfStream)
    }

    /// An urgent byte left out of band would hide from the peek (and from a tunnel).
    @Test func urgentDataIsSeenByThePeekAndReadInOrder() {
        let loop = EventLoop()
        let (fd, peer) = tcpPair()
        defer { close(peer) }
        let stream = Stream(loop: loop, acceptedSocket: fd)
        _ = send(peer, "!", 1, Int32(MSG_OOB))
        for _ in 0..<100 where stream.unreadInput == .nothing { usleep(1_000) }
        #expect(stream.unreadInput == .bytes)
        _ = send(peer, "ab", 2, 0)
        let recorder = StreamRecorder(loop: loop)
        recorder.until = { $0.received.count == 3 }
        stream.delegate = recorder
        stream.enableReading()
        runLoop(loop, atMost: 2)
        #expect(recorder.received == Array("!ab".utf8))
        stream.close()
    }

    @Test func detachingHandsOverAnOpenSocketAndClosesTheStream() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        defer { close(b) }
        let stream = Stream(loop: loop, acceptedSocket: a)
        let recorder = StreamRecorder(loop: loop)
        stream.delegate = recorder
        guard let fd = stream.detachSocket() else {
            Issue.record("no socket handed over")
            return
        }
        #expect(fd == a)
        #expect(stream.isClosed)
        #expect(stream.fileDescriptor == -1)
        #expect(stream.detachSocket() == nil)
        #expect(send(fd, "still open", 10, 0) == 10)
        #expect(readAll(b) == Array("still open".utf8))
        close(fd)
    }

    @Test func resetSendsAnRSTInsteadOfAFIN() {
        let loop = EventLoop()
        let (fd, peer) = tcpPair()
        defer { close(peer) }
        let stream = Stream(loop: loop, acceptedSocket: fd)
        stream.reset()
        #expect(stream.isClosed)
        var byte: UInt8 = 0
        var n = -1
        for _ in 0..<100 {
            n = recv(peer, &byte, 1, 0)
            if n >= 0 || errno != EAGAIN { break }
            usleep(1_000)
        }
        #expect(n == -1 && errno == ECONNRESET)
    }

    /// A peer that reads nothing is timed out, with what it did not take still queued.
    @Test func aWriteTimeoutEndsAStalledPeer() {
        let loop = EventLoop()
        let (fd, peer) = tcpPair(peerReceiveBuffer: 16_384)
        defer { close(peer) }
        let stream = Stream(loop: loop, acceptedSocket: fd)
        let recorder = StreamRecorder(loop: loop)
        recorder.until = { !$0.events.isEmpty }
        stream.delegate = recorder
        stream.setTimeouts(read: nil, write: 0.2)
        stream.output.append([UInt8](repeating: 1, count: 2_000_000))
        runLoop(loop, atMost: 5)
        #expect(recorder.events == [.timeout])
        #expect(stream.output.count > 0)
        stream.close()
    }

    /// The socket stays full while a slow peer reads, so no writable report restarts the timer:
    /// what counts is that the peer acknowledged `minimumProgress` since the last look.
    @Test func aSlowPeerThatKeepsAcknowledgingIsNotTimedOut() {
        let loop = EventLoop()
        let (fd, peer) = tcpPair(peerReceiveBuffer: 16_384)
        defer { close(peer) }
        let stream = Stream(loop: loop, acceptedSocket: fd)
        let recorder = StreamRecorder(loop: loop)
        let total = 600_000
        var got = 0
        recorder.until = { r in !r.events.isEmpty || got == total }
        stream.delegate = recorder
        stream.setTimeouts(read: nil, write: 0.25)
        stream.output.append([UInt8](repeating: 2, count: total))
        // About 2.5 times `minimumProgress` per timeout, in small reads.
        var chunk = [UInt8](repeating: 0, count: 4_096)
        let reader = Timer(loop: loop, repeating: true) {
            let n = chunk.withUnsafeMutableBytes { recv(peer, $0.baseAddress, $0.count, 0) }
            if n > 0 { got += n }
            recorder.check()
        }
        reader.schedule(after: 0.025)
        runLoop(loop, atMost: 20)
        reader.cancel()
        #expect(recorder.events.isEmpty)
        #expect(got == total)
        stream.close()
    }

    /// A write event that had a timeout, removed and later activated by hand, must not come back
    /// registered: on a writable socket it would run on every turn of the loop.
    @Test func anIdleStreamCostsNoCPUAfterATimedWrite() {
        let loop = EventLoop()
        let (fd, peer) = tcpPair(peerReceiveBuffer: 16_384)
        defer { close(peer) }
        let stream = Stream(loop: loop, acceptedSocket: fd)
        let recorder = StreamRecorder(loop: loop)
        stream.delegate = recorder
        stream.setTimeouts(read: nil, write: 5)
        // More than the socket takes: the write event is added with its timeout.
        stream.output.append([UInt8](repeating: 3, count: 1_000_000))
        var got = 0
        let reader = Timer(loop: loop, repeating: true) {
            got += readAll(peer).count
            if got == 1_000_000 { loop.stop() }
        }
        reader.schedule(after: 0.005)
        runLoop(loop, atMost: 10)
        reader.cancel()
        #expect(got == 1_000_000)
        // Then a write that goes out at once, through the event activated by hand.
        recorder.until = { $0.drained > 1 }
        stream.output.append("more")
        runLoop(loop, atMost: 2)
        #expect(readAll(peer) == Array("more".utf8))

        let before = threadCPUSeconds()
        runLoop(loop, atMost: 0.5)
        #expect(threadCPUSeconds() - before < 0.1)
        #expect(recorder.events.isEmpty)
        stream.close()
    }

    private func threadCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1_000_000_000
    }
}
