/// A 128-bit digest of a cache key. LMDB keys are limited to 511 bytes and URLs are not, so the
/// store indexes by digest and keeps the full key in the record to rule out collisions.
public struct KeyDigest: Hashable, Sendable {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) { self.high = high; self.low = low }

    public init(_ bytes: UnsafeRawBufferPointer) {
        // Two FNV-1a lanes with different offsets, each finished with the murmur3 mixer.
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x84222325_cbf29ce4
        for byte in bytes {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 &+ 0x9e37_79b9_7f4a_7c15
        }
        high = KeyDigest.mix(a ^ UInt64(bytes.count))
        low = KeyDigest.mix(b &+ UInt64(bytes.count))
    }

    public init(_ bytes: [UInt8]) { self = bytes.withUnsafeBytes { KeyDigest($0) } }

    /// What a `Dictionary` or `Set` asks for, with its seed: the digest folded by the mixer into
    /// the table's seed and a secret of the process, rather than hashed again through `Hasher` (a
    /// SipHash over every byte, on each lookup of the memory tier). The words are spread already.
    /// The table's seed is only its storage's address, which `Hasher` keys with a secret of its
    /// own; bypassing it, the hash takes `secret`, so which URLs share a bucket stays unknown to
    /// whoever picks them (a table whose keys pile into one bucket is probed linearly, under a lock
    /// all workers share). Two digests that collide under one secret do not under another: the
    /// mixer spreads a difference in `low` differently for each.
    public func _rawHashValue(seed: Int) -> Int {
        Int(truncatingIfNeeded: KeyDigest.fold(self, into: KeyDigest.keyed(seed)))
    }

    /// Drawn once per process from the system's random source.
    private static let secret = UInt64.random(in: .min ... .max)

    static func keyed(_ seed: Int) -> UInt64 { secret ^ UInt64(truncatingIfNeeded: seed) }

    static func fold(_ d: KeyDigest, into h: UInt64) -> UInt64 { mix(d.high ^ mix(d.low ^ h)) }

    private static func mix(_ x: UInt64) -> UInt64 {
        var k = x
        k ^= k >> 33
        k = k &* 0xff51_afd7_ed55_8ccd
        k ^= k >> 33
        k = k &* 0xc4ce_b9fe_1a85_ec53
        k ^= k >> 33
        return k
    }

    /// 16 bytes, big-endian: the spec's key, and the prefix of every entry key of the URL.
    var bytes: [UInt8] { withBytes { Array($0) } }

    /// The bytes `bytes` holds, on the stack: a lookup key without an allocation.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var bigEndian = (high.bigEndian, low.bigEndian)
        return withUnsafeBytes(of: &bigEndian) { body($0) }
    }
}

/// Identifies one stored variant: the URL's digest and the Vary-selected request fields' digest.
public struct EntryKey: Hashable, Sendable {
    public var primary: KeyDigest
    public var secondary: KeyDigest

    public init(primary: KeyDigest, secondary: KeyDigest) { self.primary = primary; self.secondary = secondary }

    /// Both digests folded into the table's seed and the process's secret (see
    /// `KeyDigest._rawHashValue(seed:)`).
    public func _rawHashValue(seed: Int) -> Int {
        Int(truncatingIfNeeded: KeyDigest.fold(secondary, into: KeyDigest.fold(primary, into: KeyDigest.keyed(seed))))
    }

    /// 32 bytes, primary first, so all variants of a URL are adjacent in LMDB.
    var bytes: [UInt8] { withBytes { Array($0) } }

    /// The bytes `bytes` holds, on the stack: a lookup key without an allocation.
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var bigEndian = (primary.high.bigEndian, primary.low.bigEndian, secondary.high.bigEndian,
                         secondary.low.bigEndian)
        return withUnsafeBytes(of: &bigEndian) { body($0) }
    }

    init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 32 else { return nil }
        var r = ByteReader(bytes)
        guard let a = r.u64(), let b = r.u64(), let c = r.u64(), let d = r.u64() else { return nil }
        primary = KeyDigest(high: a, low: b)
        secondary = KeyDigest(high: c, low: d)
    }
}

extension Array where Element == UInt8 {
    // One append of the value's big-endian bytes: a byte at a time cost a capacity check each.
    mutating func appendBigEndian(_ v: UInt64) {
        Swift.withUnsafeBytes(of: v.bigEndian) { append(contentsOf: $0) }
    }
    mutating func appendBigEndian(_ v: UInt32) {
        Swift.withUnsafeBytes(of: v.bigEndian) { append(contentsOf: $0) }
    }
    mutating func appendBigEndian(_ v: UInt16) {
        append(UInt8(truncatingIfNeeded: v >> 8)); append(UInt8(truncatingIfNeeded: v))
    }
    mutating func appendInt64(_ v: Int64) { appendBigEndian(UInt64(bitPattern: v)) }
    /// Length-prefixed (32-bit) bytes.
    mutating func appendBlob(_ bytes: [UInt8]) {
        appendBigEndian(UInt32(bytes.count))
        append(contentsOf: bytes)
    }
}

/// Writes big-endian fields into space sized beforehand, the writing side of `ByteReader`.
/// Writing past the end is a programming error: it stops the process rather than write past the
/// space LMDB reserved.
struct ByteWriter {
    let out: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    init(_ out: UnsafeMutableRawBufferPointer) { self.out = out }

    mutating func u8(_ v: UInt8) { fixed(v) }
    mutating func u16(_ v: UInt16) { fixed(v.bigEndian) }
    mutating func u32(_ v: UInt32) { fixed(v.bigEndian) }
    mutating func u32LittleEndian(_ v: UInt32) { fixed(v.littleEndian) }
    mutating func u64(_ v: UInt64) { fixed(v.bigEndian) }
    mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    /// Length-prefixed (32-bit) bytes.
    mutating func blob(_ bytes: [UInt8]) {
        u32(UInt32(bytes.count))
        bytes.withUnsafeBytes { raw($0) }
    }

    private mutating func fixed<T: FixedWidthInteger>(_ v: T) {
        withUnsafeBytes(of: v) { raw($0) }
    }

    private mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        precondition(offset + bytes.count <= out.count, "record bytes past their reserved space")
        if let from = bytes.baseAddress, bytes.count > 0 {
            (out.baseAddress! + offset).copyMemory(from: from, byteCount: bytes.count)
        }
        offset += bytes.count
    }
}

/// Reads big-endian fields from a record; every read fails cleanly (nil) past the end, so a
/// damaged record is rejected rather than trusted.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func u8() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }
    mutating func u16() -> UInt16? {
        guard let a = u8(), let b = u8() else { return nil }
        return UInt16(a) << 8 | UInt16(b)
    }
    mutating func u32() -> UInt32? {
        guard offset + 4 <= bytes.count else { return nil }
        var v: UInt32 = 0
        for _ in 0..<4 { v = v << 8 | UInt32(bytes[offset]); offset += 1 }
        return v
    }
    mutating func u64() -> UInt64? {
        guard offset + 8 <= bytes.count else { return nil }
        var v: UInt64 = 0
        for _ in 0..<8 { v = v << 8 | UInt64(bytes[offset]); offset += 1 }
        return v
    }
    mutating func i64() -> Int64? { u64().map { Int64(bitPattern: $0) } }
    mutating func blob() -> [UInt8]? {
        guard let n = u32(), offset + Int(n) <= bytes.count else { return nil }
        defer { offset += Int(n) }
        return Array(bytes[offset..<offset + Int(n)])
    }
}
