import EventLoop
import Testing
@testable import ProxyServer

@Suite struct LRUCacheTests {
    @Test func evictsTheLeastRecentlyUsedEntryWhenFull() {
        var cache = LRUCache<String, Int>(capacity: 3)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(3, for: "c")
        #expect(cache.value(for: "a") == 1)  // a is now the most recent; b the least
        cache.set(4, for: "d")
        #expect(cache.peek("b") == nil)
        #expect(cache.keysByRecency == ["d", "a", "c"])
        #expect(cache.count == 3)
    }

    @Test func settingAKeyAgainReplacesItsValueAndMakesItRecent() {
        var cache = LRUCache<String, Int>(capacity: 2)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(10, for: "a")
        cache.set(3, for: "c")
        #expect(cache.peek("a") == 10)
        #expect(cache.peek("b") == nil)
        #expect(cache.count == 2)
    }

    @Test func peekingDoesNotChangeTheOrder() {
        var cache = LRUCache<String, Int>(capacity: 2)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        _ = cache.peek("a")
        cache.set(3, for: "c")
        #expect(cache.peek("a") == nil)
        #expect(cache.keysByRecency == ["c", "b"])
    }

    @Test func aHotKeySurvivesAFloodOfColdOnesAndNothingIsWiped() {
        var cache = LRUCache<Int, Int>(capacity: 100)
        cache.set(-1, for: -1)
        for k in 0..<10_000 {
            cache.set(k, for: k)
            if k % 50 == 0 { #expect(cache.value(for: -1) == -1) }
        }
        #expect(cache.peek(-1) == -1)
        #expect(cache.count == 100)
        // The newest cold keys are all still there: the cache never emptied itself.
        #expect((9_901..<10_000).allSatisfy { cache.peek($0) == $0 })
    }

    @Test func capacityOneKeepsTheLatest() {
        var cache = LRUCache<String, Int>(capacity: 1)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        #expect(cache.peek("a") == nil && cache.peek("b") == 2)
        #expect(cache.keysByRecency == ["b"])
    }
}

@Suite struct VerdictMemoryTests {
    static func credential(_ n: Int) -> [UInt8] { Array("Basic guess-\(n)".utf8) }

    @Test func aValidCredentialOutlivesMoreWrongOnesThanTheLimit() {
        var memory = VerdictMemory(capacity: 1_000, validFor: 300, invalidFor: 5)
        let real = Array("Basic real".utf8)
        memory.remember(real, .valid, now: 0)
        for n in 0..<5_000 { memory.remember(Self.credential(n), .invalid, now: 1) }
        #expect(memory.verdict(real, now: 2) == .valid)
        #expect(memory.count.invalid == 1_000)
        #expect(memory.verdict(Self.credential(4_999), now: 2) == .invalid)
        #expect(memory.verdict(Self.credential(0), now: 2) == nil)  // the oldest guesses went first
    }

    @Test func hotValidCredentialsStayWhileColdOnesAreEvicted() {
        var memory = VerdictMemory(capacity: 10, validFor: 300, invalidFor: 5)
        let hot = Array("Basic hot".utf8)
        memory.remember(hot, .valid, now: 0)
        for n in 0..<50 {
            memory.remember(Self.credential(n), .valid, now: 1)
            #expect(memory.verdict(hot, now: 1) == .valid)
        }
        #expect(memory.verdict(hot, now: 2) == .valid)
        #expect(memory.count.valid == 10)
    }

    @Test func verdictsExpire() {
        var memory = VerdictMemory(capacity: 10, validFor: 300, invalidFor: 5)
        memory.remember([1], .valid, now: 0)
        memory.remember([2], .invalid, now: 0)
        #expect(memory.verdict([1], now: 299) == .valid)
        #expect(memory.verdict([1], now: 300) == nil)
        #expect(memory.verdict([2], now: 4.9) == .invalid)
        #expect(memory.verdict([2], now: 5) == nil)
    }
}

@Suite struct PendingCheckLimitsTests {
    @Test func eachClientHasItsShare() {
        var limits = PendingCheckLimits(total: 10, perClient: 2)
        let a: [UInt8] = [127, 0, 0, 2], b: [UInt8] = [127, 0, 0, 1]
        #expect(limits.admit(a) == nil)
        #expect(limits.admit(a) == nil)
        #expect(limits.admit(a) == .clientShareFull)
        #expect(limits.admit(b) == nil)
        limits.release(a)
        #expect(limits.admit(a) == nil)
        #expect(limits.pending == 3)
        #expect(limits.pending(of: a) == 2 && limits.pending(of: b) == 1)
    }

    @Test func theTotalIsBoundedAcrossClients() {
        var limits = PendingCheckLimits(total: 3, perClient: 2)
        for i in 0..<3 { #expect(limits.admit([10, 0, 0, UInt8(i)]) == nil) }
        #expect(limits.admit([10, 0, 0, 9]) == .queueFull)
        limits.release([10, 0, 0, 1])
        #expect(limits.admit([10, 0, 0, 9]) == nil)
        #expect(limits.pending == 3)
    }

    @Test func releasingWhatWasNeverAdmittedChangesNothing() {
        var limits = PendingCheckLimits(total: 3, perClient: 1)
        limits.release([1, 2, 3, 4])
        #expect(limits.pending == 0)
        #expect(limits.admit([1, 2, 3, 4]) == nil)
        #expect(limits.admit([1, 2, 3, 4]) == .clientShareFull)
    }
}

@Suite struct LogThrottleTests {
    @Test func oneLineASecondCountingWhatWasSkipped() {
        var throttle = LogThrottle(interval: 1)
        #expect(throttle.note(now: 10) == 1)
        #expect(throttle.note(now: 10.2) == nil)
        #expect(throttle.note(now: 10.9) == nil)
        #expect(throttle.note(now: 11.0) == 3)
        #expect(throttle.note(now: 11.5) == nil)
        #expect(throttle.note(now: 20) == 2)
    }
}

@Suite struct AuthenticatorAdmissionTests {
    @Test func checksBeyondAClientsShareAreRefusedAtOnceButJoiningOneIsFree() async throws {
        // A slow hash (about a quarter of a second), so the first check is still running below.
        let hash = try #require(PasswordHash.make("pw", bcrypt: true, cost: 12))
        let auth = ProxyAuthenticator(users: try UsersFile.parse("alice:\(hash)\n"), realm: "R", destinations: ["*"],
                                      pendingLimit: 2, pendingPerClient: 1)
        let attacker: [UInt8] = [127, 0, 0, 2], other: [UInt8] = [127, 0, 0, 3], third: [UInt8] = [127, 0, 0, 4]
        let first = Array("Basic YWxpY2U6YQ==".utf8)   // alice:a
        let second = Array("Basic YWxpY2U6Yg==".utf8)  // alice:b
        let now = SystemClock.shared.monotonic
        let (verdicts, delivery) = AsyncStream.makeStream(of: ProxyAuthenticator.Verdict.self)
        #expect(auth.check(first, client: attacker, now: now) { delivery.yield($0) } == .queued)
        #expect(auth.check(second, client: attacker, now: now) { _ in } == .refused(.clientShareFull, logCount: 1))
        // The same credential from elsewhere joins the running check and takes no place.
        #expect(auth.check(first, client: other, now: now) { _ in } == .queued)
        #expect(auth.check(second, client: other, now: now) { _ in } == .queued)
        // Logged once a second at most.
        #expect(auth.check(Array("Basic YWxpY2U6Yw==".utf8), client: third, now: now + 0.5) { _ in }
                == .refused(.queueFull, logCount: nil))
        var iterator = verdicts.makeAsyncIterator()
        #expect(await iterator.next() == .invalid)
    }
}
