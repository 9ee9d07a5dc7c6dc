import Testing
@testable import ProxyServer

private final class Box {
    let n: Int
    init(_ n: Int) { self.n = n }
}

@Suite struct StreamTableTests {
    /// Random inserts, replacements, lookups and removals agree with a dictionary's, for ids a
    /// client might pick: in order, far apart, and all landing on one slot.
    @Test(arguments: [1, 2, 3])
    func actsAsADictionary(_ pattern: Int) {
        var generator = SystemRandomNumberGenerator()
        var table = StreamTable<Box>(capacity: 4)
        var model: [Int32: Int] = [:]
        func id(_ k: Int) -> Int32 {
            switch pattern {
            case 1: return Int32(2 * k + 1)
            case 2: return Int32(truncatingIfNeeded: (k &* 2_654_435_761) | 1)
            default: return Int32(1 + k << 20)  // one home slot for all: long probes
            }
        }
        for step in 0..<20_000 {
            let k = Int.random(in: 0..<300, using: &generator)
            let key = id(k)
            switch Int.random(in: 0..<4, using: &generator) {
            case 0, 1:
                table[key] = Box(step)
                model[key] = step
            case 2:
                #expect(table.removeValue(forKey: key)?.n == model.removeValue(forKey: key))
            default:
                #expect(table[key]?.n == model[key])
            }
            #expect(table.count == model.count)
        }
        for (key, n) in model { #expect(table[key]?.n == n) }
        #expect(table.allValues.map(\.n).sorted() == model.values.sorted())
        table.removeAll()
        #expect(table.isEmpty && model.keys.allSatisfy { table[$0] == nil })
    }

    @Test func idZeroIsNeverAStream() {
        var table = StreamTable<Box>(capacity: 4)
        table[1] = Box(1)
        #expect(table[0] == nil)
        #expect(table.removeValue(forKey: 0) == nil)
        #expect(table.count == 1 && table[1]?.n == 1)
    }

    @Test func aRemovedStreamLeavesTheOthersFindable() {
        var table = StreamTable<Box>(capacity: 4)
        // Ids with one home slot sit in a run; removing one from its middle must not hide the rest.
        let ids: [Int32] = (0..<6).map { Int32(1 + $0 << 20) }
        for (i, id) in ids.enumerated() { table[id] = Box(i) }
        table[ids[2]] = nil
        for (i, id) in ids.enumerated() where i != 2 { #expect(table[id]?.n == i) }
        #expect(table[ids[2]] == nil && table.count == 5)
    }
}
