import Testing
@testable import HTTPWire

/// The word-at-a-time helpers against their byte-at-a-time definitions: every byte value in every
/// position of a word, next to neighbours that could borrow or carry into it.
@Suite("Byte classes, eight at a time")
struct ByteClassesTests {
    static let neighbours: [UInt8] = [0x00, 0x09, 0x1F, 0x20, 0x21, 0x41, 0x5A, 0x5B, 0x61, 0x7E, 0x7F, 0x80, 0xC0, 0xFF]

    static func words(_ check: (UInt64, [UInt8]) -> Void) {
        for position in 0..<8 {
            for fill in neighbours {
                for b in 0...255 {
                    var bytes = [UInt8](repeating: fill, count: 8)
                    bytes[position] = UInt8(b)
                    let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    check(word, bytes)
                }
            }
        }
    }

    /// The reg-name mask holds what the two classes it stands for hold, byte for byte.
    @Test func theRegNameMaskIsUnreservedOrSubDelims() {
        for b in UInt8.min...UInt8.max {
            #expect(isUnreservedOrSubDelim(b) == (isUnreserved(b) || isSubDelim(b)), "\(b)")
        }
    }

    @Test func lowersExactlyTheUppercaseLetters() {
        Self.words { word, bytes in
            let lowered = withUnsafeBytes(of: asciiLowered(word)) { Array($0) }
            #expect(lowered == bytes.map(asciiLower))
        }
    }

    @Test func findsEveryControlByteAndNothingElse() {
        Self.words { word, bytes in
            #expect(hasControlByte(word) == bytes.contains { $0 < 0x20 || $0 == 0x7F })
        }
    }

    @Test func findsEveryByteATargetCannotHoldAndNothingElse() {
        Self.words { word, bytes in
            #expect(hasNonVisibleByte(word) == bytes.contains { $0 &- 0x21 >= 0x5E })
        }
    }

    /// Whether `scan` (eight bytes at a time) stops where a byte-by-byte scan over `belongs` does:
    /// for each length up to three words, each place and each byte of `stops` there, from several
    /// starts, and with an end short of the buffer's.
    private static func expectScanStopsAsByteByByte(_ scan: (UnsafeRawBufferPointer, Int, Int) -> Int,
                                                    _ belongs: (UInt8) -> Bool, stops: [UInt8]) {
        func byteByByte(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int {
            var i = start
            while i < end, belongs(p[i]) { i += 1 }
            return i
        }
        for n in 0...24 {
            for place in 0...n {
                for stop in stops {
                    var bytes = (0..<n).map { UInt8(0x21 + ($0 * 7) % 0x5E) }
                    if place < n { bytes[place] = stop }
                    bytes.withUnsafeBytes { p in
                        for start in 0...min(n, 3) {
                            #expect(scan(p, start, n) == byteByByte(p, start, n), "\(bytes) from \(start)")
                        }
                        if n > 0 {
                            #expect(scan(p, 0, n - 1) == byteByByte(p, 0, n - 1), "\(bytes) to \(n - 1)")
                        }
                    }
                }
            }
        }
    }

    /// The end of a run of visible bytes.
    @Test func visibleBytesEndWhereAByteByByteScanDoes() {
        Self.expectScanStopsAsByteByByte({ visibleBytesEnd($0, from: $1, to: $2) }, { $0 &- 0x21 < 0x5E },
                                         stops: [0x00, 0x09, 0x20, 0x7F, 0x80, 0xFF])
    }

    /// The end of a field value's bytes: a control byte other than HTAB, or DEL; HTAB, SP and
    /// obs-text do not end it.
    @Test func fieldValueBytesEndWhereAByteByByteScanDoes() {
        Self.expectScanStopsAsByteByByte({ fieldValueBytesEnd($0, from: $1, to: $2) },
                                         { $0 == 0x09 || $0 == 0x20 || ($0 > 0x20 && $0 != 0x7F) },
                                         stops: [0x00, 0x01, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x1F, 0x20, 0x7F, 0x80, 0xFF])
    }

    @Test("equalsIgnoringCase across lengths and word boundaries",
          arguments: ["a", "host", "upgrade", "content-", "connection", "content-length", "transfer-encoding",
                      "x-a-rather-long-field-name-1"])
    func equalsIgnoringCaseAgreesWithByteComparison(_ name: String) {
        let literal: StaticString
        switch name {
        case "a": literal = "a"
        case "host": literal = "host"
        case "upgrade": literal = "upgrade"
        case "content-": literal = "content-"
        case "connection": literal = "connection"
        case "content-length": literal = "content-length"
        case "transfer-encoding": literal = "transfer-encoding"
        default: literal = "x-a-rather-long-field-name-1"
        }
        let exact = Array(name.utf8)
        var candidates: [[UInt8]] = [exact, exact.map { $0 &- 0x41 < 26 || $0 &- 0x61 < 26 ? $0 ^ 0x20 : $0 },
                                     Array(exact.dropLast()), exact + [0x61]]
        for i in exact.indices {
            for replacement: UInt8 in [0x00, 0x0D, 0x40, 0x60, 0x7B, 0xC1, exact[i] ^ 0x20, exact[i] ^ 0x01] {
                var c = exact
                c[i] = replacement
                candidates.append(c)
            }
        }
        for c in candidates {
            let padded = [0x20] + c + [0x20]
            let expected = c.count == exact.count && zip(c, exact).allSatisfy { asciiLower($0) == asciiLower($1) }
            padded.withUnsafeBytes { p in
                #expect(equalsIgnoringCase(p, 1, 1 + c.count, literal) == expected, "\(c)")
            }
        }
    }

    /// `sameBytes` agrees with `==` for arrays of every length up to three words, equal and with
    /// one byte changed at each place, one shorter, and one longer.
    @Test func sameBytesAgreesWithArrayEquality() {
        for n in 0...24 {
            let a = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            var candidates: [[UInt8]] = [a, Array(a.dropLast()), a + [0], Array(a.dropFirst())]
            for i in a.indices {
                var c = a
                c[i] ^= 0x80
                candidates.append(c)
            }
            for c in candidates {
                #expect(sameBytes(a, c) == (a == c), "\(a) against \(c)")
                #expect(sameBytes(c, a) == (c == a))
            }
        }
        #expect(sameBytes([], []))
    }
}

@Suite struct CommonPrefixTests {
    /// Every length up to three words, every place of the first difference, and either side the shorter.
    @Test func commonPrefixLengthFindsTheFirstDifference() {
        for n in 0...24 {
            let a = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 1) }
            for m in 0...n {
                let b = Array(a.prefix(m))
                a.withUnsafeBytes { x in b.withUnsafeBytes { y in
                    #expect(commonPrefixLength(x, y) == m && commonPrefixLength(y, x) == m)
                } }
            }
            for d in 0..<n {
                var c = a
                c[d] ^= 0x80
                a.withUnsafeBytes { x in c.withUnsafeBytes { y in
                    #expect(commonPrefixLength(x, y) == d, "\(n) bytes, differing at \(d)")
                } }
            }
        }
    }
}
