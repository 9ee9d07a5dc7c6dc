import EventLoop
import HTTPWire
import Testing
@testable import ProxyServer

/// The shared state of request collapsing, driven by hand: who leads and follows, what followers
/// read, when memory is let go and when the leader must pause. Wakes are posted to a loop that
/// never runs; only the table's decisions are checked here (the integration tests cover the rest).
@Suite struct InFlightTests {
    final class Nobody: CollapseParticipant {
        func collapseProgress() {}
    }

    let loop = EventLoop()
    let nobody = Nobody()
    var handle: ParticipantHandle { ParticipantHandle(loop: loop, target: nobody) }

    func bytes(_ n: Int, from start: Int = 0) -> [UInt8] { (start..<start + n).map { UInt8(truncatingIfNeeded: $0 &* 7) } }

    func read(_ fetch: InFlightFetch, _ id: Int, limit: Int = .max, now: Double = 0) -> ([UInt8], InFlightFetch.ReadEnd) {
        var got: [UInt8] = []
        let end = fetch.read(id, limit: limit, now: now) { got.append(contentsOf: $0) }
        return (got, end)
    }

    func head() -> InFlightFetch.Head {
        InFlightFetch.Head(response: ResponseHead(), varyFields: [], varyStar: false, secondaryKey: [], omitFields: [])
    }

    @Test func firstLeadsOthersFollowAndTheTableForgetsFinishedFetches() {
        let table = InFlightTable()
        guard case .lead(let fetch) = table.join(key: Array("k".utf8), participant: handle, now: 0) else {
            Issue.record("first request must lead"); return
        }
        guard case .follow(let same, let id) = table.join(key: Array("k".utf8), participant: handle, now: 0) else {
            Issue.record("second request must follow"); return
        }
        #expect(same === fetch)
        guard case .lead = table.join(key: Array("other".utf8), participant: handle, now: 0) else {
            Issue.record("another URL leads its own fetch"); return
        }
        #expect(fetch.pollHead(id).isWaiting)
        fetch.finish(failed: false)
        table.remove(fetch)
        #expect(fetch.pollHead(id).isReleased)
        guard case .lead = table.join(key: Array("k".utf8), participant: handle, now: 0) else {
            Issue.record("after the fetch ended, the next request leads again"); return
        }
    }

    @Test func followersReadEveryByteInOrderAcrossSegments() {
        let fetch = InFlightFetch(key: [1], leader: handle)
        let a = fetch.addFollower(handle, now: 0)!
        fetch.publish(head())
        let body = bytes(3 * InFlightFetch.segmentSize + 123)
        var fed = 0
        var got: [UInt8] = []
        for size in [1, 5000, InFlightFetch.segmentSize, 77, 3 * InFlightFetch.segmentSize] where fed < body.count {
            let n = min(size, body.count - fed)
            body[fed..<fed + n].withUnsafeBytes { _ = fetch.append($0) }
            fed += n
            let (piece, end) = read(fetch, a, limit: 10_000)
            #expect(end == .more)
            got += piece
        }
        fetch.finish(failed: false)
        while true {
            let (piece, end) = read(fetch, a, limit: 10_000)
            got += piece
            if end != .more {
                #expect(end == .complete)
                break
            }
        }
        #expect(got == body)
    }

    @Test func latecomersJoinOnlyWithinTheWindowAndMemoryIsThenLetGo() {
        let table = InFlightTable()
        guard case .lead(let fetch) = table.join(key: [7], participant: handle, now: 0),
              case .follow(_, let early) = table.join(key: [7], participant: handle, now: 0) else {
            Issue.record("lead and follow expected"); return
        }
        fetch.publish(head())
        let window = bytes(InFlightTable.joinWindow)
        window.withUnsafeBytes { _ = fetch.append($0) }
        guard case .follow(_, let late) = table.join(key: [7], participant: handle, now: 0) else {
            Issue.record("still within the window"); return
        }
        bytes(1).withUnsafeBytes { _ = fetch.append($0) }
        guard case .alone = table.join(key: [7], participant: handle, now: 0) else {
            Issue.record("past the window, nobody joins"); return
        }
        #expect(read(fetch, late).0.count == InFlightTable.joinWindow + 1)
        #expect(fetch.retainedBytes > InFlightTable.joinWindow)
        #expect(read(fetch, early).0.count == InFlightTable.joinWindow + 1)
        // Everyone has read everything: only the partly filled last segment stays.
        #expect(fetch.retainedBytes <= InFlightFetch.segmentSize)
    }

    @Test func aLaggingFollowerPausesTheLeaderUntilItCatchesUp() {
        let table = InFlightTable()
        guard case .lead(let fetch) = table.join(key: [9], participant: handle, now: 0),
              case .follow(_, let id) = table.join(key: [9], participant: handle, now: 0) else {
            Issue.record("lead and follow expected"); return
        }
        fetch.publish(head())
        var paused = false
        var sent = 0
        while !paused && sent < 4 * InFlightTable.lagLimit {
            paused = bytes(InFlightFetch.segmentSize).withUnsafeBytes { fetch.append($0) }
            sent += InFlightFetch.segmentSize
        }
        #expect(paused)
        #expect(sent > InFlightTable.lagLimit && sent <= InFlightTable.lagLimit + InFlightFetch.segmentSize)
        #expect(fetch.leaderIsPaused)
        _ = read(fetch, id, limit: InFlightFetch.segmentSize, now: 1)
        #expect(fetch.leaderIsPaused, "a little progress is not enough")
        _ = read(fetch, id, now: 1)
        #expect(!fetch.leaderIsPaused)
    }

    @Test func aFollowerThatStopsReadingIsDetachedAndTheLeaderGoesOn() {
        let table = InFlightTable()
        guard case .lead(let fetch) = table.join(key: [9], participant: handle, now: 0),
              case .follow(_, let stalled) = table.join(key: [9], participant: handle, now: 0),
              case .follow(_, let slow) = table.join(key: [9], participant: handle, now: 0) else {
            Issue.record("lead and two follows expected"); return
        }
        fetch.publish(head())
        var paused = false
        while !paused { paused = bytes(InFlightFetch.segmentSize).withUnsafeBytes { fetch.append($0) } }
        // The slow one keeps reading, a segment at a time; the stalled one reads nothing.
        _ = read(fetch, slow, limit: InFlightFetch.segmentSize, now: InFlightTable.stallTimeout - 1)
        #expect(fetch.detachStalled(now: InFlightTable.stallTimeout - 0.5), "nobody stalled long enough yet")
        #expect(fetch.detachStalled(now: InFlightTable.stallTimeout), "the slow one still lags: wait for it")
        #expect(fetch.detachedCount == 1)
        #expect(read(fetch, stalled).1 == .detached)
        #expect(fetch.pollHead(stalled).isReleased, "a detached follower that has no head yet fetches on its own")
        _ = read(fetch, slow, now: InFlightTable.stallTimeout + 1)
        #expect(!fetch.leaderIsPaused, "the one left caught up: the leader goes on")
        #expect(!fetch.detachStalled(now: 2 * InFlightTable.stallTimeout + 5))
    }

    @Test func aCutFetchFailsFollowersThatStartedAndReleasesThoseStillWaiting() {
        let streaming = InFlightFetch(key: [1], leader: handle)
        let s = streaming.addFollower(handle, now: 0)!
        streaming.publish(head())
        bytes(10).withUnsafeBytes { _ = streaming.append($0) }
        streaming.finish(failed: true)
        let (got, end) = read(streaming, s)
        #expect(got.count == 10 && end == .failed)

        let waiting = InFlightFetch(key: [2], leader: handle)
        let w = waiting.addFollower(handle, now: 0)!
        waiting.finish(failed: true)
        #expect(waiting.pollHead(w).isReleased)
    }

    @Test func aPassMarkerSendsMissesOnTheirOwnUntilItExpiresOrIsCleared() {
        let clock = ManualClock()
        let table = InFlightTable(clock: clock)
        let key = Array("http://a/x".utf8)
        table.markPass(key)
        guard case .pass(renew: false) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("a marked URL is fetched alone, its fresh marker not renewed")
            return
        }
        clock.advance(by: InFlightTable.passRenewAfter + 1)
        guard case .pass(renew: true) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("an older marker is renewed by the next answer not stored")
            return
        }
        clock.advance(by: InFlightTable.passFor - (InFlightTable.passRenewAfter + 1))
        guard case .lead(let fetch) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("an expired marker is forgotten")
            return
        }
        fetch.finish(failed: false)
        table.remove(fetch)
        table.markPass(key)
        table.clearPass(key)
        #expect(!table.isPass(key))
    }

    /// A fetch that was forgotten (a purge) and replaced by a newer one of the same URL ends
    /// without taking the newer one out of the table.
    @Test func removingAReplacedFetchLeavesItsSuccessor() {
        let table = InFlightTable()
        let key = Array("http://a/purged".utf8)
        guard case .lead(let old) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("the first miss leads"); return
        }
        table.forget(key)
        guard case .lead(let new) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("after the purge, a miss leads again"); return
        }
        old.finish(failed: false)
        table.remove(old)
        #expect(table.count == 1)
        guard case .follow(let followed, _) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("the newer fetch still takes followers"); return
        }
        #expect(followed === new)
        new.finish(failed: false)
        table.remove(new)
        #expect(table.count == 0)
    }

    @Test func aRefreshLeadsOnlyWhenNoFetchIsUnderWayAndIsThenFollowed() {
        let table = InFlightTable(clock: ManualClock())
        let key = Array("http://a/refreshed".utf8)
        guard case .lead(let other) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("the first miss leads")
            return
        }
        #expect(table.lead(key: key, participant: handle) == nil, "a fetch under way is not displaced")
        other.finish(failed: false)
        table.remove(other)
        let refresh = table.lead(key: key, participant: handle)
        #expect(refresh != nil)
        guard case .follow(let followed, _) = table.join(key: key, participant: handle, now: 0) else {
            Issue.record("a miss while the refresh leads follows it")
            return
        }
        #expect(followed === refresh)
    }

    @Test func passMarkersStayBounded() {
        let clock = ManualClock()
        let table = InFlightTable(clock: clock)
        for i in 0..<(InFlightTable.passCapacity + 50) { table.markPass(Array("http://a/\(i)".utf8)) }
        let marked = (0..<(InFlightTable.passCapacity + 50)).filter { table.isPass(Array("http://a/\($0)".utf8)) }.count
        #expect(marked <= InFlightTable.passCapacity)
        #expect(table.isPass(Array("http://a/\(InFlightTable.passCapacity + 49)".utf8)), "the newest is kept")
    }
}

extension InFlightFetch.Poll {
    var isWaiting: Bool { if case .waiting = self { true } else { false } }
    var isReleased: Bool { if case .released = self { true } else { false } }
}
