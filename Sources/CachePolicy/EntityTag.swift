import HTTPWire
/// Entity-tag comparison (RFC 9110 §8.8.3.2).
enum EntityTag {
    enum Comparison {
        /// Both strong and identical.
        case strongMatch
        /// Same opaque tag, at least one of them weak.
        case weakMatch
        case different
    }

    static func compare(_ a: [UInt8], _ b: [UInt8]) -> Comparison {
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in compare(pa, pb) }
        }
    }

    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Comparison {
        let aWeak = isWeak(a)
        let bWeak = isWeak(b)
        let opaqueA = UnsafeRawBufferPointer(rebasing: a[(aWeak ? 2 : 0)...])
        let opaqueB = UnsafeRawBufferPointer(rebasing: b[(bWeak ? 2 : 0)...])
        guard equalBytes(opaqueA, opaqueB) else { return .different }
        return aWeak || bWeak ? .weakMatch : .strongMatch
    }

    /// `W/"…"`; the prefix is case-sensitive (RFC 9110 §8.8.3).
    static func isWeak(_ tag: UnsafeRawBufferPointer) -> Bool {
        tag.count >= 2 && tag[0] == 0x57 && tag[1] == byteSlash
    }

    /// Whether `tag` is a well-formed strong entity tag: `"…"` with etagc bytes inside.
    static func isStrong(_ tag: UnsafeRawBufferPointer) -> Bool {
        guard tag.count >= 2, tag[0] == asciiQuote, tag[tag.count - 1] == asciiQuote else { return false }
        for i in 1..<(tag.count - 1) {
            let b = tag[i]
            if b == asciiQuote || b < 0x21 || b == 0x7F { return false }
        }
        return true
    }
}
