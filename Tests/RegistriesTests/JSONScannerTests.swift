import Testing
@testable import Registries

/// Records every value as `path=kind` (paths in the pattern notation, indexes written out).
private struct Recorder: JSONVisitor {
    var seen: [String] = []

    mutating func visit(_ value: JSONValue, at path: JSONPath) {
        var written = ""
        for depth in 0..<path.count {
            switch path[depth] {
            case .key(let key): written += (written.isEmpty ? "" : ".") + key
            case .index(let index): written += "[\(index)]"
            }
        }
        seen.append("\(written)=\(value.kind)")
    }
}

private func record(_ json: String) throws -> [String] {
    var recorder = Recorder()
    var scanner = JSONScanner(bytes(json))
    try scanner.scan(&recorder)
    return recorder.seen
}

private func scanError(_ document: [UInt8], maximumDepth: Int = JSONScanner.defaultMaximumDepth) -> JSONScanError? {
    do {
        try JSONScanner.validate(document, maximumDepth: maximumDepth)
        return nil
    } catch {
        return error
    }
}

struct HostileJSONRow: Sendable, CustomTestStringConvertible {
    var name: String
    var document: [UInt8]
    var expected: JSONScanError

    var testDescription: String { name }

    init(_ name: String, _ document: String, _ reason: JSONScanError.Reason, at offset: Int) {
        self.init(name, bytes(document), reason, at: offset)
    }

    init(_ name: String, _ document: [UInt8], _ reason: JSONScanError.Reason, at offset: Int) {
        self.name = name
        self.document = document
        expected = JSONScanError(reason: reason, offset: offset)
    }
}

@Suite("JSON scanner")
struct JSONScannerTests {
    @Test func visitsEveryValueWithItsPathContainersLast() throws {
        let seen = try record(#"{"a": [1, {"b": null}], "c": "x", "d": true, "e": {}}"#)
        #expect(seen == ["a[0]=number", "a[1].b=null", "a[1]=object", "a=array", "c=string", "d=bool",
                         "e=object", "=object"])
    }

    @Test func reportsRangesAndEntryStarts() throws {
        struct Ranges: JSONVisitor {
            var found: [String: JSONValue] = [:]
            mutating func visit(_ value: JSONValue, at path: JSONPath) {
                if path.count == 1, let key = path.key(at: 0) { found[key] = value }
            }
        }
        let json = #"{ "url" : "a\/b", "n": -1.5e3 }"#
        var ranges = Ranges()
        var scanner = JSONScanner(bytes(json))
        try scanner.scan(&ranges)
        let url = try #require(ranges.found["url"])
        #expect(text(Array(bytes(json)[url.range])) == #""a\/b""#)
        #expect(text(Array(bytes(json)[url.contentRange])) == #"a\/b"#)
        #expect(url.entryStart == 2 && url.hasEscapes)
        let number = try #require(ranges.found["n"])
        #expect(text(Array(bytes(json)[number.range])) == "-1.5e3" && !number.hasEscapes)
    }

    @Test("Valid documents", arguments: [
        "0", "-0", "12.5e-3", "1E+2", "\"\"", "[]", "{}", " [ 1 , 2 ] ", "\"\\u00e9\\ud83d\\ude00\"",
        "{\"\\u0075rl\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "\"é😀\"", "[true,false,null]",
    ])
    func acceptsValidDocuments(_ document: String) {
        #expect(scanError(bytes(document)) == nil)
    }

    static let hostile: [HostileJSONRow] = [
        HostileJSONRow("empty document", "", .truncated, at: 0),
        HostileJSONRow("cut inside an object", #"{"files": [{"url": "https://x"#, .truncated, at: 29),
        HostileJSONRow("cut after a member", #"{"a": 1"#, .truncated, at: 7),
        HostileJSONRow("cut inside an escape", #""ab\"#, .truncated, at: 3),
        HostileJSONRow("cut inside a \\u escape", #""\u12"#, .truncated, at: 1),
        HostileJSONRow("cut inside a literal", "[tru", .truncated, at: 4),
        HostileJSONRow("cut after a minus", "-", .truncated, at: 1),
        HostileJSONRow("cut after an exponent", "1e", .truncated, at: 2),
        HostileJSONRow("trailing comma in an array", "[1,]", .unexpectedByte(UInt8(ascii: "]")), at: 3),
        HostileJSONRow("trailing comma in an object", #"{"a":1,}"#, .unexpectedByte(UInt8(ascii: "}")), at: 7),
        HostileJSONRow("unquoted key", "{a:1}", .unexpectedByte(UInt8(ascii: "a")), at: 1),
        HostileJSONRow("missing colon", #"{"a" 1}"#, .unexpectedByte(UInt8(ascii: "1")), at: 5),
        HostileJSONRow("single quotes", "['a']", .unexpectedByte(UInt8(ascii: "'")), at: 1),
        HostileJSONRow("leading zero", "01", .trailingContent, at: 1),
        HostileJSONRow("fraction without digits", "1.", .truncated, at: 2),
        HostileJSONRow("fraction not digits", "1.x", .invalidNumber, at: 2),
        HostileJSONRow("plus sign", "+1", .unexpectedByte(UInt8(ascii: "+")), at: 0),
        HostileJSONRow("misspelt literal", "nul", .truncated, at: 3),
        HostileJSONRow("wrong literal", "trUe", .unexpectedByte(UInt8(ascii: "U")), at: 2),
        HostileJSONRow("unknown escape", #""\x""#, .invalidEscape, at: 1),
        HostileJSONRow("non-hex \\u escape", #""\u12G4""#, .invalidEscape, at: 5),
        HostileJSONRow("raw newline in a string", "\"a\nb\"", .controlCharacterInString, at: 2),
        HostileJSONRow("two documents", "{} {}", .trailingContent, at: 3),
        HostileJSONRow("byte order mark", [0xEF, 0xBB, 0xBF] + bytes("{}"), .unexpectedByte(0xEF), at: 0),
        HostileJSONRow("Latin-1 é in a string", [0x22, 0xE9, 0x22], .invalidUTF8, at: 1),
        HostileJSONRow("overlong slash", [0x22, 0xC0, 0xAF, 0x22], .invalidUTF8, at: 1),
        HostileJSONRow("UTF-8 surrogate", [0x22, 0xED, 0xA0, 0x80, 0x22], .invalidUTF8, at: 1),
        HostileJSONRow("beyond U+10FFFF", [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], .invalidUTF8, at: 1),
        HostileJSONRow("cut multi-byte sequence", [0x22, 0xE2, 0x82], .invalidUTF8, at: 1),
        HostileJSONRow("non-ASCII outside strings", [0x5B, 0xC3, 0xA9, 0x5D], .unexpectedByte(0xC3), at: 1),
        HostileJSONRow("65 nested arrays", String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
                       .tooDeep(limit: 64), at: 64),
        HostileJSONRow("a million open brackets", String(repeating: "[", count: 1_000_000), .tooDeep(limit: 64), at: 64),
        HostileJSONRow("deep objects", String(repeating: #"{"a":"#, count: 100), .tooDeep(limit: 64), at: 320),
    ]

    @Test("Hostile documents", arguments: hostile)
    func rejectsHostileDocuments(_ row: HostileJSONRow) {
        #expect(scanError(row.document) == row.expected)
    }

    @Test func sixtyFourLevelsAreAllowed() {
        let document = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(scanError(bytes(document)) == nil)
        #expect(scanError(bytes(document), maximumDepth: 63) == JSONScanError(reason: .tooDeep(limit: 63), offset: 63))
    }

    @Test func errorsSayWhatAndWhere() {
        #expect(JSONScanError(reason: .truncated, offset: 27).description == "JSON document truncated at byte 27")
        #expect(JSONScanError(reason: .tooDeep(limit: 64), offset: 64).description
            == "JSON nested deeper than 64 levels at byte 64")
    }

    /// Every prefix of a real document is either rejected or (the whole) accepted: no crash, no
    /// partial success.
    @Test func everyPrefixOfARealDocumentIsTruncated() {
        let document = bytes(CratesFixtures.config)
        for length in 0..<document.count {
            let error = scanError(Array(document[..<length]))
            #expect(error?.reason == .truncated, "prefix of \(length) bytes")
        }
        #expect(scanError(document) == nil)
    }

    /// Four megabytes of members: a quadratic scan would not finish in a test's time.
    @Test func scansLargeDocumentsInLinearTime() throws {
        var document = bytes(#"{"versions":{"#)
        let member = bytes(#""1.0.0":{"dist":{"tarball":"https://registry.npmjs.org/x/-/x-1.0.0.tgz"}},"#)
        for _ in 0..<(4 << 20 / member.count) { document += member }
        document.removeLast()
        document += bytes("}}")
        struct Counter: JSONVisitor {
            var strings = 0
            mutating func visit(_ value: JSONValue, at path: JSONPath) { if value.kind == .string { strings += 1 } }
        }
        var counter = Counter()
        var scanner = JSONScanner(document)
        try scanner.scan(&counter)
        #expect(counter.strings == 4 << 20 / member.count)
    }
}

@Suite("JSON paths and patterns")
struct JSONPathTests {
    @Test("Pattern notation", arguments: [
        ("files[].url", [JSONPathPattern.Step.key("files"), .anyIndex, .key("url")]),
        ("releases.*[].url", [.key("releases"), .anyKey, .anyIndex, .key("url")]),
        ("versions.*.dist.tarball", [.key("versions"), .anyKey, .key("dist"), .key("tarball")]),
        ("dl", [.key("dl")]),
        ("a[][]", [.key("a"), .anyIndex, .anyIndex]),
    ])
    func parsesNotation(_ notation: String, _ steps: [JSONPathPattern.Step]) {
        #expect(JSONPathPattern(notation).steps == steps)
        #expect(JSONPathPattern(notation).description == notation)
    }

    @Test func matchesKeysSpelledWithEscapes() throws {
        struct Matcher: JSONVisitor {
            var matched: [String] = []
            mutating func visit(_ value: JSONValue, at path: JSONPath) {
                if path.matches(JSONPathPattern("files[].url")) { matched.append(path.key(at: 2) ?? "") }
            }
        }
        var matcher = Matcher()
        var scanner = JSONScanner(bytes(#"{"files":[{"\u0075rl":"a","url":"b","urls":"c"}],"url":"d"}"#))
        try scanner.scan(&matcher)
        #expect(matcher.matched == ["url", "url"])
    }
}

@Suite("JSON strings")
struct JSONStringTests {
    @Test("Decoding", arguments: [
        (#"plain"#, "plain"),
        (#"https:\/\/files.pythonhosted.org\/p"#, "https://files.pythonhosted.org/p"),
        (#"\"q\" \\ \b\f\n\r\t"#, "\"q\" \\ \u{08}\u{0C}\n\r\t"),
        (#"caf\u00e9 \u00E9"#, "café é"),
        (#"\ud83d\ude00"#, "😀"),
        ("é😀", "é😀"),
    ])
    func decodes(_ contents: String, _ expected: String) {
        #expect(JSONString.decode(bytes(contents)[...]) == expected)
    }

    @Test("Lone surrogates are not text", arguments: [#"\ud83d"#, #"\ude00"#, #"\ud83dx"#, #"\ud83d\u0041"#])
    func refusesLoneSurrogates(_ contents: String) {
        #expect(JSONString.decode(bytes(contents)[...]) == nil)
    }

    @Test func encodesOnlyWhatMustBeEscaped() {
        #expect(text(JSONString.encode("a/b \"c\" \\ é\n\t\u{01}")) == #"a/b \"c\" \\ é\n\t\u0001"#)
        #expect(text(JSONString.quoted("x")) == #""x""#)
    }

    @Test("Encoding round-trips through the scanner", arguments: ["", "/", "\"", "\\", "\u{00}\u{1F}", "é😀", "a\"b\\c"])
    func roundTrips(_ original: String) throws {
        let quoted = JSONString.quoted(original)
        try JSONScanner.validate(quoted)
        #expect(JSONString.decode(quoted[1..<(quoted.count - 1)]) == original)
    }
}

@Suite("Byte edits")
struct ByteEditsTests {
    /// Removes the marked entries of the top-level container of `json` and returns the result.
    private func remove(_ json: String, _ marked: Set<Int>) throws -> String {
        struct Entries: JSONVisitor {
            var spans: [EntrySpan] = []
            mutating func visit(_ value: JSONValue, at path: JSONPath) {
                if path.count == 1 { spans.append(EntrySpan(value)) }
            }
        }
        var entries = Entries()
        var scanner = JSONScanner(bytes(json))
        try scanner.scan(&entries)
        let edited = ByteEdits.apply(ByteEdits.removals(of: entries.spans) { marked.contains($0) }, to: bytes(json))
        try JSONScanner.validate(edited)
        return text(edited)
    }

    @Test("Removing entries keeps the commas right", arguments: [
        ("[1,2,3]", [0], "[2,3]"),
        ("[1,2,3]", [1], "[1,3]"),
        ("[1,2,3]", [2], "[1,2]"),
        ("[1,2,3]", [0, 1], "[3]"),
        ("[1,2,3]", [0, 2], "[2]"),
        ("[1,2,3]", [0, 1, 2], "[]"),
        ("[ 1 , 2 , 3 ]", [1], "[ 1 , 3 ]"),
        ("[ 1 , 2 , 3 ]", [0], "[ 2 , 3 ]"),
        ("[ 1 , 2 , 3 ]", [0, 1, 2], "[  ]"),
        ("{\"a\": 1, \"b\": {\"x\": [2]}, \"c\": 3}", [1], "{\"a\": 1, \"c\": 3}"),
        ("{\n  \"a\": 1,\n  \"b\": 2\n}", [1], "{\n  \"a\": 1\n}"),
        ("{\n  \"a\": 1,\n  \"b\": 2\n}", [0], "{\n  \"b\": 2\n}"),
        ("[1,2,3,4,5]", [1, 3], "[1,3,5]"),
        ("[1,2,3,4,5]", [0, 2, 4], "[2,4]"),
    ] as [(String, Set<Int>, String)])
    func removesEntries(_ json: String, _ marked: Set<Int>, _ expected: String) throws {
        #expect(try remove(json, marked) == expected)
    }

    @Test func appliesEditsInAnyOrder() {
        let edits = [ByteEdit(range: 4..<5, replacement: bytes("E")), ByteEdit(range: 0..<1, replacement: bytes("AA"))]
        #expect(text(ByteEdits.apply(edits, to: bytes("abcdef"))) == "AAbcdEf")
    }
}
