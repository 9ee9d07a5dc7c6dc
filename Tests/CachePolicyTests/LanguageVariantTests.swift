import CachePolicy
import HTTPWire
import Testing

/// Variants chosen by language (`LanguageVariant`): the key a response is stored under, and the keys a
/// request that missed its own looks for.
@Suite struct LanguageVariantTests {
    static let vary = [wire("accept-language")]

    struct StoreRow: CustomTestStringConvertible, Sendable {
        var name: String
        var request: [String]
        var response: [String]
        var vary = LanguageVariantTests.vary
        /// The language keyed, or nil for the request's own key.
        var language: String?
        var testDescription: String { name }
    }

    static let storeRows: [StoreRow] = [
        StoreRow(name: "the one language ranked highest", request: ["Accept-Language: de"],
                 response: ["Content-Language: de"], language: "de"),
        StoreRow(name: "one of two tied at the top, case folded", request: ["Accept-Language: en, DE"],
                 response: ["Content-Language: De"], language: "de"),
        StoreRow(name: "ranked below another", request: ["Accept-Language: fr, de;q=0.9"],
                 response: ["Content-Language: de"], language: nil),
        StoreRow(name: "not asked for at all", request: ["Accept-Language: fr"], response: ["Content-Language: de"],
                 language: nil),
        StoreRow(name: "a range that only matches a prefix", request: ["Accept-Language: de"],
                 response: ["Content-Language: de-CH"], language: nil),
        StoreRow(name: "no Accept-Language", request: [], response: ["Content-Language: de"], language: nil),
        StoreRow(name: "only *", request: ["Accept-Language: *"], response: ["Content-Language: de"], language: nil),
        StoreRow(name: "* anywhere", request: ["Accept-Language: de, *;q=0.1"], response: ["Content-Language: de"],
                 language: nil),
        StoreRow(name: "a malformed element (bytes a client chose)",
                 request: ["Accept-Language: en, <script>x</script>"], response: ["Content-Language: en"], language: nil),
        StoreRow(name: "a malformed weight", request: ["Accept-Language: fr;q=1.0001, en;q=0.2"],
                 response: ["Content-Language: en"], language: nil),
        StoreRow(name: "another parameter", request: ["Accept-Language: fr;q=0.9;x=1, en"],
                 response: ["Content-Language: en"], language: nil),
        StoreRow(name: "q=0 refuses", request: ["Accept-Language: de;q=0"], response: ["Content-Language: de"],
                 language: nil),
        StoreRow(name: "two languages in the answer", request: ["Accept-Language: de, en"],
                 response: ["Content-Language: de, en"], language: nil),
        StoreRow(name: "two Content-Language fields", request: ["Accept-Language: de"],
                 response: ["Content-Language: de", "Content-Language: de"], language: nil),
        StoreRow(name: "no Content-Language", request: ["Accept-Language: de"], response: [], language: nil),
        StoreRow(name: "Vary names another field too", request: ["Accept-Language: de"], response: ["Content-Language: de"],
                 vary: [wire("accept-language"), wire("accept-encoding")], language: nil),
        StoreRow(name: "more elements than taken part", request: ["Accept-Language: de, " + (1...32).map { "x\($0);q=0.1" }.joined(separator: ", ")],
                 response: ["Content-Language: de"], language: nil),
    ]

    @Test(arguments: storeRows) func storedKeys(_ row: StoreRow) {
        let key = LanguageVariant.storedKey(varyFields: row.vary, request: request(row.request).headers,
                                            response: response(row.response).headers)
        #expect(key.map(text) == row.language.map { "accept-language\u{0}\u{1}=\($0)\u{0}" })
    }

    struct LookupRow: CustomTestStringConvertible, Sendable {
        var name: String
        var value: String?
        var languages: [String]
        var testDescription: String { name }
    }

    static let lookupRows: [LookupRow] = [
        LookupRow(name: "q decides, not order", value: "fr;q=0.5, de;q=1.0", languages: ["de"]),
        LookupRow(name: "ties in the order sent", value: "en, de", languages: ["en", "de"]),
        LookupRow(name: "at most four", value: "a, b, c, d, e", languages: ["a", "b", "c", "d"]),
        LookupRow(name: "thousandths", value: "fr;q=0.501, de;q=0.5", languages: ["fr"]),
        LookupRow(name: "spaces around = make a weight malformed", value: " EN-gb ; Q = 1 , en ;q=0.9", languages: []),
        LookupRow(name: "q in upper case, case folded", value: "EN-gb;Q=1, en;q=0.9", languages: ["en-gb"]),
        LookupRow(name: "a malformed weight", value: "fr;q=2, de;q=0.8", languages: []),
        LookupRow(name: "*", value: "*, de;q=0.5", languages: []),
        LookupRow(name: "a repeat is one language", value: "de, de", languages: ["de"]),
        LookupRow(name: "q=0 left out", value: "fr;q=0, de;q=0.1", languages: ["de"]),
        LookupRow(name: "32 elements", value: "de, " + (1...31).map { "x\($0);q=0.1" }.joined(separator: ", "), languages: ["de"]),
        LookupRow(name: "33 elements", value: "de, " + (1...32).map { "x\($0);q=0.1" }.joined(separator: ", "), languages: []),
        LookupRow(name: "absent", value: nil, languages: []),
    ]

    @Test(arguments: lookupRows) func lookupKeys(_ row: LookupRow) {
        let head = request(row.value.map { ["Accept-Language: \($0)"] } ?? [])
        #expect(LanguageVariant.lookupKeys(request: head.headers).map(text)
                == row.languages.map { "accept-language\u{0}\u{1}=\($0)\u{0}" })
    }

    @Test func aLanguageKeyNeverEqualsARequestsOwnKey() {
        let own = CacheKey.secondary(varyFields: Self.vary, request: request(["Accept-Language: de"]).headers)
        let absent = CacheKey.secondary(varyFields: Self.vary, request: request([]).headers)
        let language = LanguageVariant.lookupKeys(request: request(["Accept-Language: de"]).headers)
        #expect(language.count == 1 && !language.contains(own) && !language.contains(absent))
    }
}
