/// Reading and writing the contents of JSON strings (RFC 8259 §7).
public enum JSONString {
    /// The text between a string's quotes, with escapes resolved. Expects contents the scanner has
    /// checked; nil when a `\u` escape names a lone surrogate (not Unicode text: such a value is
    /// never rewritten, so it stays exactly as sent).
    public static func decode(_ contents: ArraySlice<UInt8>, hasEscapes: Bool = true) -> String? {
        guard hasEscapes, contents.contains(UInt8(ascii: "\\")) else {
            return String(decoding: contents, as: UTF8.self)
        }
        var scalars = String.UnicodeScalarView()
        var utf8: [UInt8] = []
        var i = contents.startIndex
        while i < contents.endIndex {
            let byte = contents[i]
            guard byte == UInt8(ascii: "\\") else {
                utf8.append(byte)
                i += 1
                continue
            }
            flush(&utf8, into: &scalars)
            guard i + 1 < contents.endIndex else { return nil }
            if contents[i + 1] == UInt8(ascii: "u") {
                guard let (scalar, next) = unicodeEscape(contents, at: i) else { return nil }
                scalars.append(scalar)
                i = next
            } else {
                guard let simple = simpleEscape(contents[i + 1]) else { return nil }
                scalars.append(simple)
                i += 2
            }
        }
        flush(&utf8, into: &scalars)
        return String(scalars)
    }

    /// `text` as a JSON string's contents (without quotes): `"`, `\` and control characters
    /// escaped, everything else (`/` and non-ASCII included) as UTF-8.
    public static func encode(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        return out
    }

    /// `text` as a whole JSON string, quotes included.
    public static func quoted(_ text: String) -> [UInt8] {
        [UInt8(ascii: "\"")] + encode(text) + [UInt8(ascii: "\"")]
    }

    private static func flush(_ utf8: inout [UInt8], into scalars: inout String.UnicodeScalarView) {
        guard !utf8.isEmpty else { return }
        scalars.append(contentsOf: String(decoding: utf8, as: UTF8.self).unicodeScalars)
        utf8.removeAll(keepingCapacity: true)
    }

    private static func simpleEscape(_ byte: UInt8) -> Unicode.Scalar? {
        switch byte {
        case UInt8(ascii: "\""): "\""
        case UInt8(ascii: "\\"): "\\"
        case UInt8(ascii: "/"): "/"
        case UInt8(ascii: "b"): "\u{08}"
        case UInt8(ascii: "f"): "\u{0C}"
        case UInt8(ascii: "n"): "\n"
        case UInt8(ascii: "r"): "\r"
        case UInt8(ascii: "t"): "\t"
        default: nil
        }
    }

    /// `\uXXXX`, or a surrogate pair `\uD8xx\uDCxx`, at `i`; the scalar and the index after it.
    private static func unicodeEscape(_ contents: ArraySlice<UInt8>, at i: Int) -> (Unicode.Scalar, Int)? {
        guard let high = hexQuad(contents, at: i + 2) else { return nil }
        if let scalar = Unicode.Scalar(high) { return (scalar, i + 6) }
        guard (0xD800..<0xDC00).contains(high), i + 12 <= contents.endIndex,
              contents[i + 6] == UInt8(ascii: "\\"), contents[i + 7] == UInt8(ascii: "u"),
              let low = hexQuad(contents, at: i + 8), (0xDC00..<0xE000).contains(low),
              let scalar = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)) else { return nil }
        return (scalar, i + 12)
    }

    private static func hexQuad(_ contents: ArraySlice<UInt8>, at i: Int) -> UInt32? {
        guard i + 4 <= contents.endIndex else { return nil }
        var value: UInt32 = 0
        for j in i..<(i + 4) {
            guard let digit = hexValue(contents[j]) else { return nil }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}

/// Well-formed UTF-8 (RFC 3629 §4): no overlong forms, no surrogates, nothing past U+10FFFF.
enum UTF8Validation {
    /// The length of the well-formed sequence starting at `i`, or nil.
    static func sequenceLength(_ bytes: [UInt8], at i: Int) -> Int? {
        let lead = bytes[i]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondRange = 0x80...0x9F
        case 0xF0: length = 4; secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondRange = 0x80...0x8F
        default: return nil
        }
        guard i + length <= bytes.count, secondRange.contains(bytes[i + 1]) else { return nil }
        for j in (i + 2)..<(i + length) where bytes[j] & 0xC0 != 0x80 { return nil }
        return length
    }

    /// The offset of the first byte that does not start a well-formed sequence, or nil.
    static func firstInvalidOffset(_ bytes: [UInt8]) -> Int? {
        var i = 0
        while i < bytes.count {
            if bytes[i] < 0x80 {
                i += 1
                continue
            }
            guard let length = sequenceLength(bytes, at: i) else { return i }
            i += length
        }
        return nil
    }
}
