import Testing
@testable import EventLoop

/// A timer fires once per arming, never after it is cancelled, and can be armed again after it
/// fired or was cancelled, however it was armed. (Whether a cancel reaches libevent depends on
/// what the timer knows of itself: these are the cases that knowledge must get right.) Each test
/// ends the loop from a later timer, so nothing waits on the clock but the loop's own order.
@Suite struct TimerTests {
    @Test func aCancelledTimerDoesNotFireAndCanBeArmedAgain() {
        let loop = EventLoop()
        var fired = 0
        let timer = Timer(loop: loop) { fired += 1 }
        timer.schedule(after: 0.01)
        timer.cancel()
        let end = Timer(loop: loop) { loop.stop() }
        end.schedule(after: 0.05)
        runLoop(loop, atMost: 10)
        #expect(fired == 0)

        timer.schedule(after: 0.01)
        end.schedule(after: 0.05)
        runLoop(loop, atMost: 10)
        #expect(fired == 1)
    }

    @Test func aTimerThatFiredIsCancelledHarmlesslyAndFiresAgainWhenArmed() {
        let loop = EventLoop()
        var fired = 0
        let timer = Timer(loop: loop) {
            fired += 1
            loop.stop()
        }
        timer.schedule(after: 0.01)
        runLoop(loop, atMost: 10)
        #expect(fired == 1)
        timer.cancel()  // nothing pending
        timer.schedule(after: 0.01)
        runLoop(loop, atMost: 10)
        #expect(fired == 2)
    }

    @Test func aTimerArmedFromItsOwnHandlerFiresAgainUnlessCancelled() {
        let loop = EventLoop()
        var fired = 0
        var timer: Timer?
        timer = Timer(loop: loop) {
            fired += 1
            if fired < 3 { timer?.schedule(after: 0.005) } else { loop.stop() }
        }
        timer?.schedule(after: 0.005)
        runLoop(loop, atMost: 10)
        #expect(fired == 3)
        // Re-armed from its handler, then cancelled by another before its time: it stays quiet.
        fired = 0
        let quiet = Timer(loop: loop) {
            fired += 1
            if fired == 1 { timer?.schedule(after: 0.06) }
        }
        timer = quiet
        quiet.schedule(after: 0.005)
        let canceller = Timer(loop: loop) { quiet.cancel() }
        canceller.schedule(after: 0.03)
        let end = Timer(loop: loop) { loop.stop() }
        end.schedule(after: 0.12)
        runLoop(loop, atMost: 10)
        #expect(fired == 1)
        timer = nil
    }

    @Test func aTurnAskedForAndCancelledDoesNotFire() {
        let loop = EventLoop()
        var fired = 0
        let timer = Timer(loop: loop) { fired += 1 }
        timer.fireAtNextTurn()
        timer.cancel()
        let end = Timer(loop: loop) { loop.stop() }
        end.schedule(after: 0.02)
        runLoop(loop, atMost: 10)
        #expect(fired == 0)
        timer.fireAtNextTurn()
        timer.fireAtNextTurn()  // once however often it is asked
        end.schedule(after: 0.02)
        runLoop(loop, atMost: 10)
        #expect(fired == 1)
    }

    @Test func aRepeatingTimerStopsWhenCancelledFromItsHandler() {
        let loop = EventLoop()
        var fired = 0
        var timer: Timer?
        timer = Timer(loop: loop, repeating: true) {
            fired += 1
            if fired == 2 { timer?.cancel() }
        }
        timer?.schedule(after: 0.005)
        let end = Timer(loop: loop) { loop.stop() }
        end.schedule(after: 0.1)
        runLoop(loop, atMost: 10)
        #expect(fired == 2)
        timer = nil
    }
}
