import Testing
@testable import Statistics

@Suite struct TopHostsTests {
    @Test func runsOfOneHostAndInterleavedHostsAddUpTheSame() {
        let t = TopHosts()
        for _ in 0..<5 { t.count("a.example") }
        for host in ["b.example", "a.example", "b.example", "c.example", "a.example"] { t.count(host) }
        t.publish()
        let top = TopHosts.merged([t])
        #expect(top.map(\.host) == ["a.example", "b.example", "c.example"])
        #expect(top.map(\.requests) == [7, 2, 1])
    }

    @Test func theRunInProgressIsPublishedAndNotCountedTwice() {
        let t = TopHosts()
        for _ in 0..<3 { t.count("a.example") }
        t.publish()
        #expect(TopHosts.merged([t]).map(\.requests) == [3])
        t.count("a.example")
        t.publish()
        t.publish()
        #expect(TopHosts.merged([t]).map(\.requests) == [4])
    }

    @Test func aFullTableReplacesItsLeastCountedHost() {
        let t = TopHosts()
        for i in 0..<TopHosts.capacity { t.count("h\(i)"); t.count("h\(i)") }
        t.count("h0")
        t.count("new")
        t.count("h1")
        t.publish()
        let top = TopHosts.merged([t])
        #expect(top.first?.host == "h0")
        #expect(top.first?.requests == 3)
        #expect(top.contains { $0.host == "new" && $0.requests == 3 })
    }
}
