import Testing
@testable import ProxyServer

struct DetachedFetchLedgerTests {
    let limits = DetachedFetchLimits(fetchesPerClient: 2, bytesPerClient: 100, fetches: 3, bytes: 250)
    let alice: [UInt8] = [127, 0, 0, 1]
    let bob: [UInt8] = [127, 0, 0, 2]
    let carol: [UInt8] = [127, 0, 0, 3]

    @Test func eachLimitRefusesTheClaimThatWouldPassIt() throws {
        var ledger = DetachedFetchLedger()
        let a1 = try ledger.claim(client: alice, bytes: 40, limits: limits).get()
        _ = try ledger.claim(client: alice, bytes: 40, limits: limits).get()
        #expect(ledger.claim(client: alice, bytes: 1, limits: limits) == .failure(.fetchesPerClient))
        ledger.release(a1)
        #expect(ledger.claim(client: alice, bytes: 61, limits: limits) == .failure(.bytesPerClient))
        _ = try ledger.claim(client: alice, bytes: 60, limits: limits).get()
        _ = try ledger.claim(client: bob, bytes: 100, limits: limits).get()
        #expect(ledger.claim(client: carol, bytes: 1, limits: limits) == .failure(.fetches))
        #expect(ledger.fetchesInFlight == 3 && ledger.bytesClaimed == 200)
    }

    @Test func theTotalBytesBindEveryClientTogether() throws {
        var ledger = DetachedFetchLedger()
        _ = try ledger.claim(client: alice, bytes: 100, limits: limits).get()
        _ = try ledger.claim(client: bob, bytes: 100, limits: limits).get()
        #expect(ledger.claim(client: carol, bytes: 51, limits: limits) == .failure(.bytes))
        #expect(ledger.claim(client: carol, bytes: 50, limits: limits).map { _ in true } == .success(true))
    }

    @Test func releasesGiveBackExactlyWhatWasClaimedOnce() throws {
        var ledger = DetachedFetchLedger()
        let a = try ledger.claim(client: alice, bytes: 100, limits: limits).get()
        ledger.release(a)
        ledger.release(a)   // a second release of the same claim changes nothing
        #expect(ledger.fetchesInFlight == 0 && ledger.bytesClaimed == 0 && ledger.fetches(of: alice) == 0)
        _ = try ledger.claim(client: alice, bytes: 100, limits: limits).get()
        #expect(ledger.fetches(of: alice) == 1)
    }

    @Test func aClientsFirstDownloadMayBeAnySizeTheOthersMustFit() throws {
        var ledger = DetachedFetchLedger()
        let big = try ledger.claim(client: alice, bytes: 200, limits: DetachedFetchLimits(
            fetchesPerClient: 2, bytesPerClient: 100, fetches: 3, bytes: 1_000)).get()
        let limits = DetachedFetchLimits(fetchesPerClient: 2, bytesPerClient: 100, fetches: 3, bytes: 1_000)
        #expect(ledger.claim(client: alice, bytes: 1, limits: limits) == .failure(.bytesPerClient))
        ledger.release(big)
        #expect(ledger.claim(client: alice, bytes: 1, limits: limits).map { _ in true } == .success(true))
    }

    @Test func aClaimOfUnknownLengthGrowsWithinTheLimits() throws {
        var ledger = DetachedFetchLedger()
        let id = try ledger.claim(client: alice, bytes: 10, limits: limits).get()
        #expect(ledger.grow(id, by: 150, limits: limits) == nil)   // its only claim: no per-client bound
        #expect(ledger.bytesClaimed == 160)
        #expect(ledger.grow(id, by: 100, limits: limits) == .bytes)  // 260 would pass the total of 250
        // A second download of the same client's must fit beside what the first has claimed.
        #expect(ledger.claim(client: alice, bytes: 0, limits: limits) == .failure(.bytesPerClient))
        let small = try ledger.claim(client: bob, bytes: 50, limits: limits).get()
        let second = try ledger.claim(client: bob, bytes: 40, limits: limits).get()
        #expect(ledger.grow(second, by: 11, limits: limits) == .bytesPerClient)
        ledger.release(id)
        ledger.release(small)
        ledger.release(second)
        #expect(ledger.bytesClaimed == 0 && ledger.fetches(of: alice) == 0)
    }

    @Test func zeroLimitsRefuseEverything() {
        var ledger = DetachedFetchLedger()
        let none = DetachedFetchLimits(fetchesPerClient: 0, bytesPerClient: 0, fetches: 0, bytes: 0)
        #expect(ledger.claim(client: alice, bytes: 0, limits: none) == .failure(.fetchesPerClient))
    }
}
