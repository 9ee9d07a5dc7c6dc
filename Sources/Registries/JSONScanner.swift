/// A byte-level JSON (RFC 8259) scanner that reports every value with its path and byte range,
/// and builds nothing: the filters and rewriters in this module edit documents in place, so
/// everything they do not touch stays byte-identical to what the registry sent.
///
/// The whole document is checked against the grammar (and strings for UTF-8) as it is scanned, and
/// callers apply their edits only once a scan has finished: edits are only ever applied to valid
/// JSON, and (replacing whole values or entries) leave valid JSON. Time is linear in the document's
/// size; nesting deeper than `maximumDepth` is an error rather than a deep recursion.
public struct JSONScanner {
    /// Deeper than any registry document (npm's deepest is about 6) and shallow enough for the
    /// recursive descent's stack.
    public static let defaultMaximumDepth = 64

    private let bytes: [UInt8]
    private let maximumDepth: Int
    private var position = 0
    private var frames: [JSONPath.Frame] = []

    public init(_ bytes: [UInt8], maximumDepth: Int = JSONScanner.defaultMaximumDepth) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    /// Scans the whole document, calling `visitor` as each value ends (a container after its
    /// contents). Throws at the first byte that is not JSON; the visitor has then seen a prefix.
    public mutating func scan<Visitor: JSONVisitor>(_ visitor: inout Visitor) throws(JSONScanError) {
        position = 0
        frames.removeAll(keepingCapacity: true)
        skipWhitespace()
        try value(entryStart: position, &visitor)
        skipWhitespace()
        guard position == bytes.count else { throw error(.trailingContent) }
    }

    /// Checks that `bytes` is one JSON document within the depth bound.
    public static func validate(_ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(JSONScanError) {
        var scanner = JSONScanner(bytes, maximumDepth: maximumDepth)
        var ignore = IgnoringVisitor()
        try scanner.scan(&ignore)
    }

    // MARK: - Values

    private mutating func value<Visitor: JSONVisitor>(entryStart: Int, _ visitor: inout Visitor) throws(JSONScanError) {
        guard position < bytes.count else { throw error(.truncated) }
        let start = position
        var hasEscapes = false
        let kind: JSONValue.Kind
        switch bytes[position] {
        case UInt8(ascii: "{"):
            kind = .object
            try container(closingWith: UInt8(ascii: "}"), isObject: true, &visitor)
        case UInt8(ascii: "["):
            kind = .array
            try container(closingWith: UInt8(ascii: "]"), isObject: false, &visitor)
        case UInt8(ascii: "\""):
            kind = .string
            hasEscapes = try string()
        case UInt8(ascii: "t"):
            kind = .bool
            try literal("true")
        case UInt8(ascii: "f"):
            kind = .bool
            try literal("false")
        case UInt8(ascii: "n"):
            kind = .null
            try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            kind = .number
            try number()
        default:
            throw error(.unexpectedByte(bytes[position]))
        }
        let found = JSONValue(kind: kind, range: start..<position, entryStart: entryStart, hasEscapes: hasEscapes)
        visitor.visit(found, at: JSONPath(bytes: bytes, frames: frames))
    }

    /// An object or an array, from its opening bracket to past its closing one.
    private mutating func container<Visitor: JSONVisitor>(closingWith close: UInt8, isObject: Bool,
                                                          _ visitor: inout Visitor) throws(JSONScanError) {
        guard frames.count < maximumDepth else { throw error(.tooDeep(limit: maximumDepth)) }
        position += 1
        frames.append(JSONPath.Frame(isObject: isObject))
        defer { frames.removeLast() }
        skipWhitespace()
        if position < bytes.count, bytes[position] == close {
            position += 1
            return
        }
        while true {
            let entryStart = position
            if isObject { try memberKey() }
            try value(entryStart: entryStart, &visitor)
            frames[frames.count - 1].index += 1
            skipWhitespace()
            guard position < bytes.count else { throw error(.truncated) }
            if bytes[position] == close {
                position += 1
                return
            }
            guard bytes[position] == UInt8(ascii: ",") else { throw error(.unexpectedByte(bytes[position])) }
            position += 1
            skipWhitespace()
        }
    }

    /// `"key" :` — recorded in the innermost frame, leaving `position` at the member's value.
    private mutating func memberKey() throws(JSONScanError) {
        guard position < bytes.count else { throw error(.truncated) }
        guard bytes[position] == UInt8(ascii: "\"") else { throw error(.unexpectedByte(bytes[position])) }
        let start = position
        let escaped = try string()
        frames[frames.count - 1].key = (start + 1)..<(position - 1)
        frames[frames.count - 1].keyHasEscapes = escaped
        skipWhitespace()
        guard position < bytes.count else { throw error(.truncated) }
        guard bytes[position] == UInt8(ascii: ":") else { throw error(.unexpectedByte(bytes[position])) }
        position += 1
        skipWhitespace()
    }

    /// A string from its opening quote to past its closing one; whether it holds escapes.
    private mutating func string() throws(JSONScanError) -> Bool {
        position += 1
        var hasEscapes = false
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return hasEscapes
            case UInt8(ascii: "\\"):
                hasEscapes = true
                try escape()
            case 0x00..<0x20:
                throw error(.controlCharacterInString)
            case 0x20..<0x80:
                position += 1
            default:
                guard let length = UTF8Validation.sequenceLength(bytes, at: position) else { throw error(.invalidUTF8) }
                position += length
            }
        }
        throw error(.truncated)
    }

    /// RFC 8259 §7: `\" \\ \/ \b \f \n \r \t \uXXXX`.
    private mutating func escape() throws(JSONScanError) {
        guard position + 1 < bytes.count else { throw error(.truncated) }
        switch bytes[position + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            position += 2
        case UInt8(ascii: "u"):
            guard position + 6 <= bytes.count else { throw error(.truncated) }
            for i in (position + 2)..<(position + 6) where hexValue(bytes[i]) == nil {
                throw JSONScanError(reason: .invalidEscape, offset: i)
            }
            position += 6
        default:
            throw error(.invalidEscape)
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONScanError) {
        let count = word.utf8CodeUnitCount
        for i in 0..<count {
            guard position < bytes.count else { throw error(.truncated) }
            guard bytes[position] == word.utf8Start[i] else { throw error(.unexpectedByte(bytes[position])) }
            position += 1
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() throws(JSONScanError) {
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count else { throw error(.truncated) }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            try digits()
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            try digits()
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                position += 1
            }
            try digits()
        }
    }

    /// One or more decimal digits.
    private mutating func digits() throws(JSONScanError) {
        guard position < bytes.count else { throw error(.truncated) }
        guard isDecimalDigit(bytes[position]) else { throw error(.invalidNumber) }
        while position < bytes.count, isDecimalDigit(bytes[position]) { position += 1 }
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private func error(_ reason: JSONScanError.Reason) -> JSONScanError {
        JSONScanError(reason: reason, offset: position)
    }
}

/// Receives each value of a scanned document as it ends.
public protocol JSONVisitor {
    /// `path` leads from the root to `value`; it is only valid during the call.
    mutating func visit(_ value: JSONValue, at path: JSONPath)
}

struct IgnoringVisitor: JSONVisitor {
    func visit(_ value: JSONValue, at path: JSONPath) {}
}

/// Where one value lies in the document.
public struct JSONValue: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case object, array, string, number, bool, null
    }

    public var kind: Kind
    /// The value's bytes, quotes and brackets included.
    public var range: Range<Int>
    /// Where the value's entry in its container starts: the key's opening quote for an object
    /// member, the value itself for an array element or the root. Removing `entryStart..<range.upperBound`
    /// (and one comma) removes the entry.
    public var entryStart: Int
    /// For strings: whether the contents hold a backslash escape (and need decoding to be read).
    public var hasEscapes: Bool

    /// For strings: the bytes between the quotes.
    public var contentRange: Range<Int> {
        kind == .string ? (range.lowerBound + 1)..<(range.upperBound - 1) : range
    }
}

/// The scan stopped: what was wrong, and at which byte.
public struct JSONScanError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        /// The document ended inside a value (a cut-off download).
        case truncated
        case unexpectedByte(UInt8)
        case invalidNumber
        case invalidEscape
        case controlCharacterInString
        case invalidUTF8
        /// Nested deeper than the scanner's bound.
        case tooDeep(limit: Int)
        /// Something after the one top-level value.
        case trailingContent
    }

    public var reason: Reason
    public var offset: Int

    public var description: String {
        switch reason {
        case .truncated: "JSON document truncated at byte \(offset)"
        case .unexpectedByte(let byte): "unexpected byte 0x\(String(byte, radix: 16)) in JSON at byte \(offset)"
        case .invalidNumber: "invalid JSON number at byte \(offset)"
        case .invalidEscape: "invalid escape in JSON string at byte \(offset)"
        case .controlCharacterInString: "unescaped control character in JSON string at byte \(offset)"
        case .invalidUTF8: "invalid UTF-8 in JSON string at byte \(offset)"
        case .tooDeep(let limit): "JSON nested deeper than \(limit) levels at byte \(offset)"
        case .trailingContent: "content after the JSON document at byte \(offset)"
        }
    }
}

@inline(__always)
func isDecimalDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

@inline(__always)
func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}
