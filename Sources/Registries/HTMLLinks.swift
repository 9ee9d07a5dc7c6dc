/// Rewriting the links of an HTML index page (PEP 503): the `href` of each `<a>` tag, and of a
/// `<base>` tag, which would otherwise send every relative link upstream.
///
/// Only quoted values (`"` or `'`) are rewritten, as PEP 503 pages write them; an unquoted `href`
/// is left as sent (counted in `leftAlone`), since a replacement with a space or `>` would have to
/// change its quoting. Values are matched as written: a prefix spelled with character references
/// in the page (`https:&#47;&#47;…`) is not recognised. The replacement prefix is escaped for the
/// attribute; the rest of the value is kept byte for byte.
enum HTMLLinks {
    static func rewrite(_ page: [UInt8], with map: URLPrefixMap) throws(HTMLScanError) -> RewriteResult {
        var scanner = try HTMLTagScanner(page)
        var edits: [ByteEdit] = []
        var leftAlone = 0
        while let tag = try scanner.nextStartTag() {
            guard tag.name == "a" || tag.name == "base" else { continue }
            for attribute in tag.attributes where attribute.name == "href" {
                guard let value = attribute.value, attribute.quote != nil,
                      let (entry, length) = map.match(page[value]) else {
                    leftAlone += 1
                    continue
                }
                let prefix = value.lowerBound..<(value.lowerBound + length)
                edits.append(ByteEdit(range: prefix, replacement: HTMLText.escapedAttribute(entry.replacement)))
            }
        }
        return RewriteResult(document: ByteEdits.apply(edits, to: page), rewritten: edits.count, leftAlone: leftAlone)
    }

    /// One `<a>` tag: its attributes (values with character references decoded) and its text.
    struct Anchor: Equatable {
        var attributes: [String: String]
        var text: String
    }

    /// Every `<a>` tag of a page, for reading a page back (the first of a repeated attribute wins,
    /// as in HTML §13.2.5.33).
    static func anchors(in page: [UInt8]) throws(HTMLScanError) -> [Anchor] {
        var scanner = try HTMLTagScanner(page)
        var anchors: [Anchor] = []
        while let tag = try scanner.nextStartTag() {
            guard tag.name == "a" else { continue }
            var attributes: [String: String] = [:]
            for attribute in tag.attributes where attributes[attribute.name] == nil {
                attributes[attribute.name] = attribute.value.map { HTMLText.unescape(page[$0]) } ?? ""
            }
            let textEnd = page[tag.range.upperBound...].firstIndex(of: UInt8(ascii: "<")) ?? page.count
            anchors.append(Anchor(attributes: attributes, text: HTMLText.unescape(page[tag.range.upperBound..<textEnd])))
        }
        return anchors
    }
}

/// Escaping text for HTML, and reading back what was escaped.
enum HTMLText {
    /// Safe in text and in either kind of quoted attribute value.
    static func escapedAttribute(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "&"): out += Array("&amp;".utf8)
            case UInt8(ascii: "<"): out += Array("&lt;".utf8)
            case UInt8(ascii: ">"): out += Array("&gt;".utf8)
            case UInt8(ascii: "\""): out += Array("&quot;".utf8)
            case UInt8(ascii: "'"): out += Array("&#39;".utf8)
            default: out.append(byte)
            }
        }
        return out
    }

    static func escaped(_ text: String) -> String {
        String(decoding: escapedAttribute(text), as: UTF8.self)
    }

    /// Decodes the named references `&amp; &lt; &gt; &quot; &apos;` and numeric ones (`&#39;`,
    /// `&#x27;`); any other `&` stays as written.
    static func unescape(_ bytes: ArraySlice<UInt8>) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            rest = rest[amp...]
            guard let semicolon = rest.prefix(12).firstIndex(of: ";"),
                  let decoded = reference(String(rest[rest.index(after: amp)..<semicolon])) else {
                out.append("&")
                rest = rest.dropFirst()
                continue
            }
            out.unicodeScalars.append(decoded)
            rest = rest[rest.index(after: semicolon)...]
        }
        return out + rest
    }

    private static func reference(_ name: String) -> Unicode.Scalar? {
        switch name {
        case "amp": return "&"
        case "lt": return "<"
        case "gt": return ">"
        case "quot": return "\""
        case "apos": return "'"
        default:
            guard name.hasPrefix("#") else { return nil }
            let digits = name.dropFirst()
            let value = digits.lowercased().hasPrefix("x") ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits)
            return value.flatMap(Unicode.Scalar.init)
        }
    }
}
