/// The IPv4 spellings browsers and the C library accept (`inet_aton`, the WHATWG URL host parser):
/// one to four parts, each decimal, octal (a leading `0`) or hexadecimal (`0x`), the last filling
/// the remaining bytes, so `2130706437`, `127.5`, `0x7f.0.0.5`, `0x7f000005` and `0177.0.0.5` are
/// all 127.0.0.5. A parent proxy or resolver reads them as that address; a check that took them
/// for names would let them past every rule written for the address. So a host whose last label
/// is a number is an address, parsed here once into its dotted form, or refused.
public enum IPv4Host {
    /// Whether `bytes[start..<end]` (a host without its trailing dot) must be read as an IPv4
    /// address: its last label is all digits, or is a number in any of the forms above.
    public static func endsInNumber(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        var labelStart = end
        while labelStart > start, bytes[labelStart - 1] != 0x2E { labelStart -= 1 }
        guard labelStart < end, isDigit(bytes[labelStart]) else { return false }  // every form starts with a digit
        var allDigits = true
        for k in labelStart..<end where !isDigit(bytes[k]) { allDigits = false; break }
        return allDigits || number(bytes, labelStart, end) != nil
    }

    /// The address `bytes[start..<end]` spells, or nil when it is not one of the forms above
    /// (too many parts, a part too large, a stray letter).
    public static func parse(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> UInt32? {
        var address: UInt64 = 0
        var count = 0
        var partStart = start
        var k = start
        while k <= end {
            if k == end || bytes[k] == 0x2E {
                guard count < 4, let value = number(bytes, partStart, k) else { return nil }
                if k == end {
                    // The last part fills the bytes the others left.
                    guard value < UInt64(1) << UInt64(8 * (4 - count)) else { return nil }
                    address += value
                } else {
                    guard value <= 255 else { return nil }
                    address += value << UInt64(8 * (3 - count))
                }
                count += 1
                partStart = k + 1
            }
            k += 1
        }
        return UInt32(address)
    }

    /// Whether `bytes[start..<end]` is already `a.b.c.d` in plain decimal, no part with a leading
    /// zero (which would be octal): the spelling `dotted` writes, kept as it came.
    public static func isDotted(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        var parts = 0
        var i = start
        while i < end {
            let partStart = i
            var value = 0
            while i < end, isDigit(bytes[i]) {
                value = value * 10 + Int(bytes[i] &- 0x30)
                i += 1
                guard i - partStart <= 3 else { return false }
            }
            guard i > partStart, value <= 255, bytes[partStart] != 0x30 || i - partStart == 1 else { return false }
            parts += 1
            if i < end {
                guard bytes[i] == 0x2E, parts < 4 else { return false }
                i += 1
                guard i < end else { return false }
            }
        }
        return parts == 4
    }

    /// `a.b.c.d`, the one spelling every rule, key and log uses.
    public static func dotted(_ address: UInt32) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(15)
        for shift in stride(from: 24, through: 0, by: -8) {
            let octet = Int((address >> UInt32(shift)) & 0xFF)
            if octet >= 100 { out.append(UInt8(0x30 + octet / 100)) }
            if octet >= 10 { out.append(UInt8(0x30 + octet / 10 % 10)) }
            out.append(UInt8(0x30 + octet % 10))
            if shift > 0 { out.append(0x2E) }
        }
        return out
    }

    /// One part: `0x` hex (nothing after `0x` is 0), a leading `0` octal, otherwise decimal. Nil
    /// for an empty part, a digit outside its base, or a value past 2^32 (no form can use more).
    private static func number(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> UInt64? {
        guard start < end else { return nil }
        var i = start
        var radix: UInt64 = 10
        if end - start >= 2, bytes[start] == 0x30, bytes[start + 1] | 0x20 == 0x78 {  // "0x", "0X"
            radix = 16
            i += 2
        } else if end - start >= 2, bytes[start] == 0x30 {
            radix = 8
            i += 1
        }
        var value: UInt64 = 0
        while i < end {
            guard let digit = hexValue(bytes[i]), UInt64(digit) < radix else { return nil }
            value = value * radix + UInt64(digit)
            guard value <= UInt64(UInt32.max) else { return nil }
            i += 1
        }
        return value
    }
}
