import Testing
@testable import CacheStore

/// Digests hash by folding their words into the table's seed (`_rawHashValue(seed:)`), not
/// through `Hasher`: tables keyed by them must still find every key, and keys a client can line
/// up (neighbouring digests) must still spread over the buckets.
@Suite struct KeyDigestHashTests {
    @Test func aTableOfManyEntryKeysFindsAndForgetsEachOne() {
        var table: [EntryKey: Int] = [:]
        let keys = (0..<20_000).map { i in
            EntryKey(primary: KeyDigest(Array("http://a/\(i / 4)".utf8)), secondary: KeyDigest(Array("v\(i % 4)".utf8)))
        }
        for (i, k) in keys.enumerated() { table[k] = i }
        #expect(table.count == keys.count)
        #expect(keys.enumerated().allSatisfy { table[$0.element] == $0.offset })
        for k in keys.prefix(10_000) { table[k] = nil }
        #expect(table.count == 10_000 && keys.prefix(10_000).allSatisfy { table[$0] == nil })
        #expect(keys.suffix(10_000).allSatisfy { table[$0] != nil })
    }

    @Test func everyWordAndTheSeedChangeTheHash() {
        let a = KeyDigest(high: 1, low: 2), b = KeyDigest(high: 3, low: 4)
        let key = EntryKey(primary: a, secondary: b)
        let hash = key._rawHashValue(seed: 7)
        #expect(EntryKey(primary: b, secondary: a)._rawHashValue(seed: 7) != hash)
        #expect(EntryKey(primary: KeyDigest(high: 1, low: 3), secondary: b)._rawHashValue(seed: 7) != hash)
        #expect(EntryKey(primary: KeyDigest(high: 2, low: 2), secondary: b)._rawHashValue(seed: 7) != hash)
        #expect(EntryKey(primary: a, secondary: KeyDigest(high: 3, low: 5))._rawHashValue(seed: 7) != hash)
        #expect(EntryKey(primary: a, secondary: KeyDigest(high: 4, low: 4))._rawHashValue(seed: 7) != hash)
        #expect(key._rawHashValue(seed: 8) != hash)
        #expect(a._rawHashValue(seed: 7) != a._rawHashValue(seed: 8))
        #expect(a._rawHashValue(seed: 7) != KeyDigest(high: 2, low: 1)._rawHashValue(seed: 7))
    }

    /// A table's seed is only its storage's address: the hash also takes a secret drawn for the
    /// process, so a key and a seed do not hash as the unkeyed fold would.
    @Test func theHashTakesTheProcessSecretBesideTheTableSeed() {
        let a = KeyDigest(high: 1, low: 2)
        #expect(KeyDigest.keyed(0) != 0)
        #expect(a._rawHashValue(seed: 7) == Int(truncatingIfNeeded: KeyDigest.fold(a, into: KeyDigest.keyed(7))))
        #expect(a._rawHashValue(seed: 7) != Int(truncatingIfNeeded: KeyDigest.fold(a, into: 7)))
        let key = EntryKey(primary: a, secondary: a)
        #expect(key._rawHashValue(seed: 7)
                != Int(truncatingIfNeeded: KeyDigest.fold(a, into: KeyDigest.fold(a, into: 7))))
    }

    /// 16,384 digests that differ in one low bit each, or count up in one word, over 4,096
    /// buckets: no bucket gets more than a handful (4 on average; over 20 is a chance of about
    /// 1 in 130,000 for a random hash), for any of several keyed seeds. The fold is given the seed
    /// a table's hash would pass it, with fixed values standing in for the process's random secret.
    @Test(arguments: [0, 1, -1, 0x5DEECE66D, 0x5586_96C6_FBB0, 0x7F12_3456_7000])
    func neighbouringDigestsSpreadOverTheBuckets(seed: Int) {
        let keyed = UInt64(truncatingIfNeeded: seed)
        let none = KeyDigest(high: 0, low: 0)
        let patterns: [(Int) -> KeyDigest] = [
            { KeyDigest(high: 0, low: UInt64($0)) },
            { KeyDigest(high: UInt64($0), low: 0) },
            { KeyDigest(high: UInt64($0) << 50, low: UInt64($0) << 50) },
        ]
        for pattern in patterns {
            var buckets = [Int](repeating: 0, count: 4_096)
            for i in 0..<16_384 { buckets[Int(truncatingIfNeeded: KeyDigest.fold(pattern(i), into: keyed)) & 4_095] += 1 }
            #expect(buckets.max()! <= 20)
            // As `EntryKey` folds them: the primary digest first, then the secondary.
            let entryBuckets = (0..<16_384).reduce(into: [Int](repeating: 0, count: 4_096)) { b, i in
                b[Int(truncatingIfNeeded: KeyDigest.fold(none, into: KeyDigest.fold(pattern(i), into: keyed))) & 4_095] += 1
            }
            #expect(entryBuckets.max()! <= 20)
        }
    }
}
