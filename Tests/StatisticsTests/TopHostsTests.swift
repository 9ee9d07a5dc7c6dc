import Testing
@testable import Statistics

@Suite struct TopHostsTests {
    @Test func runsOfOneHostAndInterleavedHostsAddUpTheSame() {
        let t = TopHosts()
        for _ in 0..<5 { t.count("a.example", port: 80) }
        for host in ["b.example", "a.example", "b.example", "c.example", "a.example"] { t.count(host, port: 80) }
        t.publish()
        let top = TopHosts.merged([t])
        #expect(top.map(\.host) == ["a.example", "b.example", "c.example"])
        #expect(top.map(\.requests) == [7, 2, 1])
    }

    @Test func theRunInProgressIsPublishedAndNotCountedTwice() {
        let t = TopHosts()
        for _ in 0..<3 { t.count("a.example", port: 80) }
        t.publish()
        #expect(TopHosts.merged([t]).map(\.requests) == [3])
        t.count("a.example", port: 80)
        t.publish()
        t.publish()
        #expect(TopHosts.merged([t]).map(\.requests) == [4])
    }

    @Test func aFullTableReplacesItsLeastCountedHost() {
        let t = TopHosts()
        for i in 0..<TopHosts.capacity { t.count("h\(i)", port: 80); t.count("h\(i)", port: 80) }
        t.count("h0", port: 80)
        t.count("new", port: 80)
        t.noteLookup(.lookupHit, host: "new", port: 80)
        t.count("h1", port: 80)
        t.publish()
        let top = TopHosts.merged([t])
        #expect(top.first?.host == "h0")
        #expect(top.first?.requests == 3)
        // The newcomer inherits the evicted host's requests, not its hits and misses.
        #expect(top.contains { $0.host == "new" && $0.requests == 3 && $0.hits == 1 && $0.misses == 0 })
        #expect(top.count == TopHosts.published)
    }

    /// Origins on one host but different ports are told apart.
    @Test func portsAreOriginsOfTheirOwn() {
        let t = TopHosts()
        t.count("127.0.0.1", port: 8001)
        t.count("127.0.0.1", port: 8002)
        t.count("127.0.0.1", port: 8002)
        t.publish()
        #expect(TopHosts.merged([t]).map(\.name) == ["127.0.0.1:8002", "127.0.0.1:8001"])
    }

    @Test func names() {
        #expect(TopHosts.Entry(host: "a.example", port: 80, requests: 1).name == "a.example")
        #expect(TopHosts.Entry(host: "a.example", port: 443, requests: 1).name == "a.example")
        #expect(TopHosts.Entry(host: "a.example", port: 8443, requests: 1).name == "a.example:8443")
        #expect(TopHosts.Entry(host: "::1", port: 8080, requests: 1).name == "[::1]:8080")
    }

    /// Hits and misses as `/stats`' `hit_ratio` splits them; in the run in progress, across a
    /// publish, and for an origin whose answer comes after another origin's request.
    @Test func hitRatioPerOrigin() throws {
        let t = TopHosts()
        t.count("a.example", port: 80)
        t.noteLookup(.lookupMiss, host: "a.example", port: 80)
        for _ in 0..<3 {
            t.count("a.example", port: 80)
            t.noteLookup(.lookupHit, host: "a.example", port: 80)
        }
        t.count("a.example", port: 80)
        t.noteLookup(.lookupPass, host: "a.example", port: 80)  // neither
        t.publish()
        t.count("a.example", port: 80)
        t.noteLookup(.lookupStaleServed, host: "a.example", port: 80)
        t.count("b.example", port: 80)
        // a.example's revalidation answers after b.example's request came.
        t.noteLookup(.lookupRevalidatedUnchanged, host: "a.example", port: 80)
        t.noteLookup(.lookupOnlyIfCachedMiss, host: "b.example", port: 80)
        t.noteLookup(.collapsedRequests, host: "b.example", port: 80)  // neither
        // Untracked: nothing to add to.
        t.noteLookup(.lookupHit, host: "never.example", port: 80)
        t.publish()
        let top = TopHosts.merged([t])
        let a = try #require(top.first { $0.host == "a.example" })
        #expect((a.requests, a.hits, a.misses) == (6, 5, 1))
        #expect(a.hitRatio == 5.0 / 6.0)
        let b = try #require(top.first { $0.host == "b.example" })
        #expect((b.requests, b.hits, b.misses) == (1, 0, 1))
        #expect(b.hitRatio == 0)
        #expect(!top.contains { $0.host == "never.example" })
    }

    @Test func noLookupsNoRatio() {
        #expect(TopHosts.Entry(host: "a", port: 80, requests: 4).hitRatio == nil)
    }

    @Test func workersAddUp() {
        let one = TopHosts(), two = TopHosts()
        one.count("a.example", port: 80)
        one.noteLookup(.lookupHit, host: "a.example", port: 80)
        two.count("a.example", port: 80)
        two.noteLookup(.lookupMiss, host: "a.example", port: 80)
        two.count("b.example", port: 80)
        one.publish()
        two.publish()
        let top = TopHosts.merged([one, two])
        #expect(top.map(\.host) == ["a.example", "b.example"])
        #expect((top[0].requests, top[0].hits, top[0].misses) == (2, 1, 1))
    }
}
