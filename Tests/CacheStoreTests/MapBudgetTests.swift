import Testing
@testable import CacheStore

/// The map budget's decisions: when eviction starts, how far it goes, the headroom it keeps.
struct MapBudgetTests {
    static let mib = 1 << 20

    @Test func headroomIsAFewPerCentOrOneMiBWhicheverIsLarger() {
        let small = MapBudget(mapBytes: 11 * Self.mib, batchBytes: Self.mib, pageSize: 4_096)
        #expect(small.reserve == Self.mib)
        let large = MapBudget(mapBytes: 1_100 * Self.mib, batchBytes: 8 * Self.mib, pageSize: 4_096)
        #expect(large.reserve == 1_100 * Self.mib / 32)
        // The reserve holds a whole-map purge's free-list record (8 bytes a page) many times over.
        #expect(large.reserve > 8 * (large.mapBytes / 4_096) * 8)
    }

    @Test func theLargestBatchAndTheReserveFitAboveTheEvictionMark() {
        for (map, batch) in [(11 * Self.mib, Self.mib), (40 * Self.mib, 2 * Self.mib), (1_100 * Self.mib, 8 * Self.mib)] {
            let b = MapBudget(mapBytes: map, batchBytes: batch, pageSize: 4_096)
            #expect(b.evictAbove + b.batchCost(batch) + b.reserve <= map)
            #expect(b.evictTo < b.evictAbove && b.evictTo > 0)
        }
    }

    @Test func evictsByPagesInUseNotStoredBytes() {
        let b = MapBudget(mapBytes: 11 * Self.mib, batchBytes: Self.mib, pageSize: 4_096)
        // 5 MiB stored, well under an 8 MiB capacity, but 9 MiB of pages in use: evict.
        let target = MapBudget.target(inUse: 9 * Self.mib, stored: 5 * Self.mib, capacity: 8 * Self.mib, budget: b)
        let t = try! #require(target)
        // At 1.8 map bytes per stored byte, down to `evictTo`.
        let expected = 5 * Self.mib - Int((Double(9 * Self.mib - b.evictTo) / 1.8).rounded(.up))
        #expect(abs(t - expected) <= 1)
        // Under the mark and under capacity: nothing.
        #expect(MapBudget.target(inUse: b.evictAbove, stored: 5 * Self.mib, capacity: 8 * Self.mib, budget: b) == nil)
    }

    @Test func capacityStillBoundsStoredBytes() {
        let b = MapBudget(mapBytes: 1_100 * Self.mib, batchBytes: 8 * Self.mib, pageSize: 4_096)
        let t = MapBudget.target(inUse: 500 * Self.mib, stored: 1_025 * Self.mib, capacity: 1_024 * Self.mib, budget: b)
        #expect(t == 1_024 * Self.mib - 1_024 * Self.mib / 10)
    }

    @Test func roomForABatchThatMetAFullMapLowersTheTarget() {
        let b = MapBudget(mapBytes: 11 * Self.mib, batchBytes: Self.mib, pageSize: 4_096)
        let plain = MapBudget.target(inUse: b.evictAbove + 1, stored: 4 * Self.mib, capacity: 8 * Self.mib, budget: b)!
        let roomy = MapBudget.target(inUse: b.evictAbove + 1, stored: 4 * Self.mib, capacity: 8 * Self.mib, budget: b,
                                     room: b.batchCost(Self.mib))!
        #expect(roomy < plain)
        // Under the mark, room alone starts an eviction.
        #expect(MapBudget.target(inUse: b.evictTo, stored: 4 * Self.mib, capacity: 8 * Self.mib, budget: b,
                                 room: b.batchCost(Self.mib)) != nil)
        // Never below nothing.
        #expect((0...10).contains(MapBudget.target(inUse: 11 * Self.mib, stored: 10, capacity: 8 * Self.mib, budget: b)!))
    }

    @Test func aRunTimeMapLeavesTheRecoveryMarginWithinTheDiskBudget() {
        for capacity in [Self.mib, 8 * Self.mib, 1 << 30] {
            let s = DiskStoreSettings(directory: "/nonexistent", capacity: capacity)
            #expect(s.mapSize + s.recoveryMargin == s.mapBound)
            #expect(s.mapBound + (256 << 10) == capacity + max(capacity / 10, 4 * Self.mib))
            #expect(s.recoveryMargin >= 512 << 10)
        }
    }
}
