import HTTPWire

/// RFC 9213 targeted cache control: fields such as `CDN-Cache-Control` that an origin addresses to
/// the caches in front of it. A cache with a target list uses the first listed field present with
/// a valid value, instead of `Cache-Control` and `Expires`, for its own freshness and storability;
/// the fields themselves reach clients unchanged.
///
/// A targeted field is a Structured Field Dictionary (RFC 8941). One that does not parse as one, or
/// gives a known directive a value of the wrong type (`max-age` not a non-negative Integer, `public`
/// not a Boolean, `no-cache` and `private` not a Boolean or field names as a String or an Inner List
/// of Strings), is ignored as a whole, as if it were absent (RFC 9213 §2.1): never partly honoured.
public enum TargetedCacheControl {
    /// The head the cache's decisions read: `response` with its `Cache-Control` and `Expires` fields
    /// replaced by the chosen targeted field's value as `Cache-Control`. Nil when no listed field
    /// applies (decide on `response` itself). `targets` are lower-case field names, in order.
    public static func policyHead(of response: ResponseHead, targets: [[UInt8]]) -> ResponseHead? {
        guard !targets.isEmpty, let chosen = chosenDirectives(response.headers, targets: targets) else { return nil }
        let headers = response.headers
        var w = MessageWriter(capacity: headers.storage.count + 32)
        HeadSerialization.appendStatusLine(of: response, to: &w)
        for i in 0..<headers.count
        where !headers.nameEquals(at: i, "cache-control") && !headers.nameEquals(at: i, "expires") {
            w.appendField(at: i, of: headers)
        }
        w.append("Cache-Control: ")
        w.append(chosen)
        w.append("\r\n\r\n")
        return StoredHead.parse(w.bytes)
    }

    /// The first listed field present with a valid value, as `Cache-Control` directives.
    static func chosenDirectives(_ headers: HeaderBlock, targets: [[UInt8]]) -> [UInt8]? {
        for target in targets {
            guard let value = fieldValue(headers, name: target) else { continue }
            if let directives = cacheControl(fromTargeted: value) { return directives }
        }
        return nil
    }

    /// A targeted field's value as `Cache-Control` directives, or nil when it is not a valid
    /// Dictionary of directives (RFC 9213 §2.1). Directives whose value is false are left out.
    public static func cacheControl(fromTargeted value: [UInt8]) -> [UInt8]? {
        guard let members = StructuredDictionary.parse(value) else { return nil }
        var out: [UInt8] = []
        for (key, item) in members {
            let name = String(decoding: key, as: UTF8.self)
            var directive: [UInt8]?
            switch (TargetedCacheControl.kinds[name], item) {
            case (.integer?, .integer(let n)) where n >= 0:
                directive = key + Array("=\(n)".utf8)
            case (.integer?, _):
                return nil
            case (.boolean?, .boolean(let on)), (.fieldNames?, .boolean(let on)):
                directive = on ? key : nil
            case (.fieldNames?, .string(let names)):
                guard names.allSatisfy(isFieldNameListByte) else { return nil }
                directive = key + Array("=\"".utf8) + names + [UInt8(ascii: "\"")]
            case (.fieldNames?, .innerList(let items)):
                var names: [UInt8] = []
                for element in items {
                    guard case .string(let fieldName) = element, fieldName.allSatisfy(isFieldNameListByte) else {
                        return nil
                    }
                    if !names.isEmpty { names += Array(", ".utf8) }
                    names += fieldName
                }
                directive = key + Array("=\"".utf8) + names + [UInt8(ascii: "\"")]
            case (.boolean?, _), (.fieldNames?, _):
                return nil
            case (nil, .boolean(let on)):
                directive = on ? key : nil  // an extension: kept as a bare directive
            case (nil, _):
                directive = nil  // an extension with a value no directive here reads
            }
            if let directive {
                if !out.isEmpty { out += Array(", ".utf8) }
                out += directive
            }
        }
        return out
    }

    private enum Kind { case integer, boolean, fieldNames }

    /// Field names and the commas and spaces between them: nothing that could end the quoted
    /// list written into `Cache-Control`.
    private static func isFieldNameListByte(_ b: UInt8) -> Bool {
        isTchar(b) || b == UInt8(ascii: ",") || b == UInt8(ascii: " ")
    }

    /// The value types of the directives RFC 9111 and RFC 5861 define.
    private static let kinds: [String: Kind] = [
        "max-age": .integer, "s-maxage": .integer, "stale-while-revalidate": .integer, "stale-if-error": .integer,
        "must-revalidate": .boolean, "proxy-revalidate": .boolean, "no-store": .boolean, "no-transform": .boolean,
        "public": .boolean, "immutable": .boolean, "must-understand": .boolean,
        "no-cache": .fieldNames, "private": .fieldNames,
    ]

    /// The value of `name` (all its lines, joined as one list), nil when absent or empty.
    static func fieldValue(_ headers: HeaderBlock, name target: [UInt8]) -> [UInt8]? {
        var value: [UInt8] = []
        headers.storage.withUnsafeBytes { all in
            for field in headers.fields where field.name.count == target.count {
                let name = UnsafeRawBufferPointer(rebasing: all[field.name.start..<field.name.start + field.name.count])
                guard equalsLowercased(name, target) else { continue }
                let v = trimmed(UnsafeRawBufferPointer(rebasing: all[field.value.start..<field.value.start + field.value.count]))
                guard !v.isEmpty else { continue }
                if !value.isEmpty { value.append(contentsOf: Array(", ".utf8)) }
                value.append(contentsOf: v)
            }
        }
        return value.isEmpty ? nil : value
    }

    private static func equalsLowercased(_ a: UnsafeRawBufferPointer, _ lower: [UInt8]) -> Bool {
        for i in 0..<a.count {
            var b = a[i]
            if b >= 65 && b <= 90 { b += 32 }
            if b != lower[i] { return false }
        }
        return true
    }

    private static func trimmed(_ v: UnsafeRawBufferPointer) -> [UInt8] {
        var s = 0
        var e = v.count
        while s < e, v[s] == 32 || v[s] == 9 { s += 1 }
        while e > s, v[e - 1] == 32 || v[e - 1] == 9 { e -= 1 }
        return Array(v[s..<e])
    }
}
