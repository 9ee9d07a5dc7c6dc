import CachePolicy
import Testing

/// RFC 8941 §4.2.2 dictionaries, as targeted cache-control fields are read: nil for any parsing error.
@Suite struct StructuredDictionaryTests {
    typealias Item = StructuredDictionary.Item

    static let valid: [(String, [(String, Item)])] = [
        ("", []),
        ("max-age=60", [("max-age", .integer(60))]),
        ("a, b=?0, c=?1", [("a", .boolean(true)), ("b", .boolean(false)), ("c", .boolean(true))]),
        ("a=1,b=2", [("a", .integer(1)), ("b", .integer(2))]),
        ("a=1 ,\tb=2", [("a", .integer(1)), ("b", .integer(2))]),
        ("  a=1", [("a", .integer(1))]),
        ("a=-7, b=1.5, c=-0.125", [("a", .integer(-7)), ("b", .decimal(1.5)), ("c", .decimal(-0.125))]),
        ("s=\"x \\\"y\\\" \\\\z\"", [("s", .string(Array("x \"y\" \\z".utf8)))]),
        ("t=foo/bar:1", [("t", .token(Array("foo/bar:1".utf8)))]),
        ("b=:aGVsbG8=:", [("b", .bytes(Array("aGVsbG8=".utf8)))]),
        ("l=(\"a\" \"b\");p=1, e=()", [("l", .innerList([.string([0x61]), .string([0x62])])), ("e", .innerList([]))]),
        ("a;x=1;y, b=2;z=\"q\"", [("a", .boolean(true)), ("b", .integer(2))]),
        ("a=1, a=2, b=3", [("a", .integer(2)), ("b", .integer(3))]),
        ("*x.y_z-1=1", [("*x.y_z-1", .integer(1))]),
        ("n=999999999999999", [("n", .integer(999_999_999_999_999))]),
    ]

    @Test(arguments: valid.indices) func parses(_ i: Int) throws {
        let (text, expected) = Self.valid[i]
        let got = try #require(StructuredDictionary.parse(Array(text.utf8)), "\(text)")
        #expect(got.map { String(decoding: $0.key, as: UTF8.self) } == expected.map(\.0), "\(text)")
        #expect(got.map(\.value) == expected.map(\.1), "\(text)")
    }

    @Test func manyMembersWithRepeatedKeysKeepTheirFirstPlacesAndLastValues() throws {
        // 20,000 members, each key four times (the parser finds repeats by a table, not a scan).
        let text = (0..<20_000).map { "k\($0 % 5_000)=\($0)" }.joined(separator: ", ")
        let got = try #require(StructuredDictionary.parse(Array(text.utf8)))
        #expect(got.count == 5_000 && got[0].value == .integer(15_000))
    }

    @Test(arguments: [
        "Max-Age=1", "max-age =1", "max-age= 1", "a=1,", "a=1,,b=2", "a=1 b=2", "1a=1", "a=\"unterminated",
        "a=\"bad \\q escape\"", "a=\"ctl \u{1}\"", "a=1.2345", "a=1234567890123.5", "a=9999999999999999", "a=-",
        "a=?2", "a=(1 2", "a=(1,2)", "a=:not base64!:", "a=@", "a;=1", "a;X=1", "a=1;b=", "a=1\u{0}",
    ]) func refuses(_ text: String) {
        #expect(StructuredDictionary.parse(Array(text.utf8)) == nil, "\(text)")
    }
}
