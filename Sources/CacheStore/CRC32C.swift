import CLMDB

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every body chunk and
/// record the cache stores.
///
/// Chosen over xxHash64/XXH3 because x86-64 computes it in hardware: one `crc32q` per eight bytes,
/// about a fifth of an instruction per byte with the loop (xxHash64 needs about three quarters:
/// a load, two multiplies, an add and a rotate per eight bytes), and no code of ours beyond a loop. A CRC also catches every error burst of up to
/// 32 bits, so a flipped byte is always detected, not just with high probability. CPUs without
/// SSE4.2 use a table-driven slicing-by-8 loop.
public enum CRC32C {
    static let hardware = larder_crc32c_hardware_available() != 0

    /// The checksum of `bytes`, continuing `crc` (the checksum of the bytes before them).
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard bytes.count > 0 else { return crc }
        return hardware ? larder_crc32c_sse42(crc, bytes.baseAddress, bytes.count) : portable(bytes, continuing: crc)
    }

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
