import Testing
@testable import ProxyServer

struct DescriptorBudgetTests {
    @Test(arguments: [(1_024, 1), (1_024, 2), (512, 1), (65_536, 8), (200, 4), (1 << 20, 64)])
    func theLimitsNeverAddUpToMoreThanTheDescriptors(limit: Int, workers: Int) {
        let b = DescriptorBudget(limit: limit, workers: workers)
        // Each client connection may hold two descriptors, and the idle origin connections one each.
        if b.usable > 4 * workers {
            #expect(b.clientConnections * 2 + b.idleOriginConnections + b.pipes * 2 + b.reserved <= limit)
        }
        #expect(b.clientConnections >= workers && b.idleOriginConnections >= workers)
    }

    @Test func theDefaultSoftLimitOfSystemdIsShared() {
        let b = DescriptorBudget(limit: 1_024, workers: 2)
        #expect(b.reserved == 96 && b.usable == 928 && b.pipes == 58)
        #expect(b.idleOriginConnections == 203 && b.clientConnections == 304)
        #expect(b.maxConnections(configured: 10_000) == 304)
        #expect(b.maxConnections(configured: 100) == 100)
    }
}
