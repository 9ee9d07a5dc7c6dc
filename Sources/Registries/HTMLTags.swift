/// Finds the start tags of an HTML page and their attributes, in place, far enough to rewrite
/// links safely: text, comments, end tags, doctypes and the contents of raw-text elements
/// (`<script>`, `<style>`, `<title>`, `<textarea>`) are stepped over, so a `<a href=` inside any
/// of them, or a `>` inside a quoted attribute value, is never taken for a tag.
///
/// Not a full HTML parser: it needs only what PEP 503 pages contain. The page must be UTF-8
/// (PEP 503 pages are); a tag or comment cut off by the end of the page is an error.
struct HTMLTagScanner {
    struct Tag {
        /// The tag's name, lowercased (`a`, `base`).
        var name: String
        var attributes: [Attribute]
        /// From `<` to past `>`.
        var range: Range<Int>
    }

    struct Attribute {
        /// Lowercased.
        var name: String
        /// The value as written (character references not decoded), quotes excluded; nil when
        /// the attribute has no value.
        var value: Range<Int>?
        /// `"` or `'`, or nil for an unquoted value.
        var quote: UInt8?
    }

    private let bytes: [UInt8]
    private var position = 0
    /// After a raw-text element's start tag: the element, whose end tag the next scan looks for.
    private var rawTextElement: [UInt8]?

    private static let rawTextElements = ["script", "style", "title", "textarea"]

    init(_ bytes: [UInt8]) throws(HTMLScanError) {
        if let offset = UTF8Validation.firstInvalidOffset(bytes) { throw HTMLScanError(reason: .invalidUTF8, offset: offset) }
        self.bytes = bytes
    }

    /// The next start tag, or nil at the end of the page.
    mutating func nextStartTag() throws(HTMLScanError) -> Tag? {
        if let element = rawTextElement {
            rawTextElement = nil
            try skipRawText(of: element)
        }
        while let open = bytes[position...].firstIndex(of: UInt8(ascii: "<")) {
            position = open
            let next = open + 1 < bytes.count ? bytes[open + 1] : 0
            if isASCIILetter(next) { return try startTag() }
            if hasPrefix("<!--", at: open) {
                try skip(past: Array("-->".utf8), from: open + 4, unterminated: .truncatedComment)
            } else if next == UInt8(ascii: "!") || next == UInt8(ascii: "?") || next == UInt8(ascii: "/") {
                try skip(past: [UInt8(ascii: ">")], from: open + 1, unterminated: .truncatedTag)
            } else {
                position = open + 1  // a lone `<` in text
            }
        }
        position = bytes.count
        return nil
    }

    // MARK: - Start tags

    private mutating func startTag() throws(HTMLScanError) -> Tag {
        let start = position
        position += 1
        let nameStart = position
        while position < bytes.count, !isTagNameEnd(bytes[position]) { position += 1 }
        let name = lowercased(nameStart..<position)
        var attributes: [Attribute] = []
        while true {
            skipWhitespaceAndSlashes()
            guard position < bytes.count else { throw HTMLScanError(reason: .truncatedTag, offset: start) }
            if bytes[position] == UInt8(ascii: ">") {
                position += 1
                break
            }
            attributes.append(try attribute(tagStart: start))
        }
        if Self.rawTextElements.contains(name) { rawTextElement = Array(name.utf8) }
        return Tag(name: name, attributes: attributes, range: start..<position)
    }

    /// `name`, `name=value`, `name="value"` or `name='value'` (HTML §13.2.5.32–38).
    private mutating func attribute(tagStart: Int) throws(HTMLScanError) -> Attribute {
        let nameStart = position
        position += 1  // the first character may be `=` (HTML §13.2.5.32)
        while position < bytes.count, !isAttributeNameEnd(bytes[position]) { position += 1 }
        var attribute = Attribute(name: lowercased(nameStart..<position), value: nil, quote: nil)
        skipWhitespace()
        guard position < bytes.count, bytes[position] == UInt8(ascii: "=") else { return attribute }
        position += 1
        skipWhitespace()
        guard position < bytes.count else { throw HTMLScanError(reason: .truncatedTag, offset: tagStart) }
        let first = bytes[position]
        if first == UInt8(ascii: "\"") || first == UInt8(ascii: "'") {
            guard let close = bytes[(position + 1)...].firstIndex(of: first) else {
                throw HTMLScanError(reason: .truncatedTag, offset: tagStart)
            }
            attribute.value = (position + 1)..<close
            attribute.quote = first
            position = close + 1
        } else {
            let valueStart = position
            while position < bytes.count, !isWhitespace(bytes[position]), bytes[position] != UInt8(ascii: ">") {
                position += 1
            }
            attribute.value = valueStart..<position
        }
        return attribute
    }

    // MARK: - Skipping

    /// Past the end tag `</element` (any case) that closes a raw-text element.
    private mutating func skipRawText(of element: [UInt8]) throws(HTMLScanError) {
        while let open = bytes[position...].firstIndex(of: UInt8(ascii: "<")) {
            position = open + 1
            guard position < bytes.count, bytes[position] == UInt8(ascii: "/"),
                  position + 1 + element.count <= bytes.count else { continue }
            let name = (position + 1)..<(position + 1 + element.count)
            let after = name.upperBound < bytes.count ? bytes[name.upperBound] : UInt8(ascii: ">")
            if bytes[name].map(asciiLowercased).elementsEqual(element), isTagNameEnd(after) {
                position = open
                return
            }
        }
        position = bytes.count
    }

    private mutating func skip(past terminator: [UInt8], from start: Int,
                               unterminated: HTMLScanError.Reason) throws(HTMLScanError) {
        var i = start
        while i + terminator.count <= bytes.count {
            if bytes[i..<(i + terminator.count)].elementsEqual(terminator) {
                position = i + terminator.count
                return
            }
            i += 1
        }
        throw HTMLScanError(reason: unterminated, offset: position)
    }

    private mutating func skipWhitespace() {
        while position < bytes.count, isWhitespace(bytes[position]) { position += 1 }
    }

    private mutating func skipWhitespaceAndSlashes() {
        while position < bytes.count, isWhitespace(bytes[position]) || bytes[position] == UInt8(ascii: "/") {
            position += 1
        }
    }

    // MARK: - Bytes

    private func hasPrefix(_ text: String, at offset: Int) -> Bool {
        let needle = Array(text.utf8)
        return offset + needle.count <= bytes.count && bytes[offset..<(offset + needle.count)].elementsEqual(needle)
    }

    private func lowercased(_ range: Range<Int>) -> String {
        String(decoding: bytes[range].map(asciiLowercased), as: UTF8.self)
    }

    private func isTagNameEnd(_ byte: UInt8) -> Bool {
        isWhitespace(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: ">")
    }

    private func isAttributeNameEnd(_ byte: UInt8) -> Bool {
        isWhitespace(byte) || byte == UInt8(ascii: "/") || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "=")
    }

    private func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0C || byte == 0x0D
    }

    private func isASCIILetter(_ byte: UInt8) -> Bool { (byte | 0x20) &- UInt8(ascii: "a") < 26 }
}

/// Why a page could not be read.
public struct HTMLScanError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case invalidUTF8
        /// The page ended inside a tag.
        case truncatedTag
        /// The page ended inside a comment.
        case truncatedComment
    }

    public var reason: Reason
    public var offset: Int

    public var description: String {
        switch reason {
        case .invalidUTF8: "invalid UTF-8 in HTML at byte \(offset)"
        case .truncatedTag: "HTML tag at byte \(offset) is not closed"
        case .truncatedComment: "HTML comment at byte \(offset) is not closed"
        }
    }
}
