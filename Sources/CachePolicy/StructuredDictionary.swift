import HTTPWire

/// An RFC 8941 Structured Field Dictionary, parsed strictly: what RFC 9213's targeted cache-control
/// fields are. Nil for anything that is not one (a space before `=`, an upper-case key, an unknown
/// item type), so that a field with a parsing error can be ignored as a whole (RFC 9213 §2.1).
/// Parameters are checked and dropped: no cache directive has any.
public enum StructuredDictionary {
    public enum Item: Equatable, Sendable {
        case integer(Int64)
        case decimal(Double)
        case string([UInt8])
        case token([UInt8])
        case bytes([UInt8])
        case boolean(Bool)
        /// An inner list's items (each bare; their parameters dropped).
        case innerList([Item])
    }

    /// The members in order; a key given twice keeps its last value, in the place of its first
    /// (RFC 8941 §4.2.2).
    public static func parse(_ input: [UInt8]) -> [(key: [UInt8], value: Item)]? {
        var p = Parser(bytes: input)
        return p.dictionary()
    }

    private struct Parser {
        let bytes: [UInt8]
        var at = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        var peek: UInt8? { at < bytes.count ? bytes[at] : nil }

        mutating func skip(_ set: (UInt8) -> Bool) { while let b = peek, set(b) { at += 1 } }

        // The byte classes are HTTPWire's (`isOWS`, `isDigit`, `isTchar`) and CachePolicy's (`isAlpha`).
        static func isSP(_ b: UInt8) -> Bool { b == 0x20 }
        static func isLCAlpha(_ b: UInt8) -> Bool { b >= 0x61 && b <= 0x7A }

        mutating func dictionary() -> [(key: [UInt8], value: Item)]? {
            var members: [(key: [UInt8], value: Item)] = []
            // Where each key is: an origin can send thousands of members, and a scan per member
            // would cost their square.
            var index: [[UInt8]: Int] = [:]
            skip(Parser.isSP)
            while peek != nil {
                guard let key = key() else { return nil }
                let value: Item
                if peek == UInt8(ascii: "=") {
                    at += 1
                    guard let v = itemOrInnerList() else { return nil }
                    value = v
                } else {
                    value = .boolean(true)
                    guard parameters() else { return nil }
                }
                if let i = index[key] {
                    members[i].value = value
                } else {
                    index[key] = members.count
                    members.append((key, value))
                }
                skip(isOWS)
                guard let b = peek else { return members }
                guard b == UInt8(ascii: ",") else { return nil }
                at += 1
                skip(isOWS)
                if peek == nil { return nil }  // a trailing comma
            }
            return members
        }

        mutating func key() -> [UInt8]? {
            guard let first = peek, Parser.isLCAlpha(first) || first == UInt8(ascii: "*") else { return nil }
            let start = at
            while let b = peek, Parser.isLCAlpha(b) || isDigit(b) || "_-.*".utf8.contains(b) { at += 1 }
            return Array(bytes[start..<at])
        }

        mutating func itemOrInnerList() -> Item? {
            if peek == UInt8(ascii: "(") { return innerList() }
            guard let item = bareItem(), parameters() else { return nil }
            return item
        }

        mutating func innerList() -> Item? {
            at += 1
            var items: [Item] = []
            while true {
                skip(Parser.isSP)
                guard let b = peek else { return nil }
                if b == UInt8(ascii: ")") {
                    at += 1
                    return parameters() ? .innerList(items) : nil
                }
                guard let item = bareItem(), parameters() else { return nil }
                items.append(item)
                guard let next = peek, next == 0x20 || next == UInt8(ascii: ")") else { return nil }
            }
        }

        mutating func parameters() -> Bool {
            while peek == UInt8(ascii: ";") {
                at += 1
                skip(Parser.isSP)
                guard key() != nil else { return false }
                if peek == UInt8(ascii: "=") {
                    at += 1
                    guard bareItem() != nil else { return false }
                }
            }
            return true
        }

        mutating func bareItem() -> Item? {
            guard let b = peek else { return nil }
            if b == UInt8(ascii: "-") || isDigit(b) { return number() }
            if b == UInt8(ascii: "\"") { return string() }
            if b == UInt8(ascii: "*") || isAlpha(b) { return token() }
            if b == UInt8(ascii: ":") { return byteSequence() }
            if b == UInt8(ascii: "?") { return boolean() }
            return nil
        }

        mutating func number() -> Item? {
            var negative = false
            if peek == UInt8(ascii: "-") {
                negative = true
                at += 1
            }
            guard let first = peek, isDigit(first) else { return nil }
            let start = at
            var dot: Int?
            while let b = peek {
                if isDigit(b) {
                    at += 1
                } else if b == UInt8(ascii: "."), dot == nil {
                    guard at - start <= 12 else { return nil }
                    dot = at
                    at += 1
                } else {
                    break
                }
                if dot == nil, at - start > 15 { return nil }
                if dot != nil, at - start > 16 { return nil }
            }
            let text = String(decoding: bytes[start..<at], as: UTF8.self)
            if let dot {
                let fraction = at - dot - 1
                guard fraction >= 1, fraction <= 3, let value = Double(text) else { return nil }
                return .decimal(negative ? -value : value)
            }
            guard let value = Int64(text) else { return nil }
            return .integer(negative ? -value : value)
        }

        mutating func string() -> Item? {
            at += 1
            var out: [UInt8] = []
            while let b = peek {
                at += 1
                if b == UInt8(ascii: "\\") {
                    guard let next = peek, next == UInt8(ascii: "\"") || next == UInt8(ascii: "\\") else { return nil }
                    out.append(next)
                    at += 1
                } else if b == UInt8(ascii: "\"") {
                    return .string(out)
                } else if b < 0x20 || b > 0x7E {
                    return nil
                } else {
                    out.append(b)
                }
            }
            return nil
        }

        mutating func token() -> Item? {
            let start = at
            at += 1
            while let b = peek, isTchar(b) || b == UInt8(ascii: ":") || b == UInt8(ascii: "/") { at += 1 }
            return .token(Array(bytes[start..<at]))
        }

        mutating func byteSequence() -> Item? {
            at += 1
            let start = at
            while let b = peek, b != UInt8(ascii: ":") {
                guard isAlpha(b) || isDigit(b) || "+/=".utf8.contains(b) else { return nil }
                at += 1
            }
            guard peek == UInt8(ascii: ":") else { return nil }
            let raw = Array(bytes[start..<at])
            at += 1
            return .bytes(raw)  // kept encoded: no directive reads one
        }

        mutating func boolean() -> Item? {
            at += 1
            guard let b = peek, b == UInt8(ascii: "0") || b == UInt8(ascii: "1") else { return nil }
            at += 1
            return .boolean(b == UInt8(ascii: "1"))
        }
    }
}
