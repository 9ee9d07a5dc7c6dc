import Yams

/// What `GET /config` may show of a key's value. Each key decides in the schema
/// (`ConfigField.disclosure`); a test fails when a key whose name sounds secret keeps the default
/// without saying why.
public enum Disclosure: Sendable, Equatable {
    /// Shown as it is.
    case shown
    /// A secret: `"REDACTED"` when set, `null` when not (whether one is set is no secret: the
    /// endpoint's 401 says as much).
    case redacted
    /// Header fields: names shown, every value redacted. Which fields carry credentials is open
    /// ended (`Authorization`, `X-Api-Key`, `PRIVATE-TOKEN`, cookies), so none is shown.
    case valuesRedacted
    /// The name sounds secret but the value is not: why.
    case notSecret(String)

    /// What the redacted values say instead.
    public static let placeholder = "REDACTED"
}

/// The configuration in force as JSON, for `GET /config`: every key of `ConfigSchema.fields`, in
/// its order, with the value written as the file writes it and read as YAML reads it (lists as
/// arrays, mappings as objects, unset as null, numbers and `true`/`false` as JSON's own where the
/// key or the list holds them; everything else as a string), secrets redacted as each key's
/// `Disclosure` says.
public enum ConfigReport {
    public static func json(_ config: Config) -> String {
        var out = "{"
        for (i, field) in ConfigSchema.fields.enumerated() {
            if i > 0 { out += "," }
            out += quoted(field.key) + ":" + value(of: field, in: config)
        }
        return out + "}"
    }

    /// One key's value as JSON, disclosed as the key allows.
    static func value(of field: ConfigField, in config: Config) -> String {
        let node = parsed(field.text(config))
        switch field.disclosure {
        case .shown, .notSecret:
            // A single value is a number or a boolean only where the key holds one: a TLS
            // version "1.3" stays text.
            if case .scalar(let text)? = node, !holdsNumberOrBoolean(field) { return quoted(text.string) }
            return json(node)
        case .redacted:
            return node == nil ? "null" : quoted(Disclosure.placeholder)
        case .valuesRedacted:
            guard case .mapping(let m)? = node else { return node == nil ? "null" : quoted(Disclosure.placeholder) }
            return "{" + m.map { quoted(scalarText($0.key)) + ":" + quoted(Disclosure.placeholder) }
                .joined(separator: ",") + "}"
        }
    }

    /// Whether the key's value is a number or a boolean (when set).
    static func holdsNumberOrBoolean(_ field: ConfigField) -> Bool {
        let v = field.defaultValue
        return v is Int || v is Double || v is Bool || v is Int? || v is Double? || v is Bool?
    }

    /// The written value read back as YAML; nil when it says nothing (an unset key).
    private static func parsed(_ text: String) -> Node? {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch {
            // Every written value reads back (ConfigTableTests checks each key); the text as a
            // string stands in should one ever not.
            return Node(text, .implicit, .doubleQuoted)
        }
        guard let node, node.null == nil else { return nil }
        return node
    }

    static func json(_ node: Node?) -> String {
        guard let node else { return "null" }
        switch node {
        case .scalar(let s): return scalar(s)
        case .sequence(let seq): return "[" + seq.map { json($0) }.joined(separator: ",") + "]"
        case .mapping(let m):
            return "{" + m.map { quoted(scalarText($0.key)) + ":" + json($0.value) }.joined(separator: ",") + "}"
        case .alias: return "null"  // never written: values hold no anchors
        }
    }

    /// Numbers, booleans and null as JSON's own when written plain; any other scalar (`30s`,
    /// `1GiB`, `off`, a quoted `"1.3"`) as the string the file would hold.
    private static func scalar(_ s: Node.Scalar) -> String {
        let text = s.string
        guard s.style == .plain else { return quoted(text) }
        switch text {
        case "true", "false": return text
        case "", "~", "null": return "null"
        default: return isJSONNumber(text) ? text : quoted(text)
        }
    }

    /// `-12`, `0.25`: digits with at most one point and a leading minus, no leading zeros (what
    /// JSON accepts as a number, and all the file writes as one).
    static func isJSONNumber(_ text: String) -> Bool {
        var digits = Substring(text)
        if digits.first == "-" { digits = digits.dropFirst() }
        let parts = digits.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCIIDigit),
              whole == "0" || whole.first != "0" else { return false }
        guard parts.count == 2 else { return true }
        return !parts[1].isEmpty && parts[1].allSatisfy(\.isASCIIDigit)
    }

    private static func scalarText(_ node: Node) -> String {
        if case .scalar(let s) = node { return s.string }
        return json(node)
    }

    /// A JSON string literal.
    static func quoted(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
