import HTTPWire

// Byte helpers for the policy code, on top of HTTPWire's public byte classes, so policy decisions
// read header bytes in place: no String, no allocation.

let byteSlash: UInt8 = 0x2F

@inline(__always)
func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) &- 0x61 < 26 }

/// Byte-exact equality of two spans.
@inline(__always)
func equalBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    var i = 0
    while i < a.count {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}

/// RFC 9111 §1.2.2: delta-seconds too large to represent count as 2^31.
let deltaSecondsCap: Int64 = 2_147_483_648

/// `1*DIGIT` in `p[start..<end]` as delta-seconds, clamped to 2^31; nil when empty or not digits.
@inline(__always)
func parseDeltaSeconds(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int64? {
    parseSaturatingInt(p, start, end).map { min(Int64($0), deltaSecondsCap) }
}

/// `1*DIGIT` in `p[start..<end]` as a non-negative Int, saturating at `Int.max / 16`.
@inline(__always)
func parseSaturatingInt(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int? {
    guard end > start else { return nil }
    let cap = Int.max / 16
    var value = 0
    var i = start
    while i < end {
        let b = p[i]
        guard isDigit(b) else { return nil }
        if value < cap { value = value * 10 + Int(b &- 0x30) }
        i += 1
    }
    return min(value, cap)
}

/// Index just past the quoted-string opening at `p[start]` (a DQUOTE), honouring backslash escapes;
/// nil when it is not closed before `end`.
@inline(__always)
func quotedStringEnd(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int? {
    var i = start + 1
    while i < end {
        let b = p[i]
        if b == asciiQuote { return i + 1 }
        i += b == asciiBackslash ? 2 : 1
    }
    return nil
}

/// Whether `literal` (lowercase ASCII) occurs in `p[start..<end]`, ASCII case-insensitively.
func containsLowered(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ literal: StaticString) -> Bool {
    let n = literal.utf8CodeUnitCount
    guard n > 0, end - start >= n else { return n == 0 }
    return literal.withUTF8Buffer { lit in
        let first = lit[0]
        var i = start
        while i <= end - n {
            if asciiLower(p[i]) == first {
                var k = 1
                while k < n, asciiLower(p[i + k]) == lit[k] { k += 1 }
                if k == n { return true }
            }
            i += 1
        }
        return false
    }
}

/// Walks a comma-separated list (RFC 9110 §5.6.1) in `p[start..<end]`, calling `body` with each
/// non-empty element's bounds (surrounding whitespace removed). Commas inside quoted strings do not
/// split. `body` returns false to stop early.
@inline(__always)
func forEachListElement(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ body: (Int, Int) -> Bool) {
    var i = start
    while i < end {
        while i < end, isOWS(p[i]) || p[i] == asciiComma { i += 1 }
        if i >= end { return }
        let elementStart = i
        var lastNonWS = i
        while i < end, p[i] != asciiComma {
            if p[i] == asciiQuote {
                i = quotedStringEnd(p, i, end) ?? end
                lastNonWS = i
                continue
            }
            if !isOWS(p[i]) { lastNonWS = i + 1 }
            i += 1
        }
        if !body(elementStart, lastNonWS) { return }
    }
}

/// Whether the list in `p[start..<end]` has an element equal to `token` (case-insensitive).
@inline(__always)
func listContains(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ token: StaticString) -> Bool {
    var found = false
    forEachListElement(p, start, end) { s, e in
        if equalsIgnoringCase(p, s, e, token) { found = true; return false }
        return true
    }
    return found
}

extension HeaderBlock {
    /// Calls `body` with the whole storage and the value bounds of the first field named `name`;
    /// nil when there is none.
    @inline(__always)
    func withFirstValue<R>(_ name: StaticString, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        storage.withUnsafeBytes { all -> R? in
            for field in fields
            where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, name) {
                return body(UnsafeRawBufferPointer(rebasing: all[field.value.start..<(field.value.start + field.value.count)]))
            }
            return nil
        }
    }

    /// Whether a field with that name is present.
    @inline(__always)
    func has(_ name: StaticString) -> Bool { firstIndex(of: name) != nil }

    /// The first value of `name` as a copy of its bytes.
    func firstValueBytes(_ name: StaticString) -> [UInt8]? { withFirstValue(name) { Array($0) } }

    /// Whether field `index` is named by one of `lowercasedNames`.
    public func nameIsListed(at index: Int, in lowercasedNames: [[UInt8]]) -> Bool {
        if lowercasedNames.isEmpty { return false }
        let range = fields[index].name
        return storage.withUnsafeBytes { all in
            lowercasedNames.contains { equalsLowered(all, range.start, range.start + range.count, $0) }
        }
    }

    /// Whether fields `a` and `b` have the same name (case-insensitive).
    func sameName(_ a: Int, _ b: Int) -> Bool {
        let ra = fields[a].name
        let rb = fields[b].name
        guard ra.count == rb.count else { return false }
        return storage.withUnsafeBytes { all in
            var i = 0
            while i < ra.count {
                if asciiLower(all[ra.start + i]) != asciiLower(all[rb.start + i]) { return false }
                i += 1
            }
            return true
        }
    }

    /// Whether field `index` of `self` has the same name as field `other` of `headers`, compared
    /// eight bytes at a time.
    func nameEquals(at index: Int, fieldAt other: Int, of headers: HeaderBlock) -> Bool {
        let ra = fields[index].name
        let rb = headers.fields[other].name
        guard ra.count == rb.count else { return false }
        return storage.withUnsafeBytes { mine in
            headers.storage.withUnsafeBytes { theirs in
                guard let a = mine.baseAddress, let b = theirs.baseAddress else { return ra.count == 0 }
                return bytesEqualIgnoringCase(a + ra.start, b + rb.start, count: ra.count)
            }
        }
    }

    /// Field `index`'s name length and its first and last bytes in lower case, in one word: names
    /// that differ there are told apart without comparing their bytes.
    func nameSignature(at index: Int) -> UInt32 {
        let r = fields[index].name
        guard r.count > 0 else { return 0 }
        return storage.withUnsafeBytes { all in
            UInt32(truncatingIfNeeded: r.count) << 16 | UInt32(asciiLower(all[r.start])) << 8
                | UInt32(asciiLower(all[r.start + r.count - 1]))
        }
    }
}

/// `a` and `b` equal once trimmed of whitespace and compared without case (media types, codings,
/// language tags).
func sameTrimmedIgnoringCase(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    func trimmed(_ v: UnsafeRawBufferPointer) -> Range<Int> {
        var s = 0
        var e = v.count
        while s < e, isOWS(v[s]) { s += 1 }
        while e > s, isOWS(v[e - 1]) { e -= 1 }
        return s..<e
    }
    let ra = trimmed(a), rb = trimmed(b)
    guard ra.count == rb.count else { return false }
    for (i, j) in zip(ra, rb) where asciiLower(a[i]) != asciiLower(b[j]) { return false }
    return true
}
