// Byte classes and small byte helpers shared by the parsers, and (the public ones) by other pure
// modules that read header bytes in place. Everything here works on single bytes or raw buffers;
// no String, no allocation.

public let asciiCR: UInt8 = 0x0D
public let asciiLF: UInt8 = 0x0A
public let asciiSP: UInt8 = 0x20
public let asciiHTAB: UInt8 = 0x09
public let asciiColon: UInt8 = 0x3A
public let asciiComma: UInt8 = 0x2C
let asciiSemicolon: UInt8 = 0x3B
public let asciiEquals: UInt8 = 0x3D
public let asciiQuote: UInt8 = 0x22
public let asciiBackslash: UInt8 = 0x5C

/// `tchar` (RFC 9110 §5.6.2) as two 64-bit masks over 0..<128:
/// "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA.
@usableFromInline let tcharMaskLow: UInt64 = 0x03FF_6CFA_0000_0000
@usableFromInline let tcharMaskHigh: UInt64 = 0x57FF_FFFF_C7FF_FFFE

@inlinable
public func isTchar(_ b: UInt8) -> Bool {
    if b < 64 { return (tcharMaskLow >> UInt64(b)) & 1 != 0 }
    if b < 128 { return (tcharMaskHigh >> UInt64(b &- 64)) & 1 != 0 }
    return false
}

@inlinable
public func isOWS(_ b: UInt8) -> Bool { b == asciiSP || b == asciiHTAB }

@inlinable
public func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }

/// ASCII lowercase; other bytes unchanged.
@inlinable
public func asciiLower(_ b: UInt8) -> UInt8 { b &- 0x41 < 26 ? b | 0x20 : b }

/// The value of a hex digit, or nil.
@inline(__always)
func hexValue(_ b: UInt8) -> Int? {
    if b &- 0x30 < 10 { return Int(b &- 0x30) }
    let l = b | 0x20
    if l &- 0x61 < 6 { return Int(l &- 0x61) + 10 }
    return nil
}

/// RFC 3986 §2.3 `unreserved`: ALPHA / DIGIT / "-" / "." / "_" / "~".
@inline(__always)
func isUnreserved(_ b: UInt8) -> Bool {
    b &- 0x61 < 26 || b &- 0x41 < 26 || isDigit(b) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
}

/// RFC 3986 §2.2 `sub-delims`: "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "=".
@inline(__always)
func isSubDelim(_ b: UInt8) -> Bool {
    switch b {
    case 0x21, 0x24, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x3B, 0x3D: return true
    default: return false
    }
}

/// `unreserved` or `sub-delims` (RFC 3986 §2.2, §2.3): the bytes of a reg-name but
/// percent-encodings, as a bit per byte below 128 (a Host is checked on every request). The two
/// classes spelled out above are what the masks are tested against.
@inline(__always)
func isUnreservedOrSubDelim(_ b: UInt8) -> Bool {
    b < 64 ? (0x2BFF_7FD2_0000_0000 as UInt64) >> UInt64(b) & 1 != 0
        : b < 128 ? (0x47FF_FFFE_87FF_FFFE as UInt64) >> UInt64(b &- 64) & 1 != 0 : false
}

/// Field-value byte (RFC 9110 §5.5): VCHAR or obs-text; SP and HTAB handled by callers.
@inline(__always)
func isFieldVChar(_ b: UInt8) -> Bool { b > 0x20 && b != 0x7F }

/// Whether `buffer[start..<end]` equals `literal`, ASCII case-insensitively on both sides.
/// Eight bytes at a time: field names and tokens are compared on every head.
@inlinable
public func equalsIgnoringCase(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ literal: StaticString) -> Bool {
    let count = end - start
    guard count == literal.utf8CodeUnitCount else { return false }
    guard count > 0, let base = buffer.baseAddress else { return count == 0 }
    guard literal.hasPointerRepresentation else {
        return literal.withUTF8Buffer { lit in
            (0..<count).allSatisfy { asciiLower(buffer[start + $0]) == asciiLower(lit[$0]) }
        }
    }
    return bytesEqualIgnoringCase(base + start, UnsafeRawPointer(literal.utf8Start), count: count)
}

/// Whether the `count` bytes at `a` and at `b` are equal, ASCII case-insensitively, eight at a time.
@inlinable
public func bytesEqualIgnoringCase(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
    if count >= 8 {
        var i = 0
        while true {
            // The last word overlaps the one before when count is not a multiple of 8.
            let at = Swift.min(i, count - 8)
            let x = a.loadUnaligned(fromByteOffset: at, as: UInt64.self)
            let y = b.loadUnaligned(fromByteOffset: at, as: UInt64.self)
            if x != y, asciiLowered(x) != asciiLowered(y) { return false }
            i += 8
            if i >= count { return true }
        }
    }
    var i = 0
    while i < count {
        let x = a.load(fromByteOffset: i, as: UInt8.self)
        let y = b.load(fromByteOffset: i, as: UInt8.self)
        if x != y, asciiLower(x) != asciiLower(y) { return false }
        i += 1
    }
    return true
}

/// `asciiLower` of each of the eight bytes of `word`: bytes `A`...`Z` get bit 0x20 set, no other
/// byte changes (none carries into its neighbour: each sum stays below 0x100).
@inlinable
public func asciiLowered(_ word: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let low7 = word & (0x7F &* ones)
    let atLeastA = low7 &+ (0x80 &- 0x41) &* ones   // high bit set where the byte is >= "A"
    let aboveZ = low7 &+ (0x80 &- 0x5B) &* ones     // high bit set where the byte is > "Z"
    let upper = atLeastA & ~aboveZ & ~word & (0x80 &* ones)
    return word | (upper >> 2)
}

/// The high bit of each byte of `word` below `bound` (0x01...0x80) or equal to DEL, and perhaps of
/// a byte above one of those (a borrow spills only upward): never set when no byte is either, so
/// the word-at-a-time tests below are exact as a yes or no.
@inlinable
func belowOrDelBits(_ word: UInt64, below bound: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let high: UInt64 = 0x80 &* ones
    let below = (word &- bound &* ones) & ~word & high
    let del = word ^ (0x7F &* ones)
    return below | ((del &- ones) & ~del & high)
}

/// Whether any of the eight bytes of `word` is below 0x20 (HTAB, CR and LF included) or DEL: a
/// word without one is all field-value bytes and spaces.
@inlinable
func hasControlByte(_ word: UInt64) -> Bool { belowOrDelBits(word, below: 0x20) != 0 }

/// The first index from `start` before `end` whose byte cannot be part of a field value
/// (field-vchar, SP or HTAB), or `end`: eight bytes at a time while they are all printable.
@inline(__always)
public func fieldValueBytesEnd(_ p: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
    var i = start
    guard let base = p.baseAddress else { return i }
    while true {
        while i + 8 <= end, !hasControlByte(base.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i += 8 }
        while i < end, isFieldVChar(p[i]) || p[i] == asciiSP { i += 1 }
        guard i < end, p[i] == asciiHTAB else { return i }
        i += 1
    }
}

/// Whether any of the eight bytes of `word` is not visible ASCII (0x21...0x7E): a control byte,
/// SP, DEL or a byte above 0x7F. A word without one is a run of target bytes; callers find the
/// byte itself one at a time.
@inlinable
func hasNonVisibleByte(_ word: UInt64) -> Bool {
    (belowOrDelBits(word, below: 0x21) | (word & (0x80 &* 0x0101_0101_0101_0101))) != 0
}

/// The first index from `start` before `end` whose byte is not visible ASCII (0x21...0x7E), or
/// `end`: eight bytes at a time while they all are (a request target is read this way twice).
@inlinable
public func visibleBytesEnd(_ p: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
    var i = start
    if let base = p.baseAddress {
        while i + 8 <= end, !hasNonVisibleByte(base.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i += 8 }
    }
    while i < end, p[i] &- 0x21 < 0x5E { i += 1 }
    return i
}

/// Walks a comma-separated list (RFC 9110 §5.6.1) in `buffer[start..<end]`, calling `body` with each
/// non-empty element's bounds, surrounding whitespace removed. `body` returns false to stop early.
@inline(__always)
func forEachListElement(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                        _ body: (Int, Int) -> Bool) {
    var i = start
    while i < end {
        while i < end, isOWS(buffer[i]) || buffer[i] == asciiComma { i += 1 }
        if i >= end { return }
        let elementStart = i
        var lastNonWS = i
        while i < end, buffer[i] != asciiComma {
            if !isOWS(buffer[i]) { lastNonWS = i + 1 }
            i += 1
        }
        if !body(elementStart, lastNonWS) { return }
    }
}

/// Whether the list in `buffer[start..<end]` has an element equal to `token` (case-insensitive).
@inline(__always)
func listContains(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ token: StaticString) -> Bool {
    var found = false
    forEachListElement(buffer, start, end) { s, e in
        if equalsIgnoringCase(buffer, s, e, token) { found = true; return false }
        return true
    }
    return found
}

/// Whether the list in `buffer[start..<end]` has an element equal (case-insensitively) to the bytes
/// `other[otherStart..<otherEnd]`.
func listContains(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                  bytes other: UnsafeRawBufferPointer, _ otherStart: Int, _ otherEnd: Int) -> Bool {
    let count = otherEnd - otherStart
    var found = false
    forEachListElement(buffer, start, end) { s, e in
        guard e - s == count else { return true }
        var k = 0
        while k < count {
            if asciiLower(buffer[s + k]) != asciiLower(other[otherStart + k]) { return true }
            k += 1
        }
        found = true
        return false
    }
    return found
}

/// Parses `1*DIGIT` in `buffer[start..<end]` as a length no larger than 2^62; nil otherwise.
@inlinable
public func parseDecimalLength(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int? {
    guard end > start else { return nil }
    let limit = 1 << 62
    var value = 0
    var i = start
    while i < end {
        let b = buffer[i]
        guard isDigit(b) else { return nil }
        let d = Int(b &- 0x30)
        if value > (limit - d) / 10 { return nil }
        value = value * 10 + d
        i += 1
    }
    return value
}

/// Whether `buffer[start...]` begins with exactly the bytes of `literal` (case-sensitive); the caller
/// has checked that enough bytes follow `start`.
@inline(__always)
func equalsExactly(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ literal: StaticString) -> Bool {
    literal.withUTF8Buffer { lit in
        var i = 0
        while i < lit.count {
            if buffer[start + i] != lit[i] { return false }
            i += 1
        }
        return true
    }
}

/// Whether `a` and `b` hold the same bytes, eight at a time (`commonPrefixLength`): `Array`'s own
/// `==` compares element by element, and cache keys are compared on every lookup.
@inlinable
public func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    return a.withUnsafeBytes { x in b.withUnsafeBytes { y in commonPrefixLength(x, y) == x.count } }
}

/// How many bytes `a` and `b` share at their start, eight at a time.
@inlinable
public func commonPrefixLength(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let count = min(a.count, b.count)
    guard count > 0, let p = a.baseAddress, let q = b.baseAddress else { return 0 }
    var i = 0
    while i + 8 <= count {
        let differ = p.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ q.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        // Little-endian: the lowest differing byte is the first.
        if differ != 0 { return i + UInt64(littleEndian: differ).trailingZeroBitCount / 8 }
        i += 8
    }
    while i < count, a[i] == b[i] { i += 1 }
    return i
}

/// Whether `p[start..<end]` equals the (lowercase) bytes `lowered`, ASCII case-insensitively.
@inline(__always)
public func equalsLowered(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ lowered: [UInt8]) -> Bool {
    let count = end - start
    guard count == lowered.count else { return false }
    var i = 0
    while i < count {
        if asciiLower(p[start + i]) != lowered[i] { return false }
        i += 1
    }
    return true
}
