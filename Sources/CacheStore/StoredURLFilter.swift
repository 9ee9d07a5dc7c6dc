import CLMDB
import Glibc

/// Which URLs the disk may hold, as a Bloom filter of their primary digests: a lookup for a URL the
/// filter has never seen answers "not stored" without a read transaction (an uncacheable URL's
/// every request, every miss). Bits are set before an entry's commit is queued and for every entry
/// found at start, and never cleared: an entry evicted or removed leaves its bits, so the filter
/// only ever says "maybe" too often, never "no" wrongly. Shared by the loops (reads) and whoever
/// stores (sets), through relaxed atomic words.
final class StoredURLFilter: @unchecked Sendable {
    private let words: UnsafeMutablePointer<UInt64>
    /// Bits in all, a power of two.
    private let bitCount: UInt64
    private let mask: UInt64

    /// About ten bits for each entry the disk could hold at 2 KiB apiece (three probes: under 2 %
    /// false "maybe"), between 1 Mibit and 256 Mibit (32 MiB).
    init(diskCapacity: Int) {
        let wanted = UInt64(max(1, diskCapacity / 2048)) * 10
        var bits: UInt64 = 1 << 20
        while bits < wanted, bits < 1 << 28 { bits <<= 1 }
        bitCount = bits
        mask = bits - 1
        // Mapped rather than allocated: zero pages from the kernel, resident only once written, and
        // the allocator's heap left as it was (its layout shows in every request's cost).
        let mapped = mmap(nil, Int(bits / 8), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != MAP_FAILED else { fatalError("cannot map \(bits / 8) bytes for the stored-URL filter") }
        words = mapped.bindMemory(to: UInt64.self, capacity: Int(bits / 64))
    }

    deinit { munmap(words, Int(bitCount / 8)) }

    /// The filter's size in bytes.
    var byteCount: Int { Int(bitCount / 8) }

    func insert(_ digest: KeyDigest) {
        for i: UInt64 in 0..<3 {
            let bit = probe(digest, i)
            larder_bits_set(words + Int(bit >> 6), 1 << (bit & 63))
        }
    }

    func mayContain(_ digest: KeyDigest) -> Bool {
        for i: UInt64 in 0..<3 {
            let bit = probe(digest, i)
            if larder_bits_load(words + Int(bit >> 6)) & (1 << (bit & 63)) == 0 { return false }
        }
        return true
    }

    /// Probe `i` of three, from the digest's two independent halves (double hashing).
    @inline(__always)
    private func probe(_ d: KeyDigest, _ i: UInt64) -> UInt64 { (d.low &+ i &* d.high) & mask }
}
