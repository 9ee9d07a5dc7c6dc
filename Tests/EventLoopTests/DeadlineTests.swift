import Testing
@testable import EventLoop

/// A deadline on a real loop: moved, dropped and brought forward, it fires once, at the time
/// last set, and never after being dropped. Margins are wide: these check order, not speed.
@Suite struct DeadlineTests {
    @Test func aDeadlineMovedLaterFiresOnceAtTheLastTimeSet() {
        let loop = EventLoop()
        var fired: [Double] = []
        let deadline = Deadline(loop: loop) { fired.append(loop.monotonicNow); loop.stop() }
        let start = loop.monotonicNow
        deadline.schedule(after: 0.05)
        // Moved later from inside the loop, as a connection's next request does, before 0.05 s passes.
        var moves = 0
        let mover = Timer(loop: loop, repeating: true) {
            if moves < 5 { moves += 1; deadline.schedule(after: 0.2) }
        }
        mover.schedule(after: 0.01)
        runLoop(loop, atMost: 3)
        mover.cancel()
        #expect(fired.count == 1)
        #expect(!deadline.isPending)
        if let at = fired.first { #expect(at - start >= 0.2, "fired at \(at - start) s, before the moved deadline") }
    }

    @Test func aCancelledDeadlineNeverFires() {
        let loop = EventLoop()
        var fired = 0
        let deadline = Deadline(loop: loop) { fired += 1 }
        deadline.schedule(after: 0.02)
        #expect(deadline.isPending)
        deadline.cancel()
        #expect(!deadline.isPending)
        runLoop(loop, atMost: 0.3)
        #expect(fired == 0)
    }

    @Test func aDeadlineBroughtForwardFiresAtTheEarlierTime() {
        let loop = EventLoop()
        var fired: [Double] = []
        let deadline = Deadline(loop: loop) { fired.append(loop.monotonicNow); loop.stop() }
        let start = loop.monotonicNow
        deadline.schedule(after: 5)
        deadline.schedule(after: 0.05)
        runLoop(loop, atMost: 3)
        #expect(fired.count == 1)
        if let at = fired.first { #expect(at - start < 2, "fired at \(at - start) s, not brought forward") }
    }

    @Test func aDeadlineCancelledThenSetAgainFiresOnceForTheNewTime() {
        let loop = EventLoop()
        var fired = 0
        let deadline = Deadline(loop: loop) { fired += 1 }
        deadline.schedule(after: 0.02)
        deadline.cancel()
        deadline.schedule(after: 0.1)
        runLoop(loop, atMost: 0.5)
        #expect(fired == 1)
    }
}
