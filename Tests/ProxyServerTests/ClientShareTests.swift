import Testing
@testable import ProxyServer

/// What each client address holds across workers: connections (`limits.max_connections_per_client`)
/// and requests at origins (`limits.origin_fetches_per_client`).
@Suite struct ClientShareTests {
    let a: [UInt8] = [127, 0, 0, 1]
    let b: [UInt8] = [127, 0, 0, 2]

    @Test func connectionsAreCountedPerAddressUpToTheLimit() {
        let counts = ClientAddressCounts()
        let first = counts.acquire(a, limit: 2)
        #expect(first != nil)
        #expect(counts.acquire(a, limit: 2) === first, "one share per address")
        #expect(counts.acquire(a, limit: 2) == nil, "a third connection is refused")
        #expect(counts.acquire(b, limit: 2) != nil, "another address is not")
        counts.release(a)
        #expect(counts.acquire(a, limit: 2) != nil, "a closed connection's room is back")
        #expect(counts.count(a) == 2)
        #expect(counts.acquire(a, limit: 0) != nil, "0: no limit")
    }

    @Test func originFetchesAreCountedOnTheSharedShare() {
        let counts = ClientAddressCounts()
        let share = counts.acquire(a, limit: 0)!
        let sameAddress = counts.acquire(a, limit: 0)!
        #expect(share.claimOriginFetch(limit: 2))
        #expect(sameAddress.claimOriginFetch(limit: 2), "another connection of the address counts on the same share")
        #expect(!share.claimOriginFetch(limit: 2), "a third is refused")
        #expect(share.originFetchesInFlight == 2, "a refusal takes nothing")
        share.releaseOriginFetch()
        #expect(sameAddress.claimOriginFetch(limit: 2))
        for _ in 0..<100 { #expect(share.claimOriginFetch(limit: 0)) }
    }
}
