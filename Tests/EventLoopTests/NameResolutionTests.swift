import Testing
@testable import EventLoop

private func address(_ literal: String) -> SocketAddress { SocketAddress(ipLiteral: literal, port: 0)! }

private func hosts(_ answer: NameCache.Answer?) -> [String]? {
    guard case .addresses(let list)? = answer else { return nil }
    return list.map(\.host)
}

private func notFound(_ answer: NameCache.Answer?) -> String? {
    guard case .notFound(let reason)? = answer else { return nil }
    return reason
}

/// The per-worker cache of answers: TTLs (capped), negative answers, the LRU bound.
@Suite struct NameCacheTests {
    @Test func anAnswerIsKeptForItsTTLAndNotAMomentLonger() {
        var cache = NameCache()
        cache.remember(addresses: [address("192.0.2.1")], ttl: 30, for: "a.test", now: 100)
        #expect(hosts(cache.answer(for: "a.test", now: 100)) == ["192.0.2.1"])
        #expect(hosts(cache.answer(for: "a.test", now: 129.9)) == ["192.0.2.1"])
        #expect(cache.answer(for: "a.test", now: 130) == nil)
        #expect(cache.answer(for: "b.test", now: 100) == nil)
    }

    @Test func longTTLsAreCapped() {
        var cache = NameCache()
        cache.remember(addresses: [address("192.0.2.1")], ttl: 86_400, for: "a.test", now: 0)
        #expect(cache.answer(for: "a.test", now: NameCache.maxPositive - 1) != nil)
        #expect(cache.answer(for: "a.test", now: NameCache.maxPositive) == nil)
    }

    @Test func aTTLOfZeroIsNotKeptAndForgetsAnOlderAnswer() {
        var cache = NameCache()
        cache.remember(addresses: [address("192.0.2.1")], ttl: 60, for: "a.test", now: 0)
        cache.remember(addresses: [address("192.0.2.2")], ttl: 0, for: "a.test", now: 1)
        #expect(cache.answer(for: "a.test", now: 1) == nil)
        cache.remember(addresses: [address("192.0.2.3")], ttl: 0, for: "new.test", now: 1)
        #expect(cache.answer(for: "new.test", now: 1) == nil)
    }

    @Test func negativeAnswersAreKeptBrieflyWithinTheirSOA() {
        var cache = NameCache()
        cache.rememberNotFound("no such name", soaTTL: 3, for: "short.test", now: 0)
        cache.rememberNotFound("no such name", soaTTL: 3_600, for: "long.test", now: 0)
        cache.rememberNotFound("no such name", soaTTL: 0, for: "nosoa.test", now: 0)
        #expect(notFound(cache.answer(for: "short.test", now: 2.9)) == "no such name")
        #expect(cache.answer(for: "short.test", now: 3) == nil)
        #expect(cache.answer(for: "long.test", now: NameCache.maxNegative - 0.1) != nil)
        #expect(cache.answer(for: "long.test", now: NameCache.maxNegative) == nil)
        #expect(cache.answer(for: "nosoa.test", now: NameCache.negativeWithoutSOA - 0.1) != nil)
        #expect(cache.answer(for: "nosoa.test", now: NameCache.negativeWithoutSOA) == nil)
    }

    @Test func aNameNobodyAnsweredIsHeldBriefly() {
        var cache = NameCache()
        cache.rememberTimeout(for: "dead.test", now: 0)
        if case .timedOut? = cache.answer(for: "dead.test", now: NameCache.timeoutHold - 0.1) {} else {
            Issue.record("a timeout just seen is not remembered")
        }
        #expect(cache.answer(for: "dead.test", now: NameCache.timeoutHold) == nil)
    }

    @Test func theLeastRecentlyUsedNameGoesFirst() {
        var cache = NameCache(capacity: 2)
        cache.remember(addresses: [address("192.0.2.1")], ttl: 60, for: "a.test", now: 0)
        cache.remember(addresses: [address("192.0.2.2")], ttl: 60, for: "b.test", now: 0)
        _ = cache.answer(for: "a.test", now: 1)
        cache.remember(addresses: [address("192.0.2.3")], ttl: 60, for: "c.test", now: 1)
        #expect(cache.count == 2)
        #expect(cache.answer(for: "b.test", now: 1) == nil)
        #expect(hosts(cache.answer(for: "a.test", now: 1)) == ["192.0.2.1"])
        #expect(hosts(cache.answer(for: "c.test", now: 1)) == ["192.0.2.3"])
    }
}

/// Lookups pending per client, per registered domain and in all.
@Suite struct LookupBudgetTests {
    let alice: [UInt8] = [192, 0, 2, 1]
    let bob: [UInt8] = [192, 0, 2, 2]

    @Test func aClientIsHeldToItsShareWhileOthersGoOn() {
        var budget = LookupBudget(total: 100, perClient: 2, perDomain: 50)
        #expect(budget.admit(client: alice, domain: "a.test") == nil)
        #expect(budget.admit(client: alice, domain: "b.test") == nil)
        #expect(budget.admit(client: alice, domain: "c.test") == .client(limit: 2))
        #expect(budget.admit(client: bob, domain: "c.test") == nil)
        budget.release(client: alice, domain: "a.test")
        #expect(budget.admit(client: alice, domain: "c.test") == nil)
        #expect(budget.pending(client: alice) == 2 && budget.pending(client: bob) == 1)
    }

    @Test func aDomainIsHeldToItsShareWhateverTheClients() {
        var budget = LookupBudget(total: 100, perClient: 10, perDomain: 2)
        #expect(budget.admit(client: alice, domain: "dead.test") == nil)
        #expect(budget.admit(client: bob, domain: "dead.test") == nil)
        #expect(budget.admit(client: [192, 0, 2, 3], domain: "dead.test") == .domain("dead.test", limit: 2))
        #expect(budget.admit(client: alice, domain: "fine.test") == nil)
        #expect(budget.admit(client: nil, domain: "dead.test") == .domain("dead.test", limit: 2))
    }

    @Test func aClientTakesAtMostHalfOfADomain() {
        var budget = LookupBudget(total: 100, perClient: 10, perDomain: 4)
        #expect(budget.admit(client: alice, domain: "dead.test") == nil)
        #expect(budget.admit(client: alice, domain: "dead.test") == nil)
        #expect(budget.admit(client: alice, domain: "dead.test") == .clientInDomain("dead.test", limit: 2))
        #expect(budget.admit(client: bob, domain: "dead.test") == nil)
        budget.release(client: alice, domain: "dead.test")
        #expect(budget.admit(client: alice, domain: "dead.test") == nil)
    }

    @Test func theTotalBoundsEveryone() {
        var budget = LookupBudget(total: 2, perClient: 10, perDomain: 10)
        #expect(budget.admit(client: alice, domain: "a.test") == nil)
        #expect(budget.admit(client: nil, domain: "b.test") == nil)
        #expect(budget.admit(client: bob, domain: "c.test") == .full(limit: 2))
        budget.release(client: nil, domain: "b.test")
        #expect(budget.admit(client: bob, domain: "c.test") == nil)
        #expect(budget.pending == 2)
    }

    @Test func releasingEverythingLeavesNothingCounted() {
        var budget = LookupBudget(total: 10, perClient: 10, perDomain: 10)
        for d in ["a.test", "b.test", "a.test"] { _ = budget.admit(client: alice, domain: d) }
        for d in ["a.test", "b.test", "a.test"] { budget.release(client: alice, domain: d) }
        #expect(budget.pending == 0 && budget.pending(client: alice) == 0 && budget.pending(domain: "a.test") == 0)
        // A release without its admit changes nothing.
        budget.release(client: alice, domain: "a.test")
        #expect(budget.pending == 0)
    }

    @Test func reasonsNameWhoseLookupsArePending() {
        #expect(LookupBudget.Refusal.client(limit: 64).reason == "64 name lookups already pending for this client")
        #expect(LookupBudget.Refusal.domain("dead.test", limit: 32).reason
            == "32 name lookups already pending under dead.test")
    }

    @Test(arguments: [
        ("www.example.com", "example.com"),
        ("a.b.c.example.com.", "example.com"),
        ("example.com", "example.com"),
        ("hole-7.test", "hole-7.test"),
        ("n3.hole.test", "hole.test"),
        ("localhost", "localhost"),
        ("www.example.co.uk", "example.co.uk"),
        ("shop.example.com.au", "example.com.au"),
        ("a.b.example.de", "example.de"),
        ("x.gov.uk", "x.gov.uk"),
        ("co.uk", "co.uk"),
    ])
    func registeredDomainIsTheLastTwoLabelsOrThreeUnderACountrysSecondLevel(host: String, domain: String) {
        #expect(LookupBudget.registeredDomain(of: host) == domain)
    }
}

/// What the A and AAAA answers of one lookup add up to.
@Suite struct LookupAnswersTests {
    typealias F = LookupAnswers.Family
    static let v4 = F.addresses([address("192.0.2.1")], ttl: 60)
    static let v6 = F.addresses([address("2001:db8::1")], ttl: 30)

    static func describe(_ v: LookupAnswers.Verdict) -> String {
        switch v {
        case .waitForOther: return "wait"
        case .waitBrieflyForOther: return "grace"
        case .addresses(let list, let ttl): return "addresses \(list.map(\.host).joined(separator: ",")) ttl \(ttl)"
        case .notFound(let reason, let ttl): return "notFound \(reason) soa \(ttl)"
        case .timedOut: return "timedOut"
        case .failed(let reason): return "failed \(reason)"
        }
    }

    @Test func bothFamiliesIPv4FirstWithTheSmallerTTL() {
        #expect(Self.describe(LookupAnswers.verdict(v4: Self.v4, v6: Self.v6))
            == "addresses 192.0.2.1,2001:db8::1 ttl 30")
        #expect(Self.describe(LookupAnswers.verdict(v4: Self.v4, v6: .noData(ttl: 0))) == "addresses 192.0.2.1 ttl 60")
        #expect(Self.describe(LookupAnswers.verdict(v4: .timedOut, v6: Self.v6)) == "addresses 2001:db8::1 ttl 30")
    }

    @Test func oneFamilysAddressesWaitBrieflyForTheOther() {
        #expect(Self.describe(LookupAnswers.verdict(v4: Self.v4, v6: nil)) == "grace")
        #expect(Self.describe(LookupAnswers.verdict(v4: nil, v6: Self.v6)) == "grace")
        #expect(Self.describe(LookupAnswers.verdict(v4: Self.v4, v6: nil, graceOver: true)) == "addresses 192.0.2.1 ttl 60")
        #expect(Self.describe(LookupAnswers.verdict(v4: .noData(ttl: 5), v6: nil)) == "wait")
        #expect(Self.describe(LookupAnswers.verdict(v4: nil, v6: nil)) == "wait")
    }

    @Test func nxdomainDecidesAtOnce() {
        #expect(Self.describe(LookupAnswers.verdict(v4: .nxdomain(ttl: 7), v6: nil))
            == "notFound no such name (NXDOMAIN) soa 7")
        #expect(Self.describe(LookupAnswers.verdict(v4: nil, v6: .nxdomain(ttl: 0)))
            == "notFound no such name (NXDOMAIN) soa 0")
    }

    @Test func failuresOfBoth() {
        #expect(Self.describe(LookupAnswers.verdict(v4: .noData(ttl: 9), v6: .noData(ttl: 4)))
            == "notFound the name has no address records soa 4")
        #expect(Self.describe(LookupAnswers.verdict(v4: .timedOut, v6: .noData(ttl: 0))) == "timedOut")
        #expect(Self.describe(LookupAnswers.verdict(v4: .timedOut, v6: .timedOut)) == "timedOut")
        #expect(Self.describe(LookupAnswers.verdict(v4: .failed("refused"), v6: .noData(ttl: 0))) == "failed refused")
    }
}

@Suite struct HostsFileTests {
    @Test func namesAndAliasesCaseInsensitiveCommentsIgnored() {
        let table = HostsFile.parse("""
            # comment
            127.0.0.1\tlocalhost Local.Alias   # trailing
            ::1 localhost ip6-localhost
            not-an-address somename
            192.0.2.9
            """)
        #expect(table["localhost"]?.map(\.host) == ["127.0.0.1", "::1"])
        #expect(table["local.alias"]?.map(\.host) == ["127.0.0.1"])
        #expect(table["ip6-localhost"]?.map(\.host) == ["::1"])
        #expect(table["somename"] == nil)
        #expect(table.count == 3)
    }

    @Test func withoutAFileLocalhostStillResolves() {
        #expect(HostsFile.load("/nonexistent/hosts")["localhost"]?.map(\.host) == ["127.0.0.1", "::1"])
    }

    @Test func anAddressTakesThePortAskedFor() {
        let a = address("2001:db8::5").withPort(8080)
        #expect(a.port == 8080 && a.host == "2001:db8::5")
        #expect(address("192.0.2.1").withPort(443).description == "192.0.2.1:443")
    }
}
