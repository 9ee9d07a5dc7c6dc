import Glibc
import Testing
@testable import EventLoop

/// The peer of an in-memory stream in these tests: it takes what it is told to, when it is told to.
private final class QuietPeer: MemoryStreamPeer {
    func memoryStreamHasOutput(_ stream: Stream) {}
    func memoryStreamConsumed(_ stream: Stream, count: Int) {}
    func memoryStreamFinished(_ stream: Stream, reset: Bool) {}
}

/// A loop, an in-memory stream on it with a recorder as its delegate, and its peer (held by the
/// caller: the stream holds it weakly).
private func memoryStream() -> (EventLoop, Stream, StreamRecorder, QuietPeer) {
    let loop = EventLoop()
    let peer = QuietPeer()
    let stream = Stream.inMemory(loop: loop, peer: peer)
    let recorder = StreamRecorder(loop: loop)
    stream.delegate = recorder
    return (loop, stream, recorder, peer)
}

/// An in-memory stream's timeouts, as a socket's: output its peer takes nothing of for the write
/// timeout, and a wait for input the peer sends nothing of for the read timeout, report `.timeout`;
/// each piece taken or sent starts the wait again. (They are deadlines that only record the time
/// as they move, armed in libevent only when one comes earlier than the time already armed.)
@Suite struct MemoryTransportTests {
    @Test func aWriteTimeoutEndsAPeerThatTakesNothing() {
        let (loop, stream, recorder, peer) = memoryStream()
        defer { withExtendedLifetime(peer) {} }
        recorder.until = { !$0.events.isEmpty }
        stream.setTimeouts(read: nil, write: 0.2)
        let start = loop.monotonicNow
        stream.output.append([UInt8](repeating: 1, count: 10_000))
        runLoop(loop, atMost: 10)
        #expect(recorder.events == [.timeout])
        #expect(loop.monotonicNow - start >= 0.19, "not before its time")
        stream.close()
    }

    @Test func aPeerThatKeepsTakingIsNotTimedOut() {
        let (loop, stream, recorder, peer) = memoryStream()
        defer { withExtendedLifetime(peer) {} }
        let total = 40 * 1_024
        var taken = 0
        recorder.until = { r in !r.events.isEmpty || taken == total }
        stream.setTimeouts(read: nil, write: 0.5)
        stream.output.append([UInt8](repeating: 2, count: total))
        // A KiB every 25 ms: a second in all, twice the timeout, never 0.5 s without progress.
        let taker = Timer(loop: loop, repeating: true) {
            stream.output.drain(1_024)
            stream.peerTook(1_024)
            taken += 1_024
            recorder.check()
        }
        taker.schedule(after: 0.025)
        runLoop(loop, atMost: 30)
        taker.cancel()
        #expect(recorder.events.isEmpty)
        #expect(taken == total)
        stream.close()
    }

    /// Output taken whole leaves nothing to time out: the deadline set when it was written ends,
    /// and output written after it is timed out from its own write, not from the first one's.
    @Test func outputTakenWholeIsNotTimedOutAfterwards() {
        let (loop, stream, recorder, peer) = memoryStream()
        defer { withExtendedLifetime(peer) {} }
        recorder.until = { !$0.events.isEmpty }
        stream.setTimeouts(read: nil, write: 0.5)
        stream.output.append([UInt8](repeating: 3, count: 1_000))
        let taker = Timer(loop: loop) {
            stream.output.drain(1_000)
            stream.peerTook(1_000)
        }
        taker.schedule(after: 0.02)
        // Written again halfway to the first write's deadline, and left there.
        var secondWrite = 0.0
        let writer = Timer(loop: loop) {
            secondWrite = loop.monotonicNow
            stream.output.append([UInt8](repeating: 4, count: 10))
        }
        writer.schedule(after: 0.25)
        runLoop(loop, atMost: 10)
        #expect(recorder.events == [.timeout])
        #expect(secondWrite > 0 && loop.monotonicNow - secondWrite >= 0.49, "timed out from the second write")
        stream.close()
    }

    @Test func aReadTimeoutEndsASilentPeerAndEachPieceSentRestartsIt() {
        let (loop, stream, recorder, peer) = memoryStream()
        defer { withExtendedLifetime(peer) {} }
        var sent = 0
        recorder.until = { !$0.events.isEmpty }
        stream.setTimeouts(read: 0.5, write: nil)
        stream.enableReading()
        // A byte every 25 ms for half a second, then nothing: the timeout comes only after the last.
        var lastSent = loop.monotonicNow
        let sender = Timer(loop: loop, repeating: true) {
            guard sent < 20 else { return }
            [UInt8(ascii: "x")].withUnsafeBytes { stream.peerAppend($0) }
            sent += 1
            lastSent = loop.monotonicNow
        }
        sender.schedule(after: 0.025)
        runLoop(loop, atMost: 30)
        sender.cancel()
        #expect(recorder.events == [.timeout])
        #expect(sent == 20 && recorder.received.count == 20)
        #expect(loop.monotonicNow - lastSent >= 0.49, "timed out from the last byte, not the first")
        stream.close()
    }

    /// A stream holds its peer only when made with `holdingPeer` (an HTTP/2 connection, which its
    /// exchanges name without a reference of their own), and then reports to it while it lives.
    @Test func aStreamHoldsItsPeerOnlyWhenAskedTo() {
        let loop = EventLoop()
        weak var looselyHeld: CountingPeer?
        var loose: Stream? = {
            let peer = CountingPeer(stopping: loop)
            looselyHeld = peer
            return Stream.inMemory(loop: loop, peer: peer)
        }()
        #expect(looselyHeld == nil, "a weakly held peer goes with its last reference")
        loose?.close()
        loose = nil

        weak var held: CountingPeer?
        var stream: Stream? = {
            let peer = CountingPeer(stopping: loop)
            held = peer
            return Stream.inMemory(loop: loop, peer: peer, holdingPeer: true)
        }()
        #expect(held != nil, "the stream keeps its peer")
        stream?.output.append([UInt8](repeating: 3, count: 100))
        runLoop(loop, atMost: 10)  // until the peer hears of it
        #expect(held?.outputs == 1, "the held peer heard of the output")
        stream?.close()
        stream = nil
        #expect(held == nil, "and goes with the stream")
    }
}

/// Counts the outputs it hears of, stopping its loop at each.
private final class CountingPeer: MemoryStreamPeer {
    let loop: EventLoop
    var outputs = 0
    init(stopping loop: EventLoop) { self.loop = loop }
    func memoryStreamHasOutput(_ stream: Stream) {
        outputs += 1
        loop.stop()
    }
    func memoryStreamConsumed(_ stream: Stream, count: Int) {}
    func memoryStreamFinished(_ stream: Stream, reset: Bool) {}
}
