import CLMDB

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every body chunk and
/// record the cache stores.
///
/// Chosen over xxHash64/XXH3 because x86-64 computes it in hardware: one `crc32q` per eight bytes,
/// about a fifth of an instruction per byte with the loop (xxHash64 needs about three quarters:
/// a load, two multiplies, an add and a rotate per eight bytes), and no code of ours beyond a loop. A CRC also catches every error burst of up to
/// 32 bits, so a flipped byte is always detected, not just with high probability. CPUs without
/// SSE4.2 use a table-driven slicing-by-8 loop. Long inputs run three independent `crc32q` chains
/// over adjacent blocks and join them, since one chain waits on each instruction's latency.
public enum CRC32C {
    static let hardware = larder_crc32c_hardware_available() != 0

    /// The checksum of `bytes`, continuing `crc` (the checksum of the bytes before them).
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard bytes.count > 0 else { return crc }
        guard hardware else { return portable(bytes, continuing: crc) }
        if bytes.count < 3 * Int(LARDER_CRC32C_BLOCK) { return larder_crc32c_sse42(crc, bytes.baseAddress, bytes.count) }
        return shiftTables.withUnsafeBufferPointer { larder_crc32c_sse42_3way(crc, bytes.baseAddress, bytes.count, $0.baseAddress) }
    }

    /// For the three-way hardware loop: what advancing a CRC state over one block of zero bytes
    /// (the first 1,024 entries), and over two blocks (the next 1,024), does to each byte of the
    /// state. The arithmetic is linear, so a byte's contribution is the advanced state of that
    /// byte alone.
    static let shiftTables: [UInt32] = {
        let block = Int(LARDER_CRC32C_BLOCK)
        let zeros = [UInt8](repeating: 0, count: 2 * block)
        var t = [UInt32](repeating: 0, count: 2 * 1024)
        zeros.withUnsafeBytes { z in
            for (half, length) in [block, 2 * block].enumerated() {
                for byte in 0..<4 {
                    for value in 0..<256 {
                        let state = UInt32(value) << (8 * UInt32(byte))
                        // The C loop keeps the complement of a checksum as its state.
                        t[half * 1024 + byte * 256 + value] = ~larder_crc32c_sse42(~state, z.baseAddress, length)
                    }
                }
            }
        }
        return t
    }()

    public static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }

    /// Slicing-by-8: eight table lookups per eight bytes.
    static func portable(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var c = ~crc
        table.withUnsafeBufferPointer { t in
            var i = 0
            let n = bytes.count
            while n - i >= 8 {
                let low = c ^ (UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16
                               | UInt32(bytes[i + 3]) << 24)
                c = t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(bytes[i + 4])] ^ t[2 * 256 + Int(bytes[i + 5])]
                    ^ t[1 * 256 + Int(bytes[i + 6])] ^ t[Int(bytes[i + 7])]
                i += 8
            }
            while i < n {
                c = t[Int((c ^ UInt32(bytes[i])) & 0xFF)] ^ (c >> 8)
                i += 1
            }
        }
        return ~c
    }

    /// `table[k * 256 + b]`: the CRC of byte `b` followed by `k` zero bytes.
    private static let table: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for b in 0..<256 {
            var c = UInt32(b)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
            t[b] = c
        }
        for k in 1..<8 {
            for b in 0..<256 {
                let prev = t[(k - 1) * 256 + b]
                t[k * 256 + b] = t[Int(prev & 0xFF)] ^ (prev >> 8)
            }
        }
        return t
    }()
}
