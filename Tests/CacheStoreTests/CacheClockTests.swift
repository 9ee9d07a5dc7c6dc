import CachePolicy
import HTTPWire
import Locking
import Synchronization
import Testing
import Timekeeping
@testable import CacheStore

/// The cache reads time only from the clock it is given, and its writer tells waiters when it is
/// done instead of being polled.
@Suite(.serialized) struct CacheClockTests {
    @Test func damageReportsAreRateLimitedOnTheGivenClock() {
        let clock = ManualClock()
        let lines = Locked<[String]>([])
        let reports = DamageReports(log: { line in lines.withLock { $0.append(line) } }, clock: clock)
        reports.report("first")
        reports.report("second")
        reports.report("third")
        #expect(lines.withLock { $0 } == ["first"], "within the interval, later damage is only counted")
        clock.advance(by: DamageReports.logInterval - 0.5)
        reports.report("fourth")
        #expect(lines.withLock { $0.count } == 1, "the interval is not over on the given clock")
        clock.advance(by: 0.5)
        reports.report("fifth")
        #expect(lines.withLock { $0 } == ["first", "fifth (and 3 more damaged entries since the last report)"])
        #expect(reports.count.load(ordering: .relaxed) == 5)
    }

    func makeCache(_ dir: String, clock: any ProxyClock = SystemClock.shared, maxPending: Int = 16 << 20) throws -> Cache {
        try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: dir, capacity: 64 << 20),
                                          memoryObjectLimit: 0, maxPendingWriteBytes: maxPending),
                  clock: clock, log: { _ in })
    }

    @Test func aCommitWaiterIsCalledByTheWriterOnceTheEntryIsCommitted() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir)
        defer { cache.close() }
        let url = Array("http://a/big".utf8)
        let early = Semaphore()
        cache.whenCommitted(primaryKey: url) { early.signal() }
        #expect(early.wait(seconds: 0), "nothing pending: called at once")

        let gate = stallWriter(cache)
        let w = cache.beginStore(primaryKey: url, secondaryKey: [], facts: facts(), head: [], tier: .allowed,
                                 expectedLength: 3, now: 1_000)!
        [UInt8]("abc".utf8).withUnsafeBytes { _ = w.append($0) }
        #expect(w.finish(head: Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n".utf8), facts: facts()))
        let committed = Semaphore()
        let calls = Atomic<Int>(0)
        cache.whenCommitted(primaryKey: url) {
            calls.add(1, ordering: .relaxed)
            committed.signal()
        }
        #expect(!committed.wait(seconds: 0.05), "the writer is stalled: not committed yet")
        gate.signal()
        #expect(committed.wait(seconds: 10), "called by the writer after the commit")
        #expect(!cache.isCommitPending(primaryKey: url))
        cache.flush()
        #expect(calls.load(ordering: .relaxed) == 1)
    }

    @Test func aPausedStoreIsToldWhenTheWriterCatchesUp() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, maxPending: 100 << 10)
        defer { cache.close() }
        let gate = stallWriter(cache)
        let w = cache.beginStore(primaryKey: Array("http://a/large".utf8), secondaryKey: [], facts: facts(), head: [],
                                 tier: .allowed, expectedLength: nil, now: 1_000)!
        let piece = [UInt8](repeating: 7, count: 256 << 10)  // one chunk, queued whole
        piece.withUnsafeBytes { _ = w.append($0) }
        #expect(w.isBehind, "more than maxPendingWriteBytes queued behind a stalled writer")
        let caughtUp = Semaphore()
        w.whenCaughtUp { caughtUp.signal() }
        #expect(!caughtUp.wait(seconds: 0.05))
        gate.signal()
        #expect(caughtUp.wait(seconds: 10), "called by the writer once its queue is down")
        #expect(!w.isBehind)
        w.abandon()
        let already = Semaphore()
        w.whenCaughtUp { already.signal() }
        #expect(already.wait(seconds: 0), "not behind: called at once")
    }

    @Test func aDamagedCopyIsDatedByTheGivenClock() throws {
        let clock = ManualClock(wallSeconds: 1_234_567_890)
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, clock: clock)
        cache.close()
        let aside = try DiskStore.moveAside(dir, clock: clock)
        #expect(aside.to == "\(dir).broken-1234567890")
        removeTree(aside.to)
    }
}
