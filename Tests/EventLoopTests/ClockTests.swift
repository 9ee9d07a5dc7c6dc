import Glibc
import Testing
@testable import EventLoop

/// A loop, and the deadlines on it, read the clock they are given; the test clock moves with the
/// file a test writes.
@Suite struct ClockTests {
    @Test func aLoopReadsTheClockItIsGiven() {
        let clock = ManualClock(monotonic: 500)
        let loop = EventLoop(clock: clock)
        #expect(loop.monotonicNow == 500)
        clock.advance(by: 2.5)
        #expect(loop.monotonicNow == 502.5)
    }

    /// When its timer comes, a deadline checks the loop's clock: on a clock that has not moved it is
    /// not due and waits again; once the clock is moved past it, it fires.
    @Test func aDeadlineFiresWhenTheGivenClockPassesIt() {
        let clock = ManualClock()
        let loop = EventLoop(clock: clock)
        var fired = 0
        var firedBeforeTheMove = false
        let deadline = Deadline(loop: loop) { fired += 1; loop.stop() }
        deadline.schedule(after: 0.02)
        // Real time passes the deadline several times over while the clock stands still.
        let mover = Timer(loop: loop) {
            firedBeforeTheMove = fired > 0
            clock.advance(by: 0.05)
        }
        mover.schedule(after: 0.2)
        runLoop(loop, atMost: 5)
        #expect(!firedBeforeTheMove, "fired by real time, not by the loop's clock")
        #expect(fired == 1)
    }

    @Test func theTestClockAddsTheOffsetInItsFile() throws {
        let path = "/tmp/larder-clock-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        let clock = try OffsetClock(path: path)
        let system = SystemClock.shared
        #expect(clock.offsetNanoseconds == 0, "a new file starts at no offset")
        #expect(abs(clock.monotonic - system.monotonic) < 1)
        #expect(abs(clock.wallSeconds - system.wallSeconds) <= 1)
        // What a test writes: 8 bytes, little-endian nanoseconds, seen at the next read.
        var offset = Int64(3_600_500_000_000).littleEndian
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        #expect(pwrite(fd, &offset, 8, 0) == 8)
        close(fd)
        #expect(clock.offsetNanoseconds == 3_600_500_000_000)
        #expect(abs(clock.monotonic - system.monotonic - 3_600.5) < 1)
        #expect(abs(clock.wallSeconds - system.wallSeconds - 3_600) <= 1)
    }

    @Test func theTestClockIsMadeOnlyWhenItsVariableIsSet() throws {
        #expect(try OffsetClock.fromEnvironment([:]) is SystemClock)
        #expect(try OffsetClock.fromEnvironment(["LARDER_TEST_CLOCK_FILE": ""]) is SystemClock)
        #expect(throws: OffsetClock.Failure.self) {
            _ = try OffsetClock.fromEnvironment(["LARDER_TEST_CLOCK_FILE": "/nonexistent-dir/clock"])
        }
    }
}
