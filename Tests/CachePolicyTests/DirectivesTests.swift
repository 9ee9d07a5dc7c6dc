import Testing
import HTTPWire
import CachePolicy

struct DirectivesRow: Sendable, CustomTestStringConvertible {
    var name: String
    var fields: [String]
    var isRequest: Bool
    var expected: CacheDirectives
    var testDescription: String { name }
}

enum DirectivesTable {
    static func expect(_ build: (inout CacheDirectives) -> Void) -> CacheDirectives {
        var d = CacheDirectives()
        build(&d)
        return d
    }

    static func response(_ name: String, _ fields: [String], _ build: (inout CacheDirectives) -> Void) -> DirectivesRow {
        DirectivesRow(name: name, fields: fields, isRequest: false, expected: expect(build))
    }

    static func request(_ name: String, _ fields: [String], _ build: (inout CacheDirectives) -> Void) -> DirectivesRow {
        DirectivesRow(name: name, fields: fields, isRequest: true, expected: expect(build))
    }

    static let cap: Int64 = 2_147_483_648

    static let rows: [DirectivesRow] = [
        response("RFC9111 5.2 no Cache-Control: nothing set", ["Content-Type: text/plain"]) { _ in },
        response("RFC9111 5.2 empty Cache-Control", ["Cache-Control: "]) { _ in },
        response("RFC9111 5.2.2.1 max-age", ["Cache-Control: max-age=60"]) { $0.maxAge = 60 },
        response("RFC9111 5.2 directive names are case-insensitive", ["Cache-Control: MAX-AGE=60"]) { $0.maxAge = 60 },
        response("RFC9111 5.2 quoted-string argument accepted", ["Cache-Control: max-age=\"60\""]) { $0.maxAge = 60 },
        response("RFC9111 5.2.2.1 max-age=0", ["Cache-Control: max-age=0"]) { $0.maxAge = 0 },
        response("RFC9111 4.2.1 identical duplicate max-age is no conflict", ["Cache-Control: max-age=60, max-age=60"]) {
            $0.maxAge = 60
        },
        response("RFC9111 4.2.1 differing duplicate max-age: smallest kept, conflicting",
                 ["Cache-Control: max-age=120, max-age=60"]) { $0.maxAge = 60; $0.conflictingFreshness = true },
        response("RFC9111 4.2.1 max-age in two Cache-Control fields, differing",
                 ["Cache-Control: max-age=60", "Cache-Control: max-age=30"]) { $0.maxAge = 30; $0.conflictingFreshness = true },
        response("RFC9111 4.2.1 invalid max-age (letters) is stale", ["Cache-Control: max-age=abc"]) {
            $0.maxAge = 0; $0.conflictingFreshness = true
        },
        response("RFC9111 4.2.1 max-age with empty value is stale", ["Cache-Control: max-age="]) {
            $0.maxAge = 0; $0.conflictingFreshness = true
        },
        response("RFC9111 4.2.1 max-age without a value is stale", ["Cache-Control: max-age"]) {
            $0.maxAge = 0; $0.conflictingFreshness = true
        },
        response("RFC9111 1.2.2 negative delta-seconds is invalid", ["Cache-Control: max-age=-1"]) {
            $0.maxAge = 0; $0.conflictingFreshness = true
        },
        response("RFC9111 1.2.2 fractional delta-seconds is invalid", ["Cache-Control: max-age=1.5"]) {
            $0.maxAge = 0; $0.conflictingFreshness = true
        },
        response("RFC9111 1.2.2 delta-seconds beyond 2^31 clamped", ["Cache-Control: max-age=99999999999999999999"]) {
            $0.maxAge = cap
        },
        response("RFC9111 1.2.2 delta-seconds exactly 2^31", ["Cache-Control: max-age=2147483648"]) { $0.maxAge = cap },
        response("RFC9111 1.2.2 delta-seconds just under 2^31", ["Cache-Control: max-age=2147483647"]) {
            $0.maxAge = 2_147_483_647
        },
        response("RFC9111 4.2.1 junk after max-age value is invalid", ["Cache-Control: max-age=60 x"]) {
            $0.maxAge = 0; $0.conflictingFreshness = true
        },
        response("RFC9111 5.2 whitespace around = tolerated", ["Cache-Control: max-age = 60"]) { $0.maxAge = 60 },
        response("RFC9111 5.2.2.10 s-maxage", ["Cache-Control: s-maxage=30"]) { $0.sMaxAge = 30 },
        response("RFC9111 5.2.2.10 s-maxage and max-age both kept", ["Cache-Control: max-age=60, s-maxage=30"]) {
            $0.maxAge = 60; $0.sMaxAge = 30
        },
        response("RFC9111 4.2.1 invalid s-maxage is stale", ["Cache-Control: s-maxage=x"]) {
            $0.sMaxAge = 0; $0.conflictingFreshness = true
        },
        response("RFC9111 4.2.1 differing s-maxage duplicates", ["Cache-Control: s-maxage=10, s-maxage=20"]) {
            $0.sMaxAge = 10; $0.conflictingFreshness = true
        },
        response("RFC9111 5.2.2.4 no-cache", ["Cache-Control: no-cache"]) { $0.noCache = true },
        response("RFC9111 5.2.2.4 qualified no-cache lists fields, lowercased",
                 ["Cache-Control: no-cache=\"Set-Cookie, X-Foo\""]) { $0.noCacheFields = [wire("set-cookie"), wire("x-foo")] },
        response("RFC9111 5.2.2.4 qualified no-cache in token form", ["Cache-Control: no-cache=Set-Cookie"]) {
            $0.noCacheFields = [wire("set-cookie")]
        },
        response("RFC9111 5.2.2.4 no-cache with an empty list is unqualified", ["Cache-Control: no-cache=\"\""]) {
            $0.noCache = true
        },
        response("RFC9111 5.2.2.4 unqualified and qualified no-cache together", ["Cache-Control: no-cache, no-cache=\"a\""]) {
            $0.noCache = true; $0.noCacheFields = [wire("a")]
        },
        response("RFC9111 5.2.2.4 repeated field names listed once", ["Cache-Control: no-cache=\"a, A\", no-cache=a"]) {
            $0.noCacheFields = [wire("a")]
        },
        response("RFC9111 5.2.2.5 no-store", ["Cache-Control: no-store"]) { $0.noStore = true },
        response("RFC9111 5.2.2.5 NO-STORE any case", ["Cache-Control: No-Store"]) { $0.noStore = true },
        response("RFC9111 5.2.2.7 private", ["Cache-Control: private"]) { $0.private = true },
        response("RFC9111 5.2.2.7 qualified private lists fields", ["Cache-Control: private=\"Set-Cookie\""]) {
            $0.privateFields = [wire("set-cookie")]
        },
        response("RFC9111 5.2.2.7 private and qualified private", ["Cache-Control: private, private=\"x\""]) {
            $0.private = true; $0.privateFields = [wire("x")]
        },
        response("RFC9111 5.2 comma inside a quoted argument does not split",
                 ["Cache-Control: private=\"a, b\", max-age=5"]) { $0.privateFields = [wire("a"), wire("b")]; $0.maxAge = 5 },
        response("RFC9111 5.2.2.9 public", ["Cache-Control: public"]) { $0.public = true },
        response("RFC9111 5.2.2.2 must-revalidate", ["Cache-Control: must-revalidate"]) { $0.mustRevalidate = true },
        response("RFC9111 5.2.2.8 proxy-revalidate", ["Cache-Control: proxy-revalidate"]) { $0.proxyRevalidate = true },
        response("RFC9111 5.2.2.3 must-understand with no-store", ["Cache-Control: must-understand, no-store"]) {
            $0.mustUnderstand = true; $0.noStore = true
        },
        response("RFC9111 5.2.2.6 no-transform", ["Cache-Control: no-transform"]) { $0.noTransform = true },
        response("RFC8246 immutable", ["Cache-Control: max-age=10, immutable"]) { $0.maxAge = 10; $0.immutable = true },
        response("RFC5861 stale-while-revalidate and stale-if-error",
                 ["Cache-Control: stale-while-revalidate=30, stale-if-error=600"]) {
            $0.staleWhileRevalidate = 30; $0.staleIfError = 600
        },
        response("RFC5861 invalid stale-while-revalidate ignored", ["Cache-Control: stale-while-revalidate=soon"]) { _ in },
        response("RFC5861 stale-while-revalidate without value ignored", ["Cache-Control: stale-while-revalidate"]) { _ in },
        response("RFC5861 repeated stale-if-error keeps the smallest", ["Cache-Control: stale-if-error=60, stale-if-error=30"]) {
            $0.staleIfError = 30
        },
        response("RFC9111 5.2 unknown directives ignored", ["Cache-Control: foo=bar, community=\"UCI\", max-age=3"]) {
            $0.maxAge = 3
        },
        response("RFC9111 5.2 unknown directive with quoted comma and escaped quote",
                 ["Cache-Control: x=\"a,\\\"b,c\", max-age=9"]) { $0.maxAge = 9 },
        response("RFC9110 5.6.1 empty list elements skipped", ["Cache-Control: , ,max-age=3,, no-store ,"]) {
            $0.maxAge = 3; $0.noStore = true
        },
        response("RFC9110 5.6.1 tabs as whitespace", ["Cache-Control: max-age=3,\tno-store"]) {
            $0.maxAge = 3; $0.noStore = true
        },
        response("RFC9111 5.2 directives from several fields combine", ["Cache-Control: no-store", "cache-control: max-age=5"]) {
            $0.noStore = true; $0.maxAge = 5
        },
        response("RFC9111 5.2 unterminated quoted argument: unqualified, rest swallowed",
                 ["Cache-Control: no-cache=\"abc, max-age=5"]) { $0.noCache = true },
        response("RFC9111 5.2 a longer unknown name is not no-cache", ["Cache-Control: no-cache-please, no-stored"]) { _ in },
        response("RFC9111 5.4 Pragma ignored in responses", ["Pragma: no-cache"]) { _ in },
        request("RFC9111 5.2.1.1 request max-age", ["Cache-Control: max-age=30"]) { $0.maxAge = 30 },
        request("RFC9111 5.2.1.1 request max-age=0", ["Cache-Control: max-age=0"]) { $0.maxAge = 0 },
        request("RFC9111 5.2.1.1 invalid request max-age reads as 0", ["Cache-Control: max-age=x"]) {
            $0.maxAge = 0; $0.conflictingFreshness = true
        },
        request("RFC9111 5.2.1.2 max-stale without value: any staleness", ["Cache-Control: max-stale"]) {
            $0.maxStale = .some(nil)
        },
        request("RFC9111 5.2.1.2 max-stale with value", ["Cache-Control: max-stale=30"]) { $0.maxStale = .some(30) },
        request("RFC9111 5.2.1.2 max-stale quoted value", ["Cache-Control: max-stale=\"30\""]) { $0.maxStale = .some(30) },
        request("RFC9111 5.2.1.2 max-stale with invalid value allows nothing", ["Cache-Control: max-stale=abc"]) { _ in },
        request("RFC9111 5.2.1.2 max-stale twice: the bounded one wins", ["Cache-Control: max-stale, max-stale=10"]) {
            $0.maxStale = .some(10)
        },
        request("RFC9111 5.2.1.2 max-stale bounded then unbounded stays bounded", ["Cache-Control: max-stale=10, max-stale"]) {
            $0.maxStale = .some(10)
        },
        request("RFC9111 5.2.1.2 max-stale twice: the smaller wins", ["Cache-Control: max-stale=50, max-stale=20"]) {
            $0.maxStale = .some(20)
        },
        request("RFC9111 5.2.1.3 min-fresh", ["Cache-Control: min-fresh=20"]) { $0.minFresh = 20 },
        request("RFC9111 5.2.1.3 min-fresh twice: the larger wins", ["Cache-Control: min-fresh=10, min-fresh=20"]) {
            $0.minFresh = 20
        },
        request("RFC9111 5.2.1.3 invalid min-fresh ignored", ["Cache-Control: min-fresh=-3"]) { _ in },
        request("RFC9111 5.2.1.4 request no-cache", ["Cache-Control: no-cache"]) { $0.noCache = true },
        request("RFC9111 5.2.1.4 request no-cache with argument is still no-cache", ["Cache-Control: no-cache=\"x\""]) {
            $0.noCache = true
        },
        request("RFC9111 5.2.1.5 request no-store", ["Cache-Control: no-store"]) { $0.noStore = true },
        request("RFC9111 5.2.1.7 only-if-cached", ["Cache-Control: only-if-cached"]) { $0.onlyIfCached = true },
        request("RFC5861 4 request stale-if-error", ["Cache-Control: stale-if-error=120"]) { $0.staleIfError = 120 },
        request("RFC9111 5.4 Pragma: no-cache without Cache-Control", ["Pragma: no-cache"]) { $0.noCache = true },
        request("RFC9111 5.4 Pragma value case-insensitive", ["Pragma: NO-CACHE"]) { $0.noCache = true },
        request("RFC9111 5.4 Pragma list containing no-cache", ["Pragma: x-foo, no-cache"]) { $0.noCache = true },
        request("RFC9111 5.4 Pragma ignored when Cache-Control is present", ["Pragma: no-cache", "Cache-Control: max-age=100"]) {
            $0.maxAge = 100
        },
        request("RFC9111 5.4 Pragma ignored even beside an empty Cache-Control", ["Cache-Control: ", "Pragma: no-cache"]) { _ in },
        request("RFC9111 5.4 other Pragma values mean nothing", ["Pragma: x-no-cache"]) { _ in },
        request("RFC9111 5.2.1 request private=\"x\" is plain private", ["Cache-Control: private=\"x\""]) { $0.private = true },
    ]
}

@Suite("CacheDirectives")
struct DirectivesTests {
    @Test("parse", arguments: DirectivesTable.rows)
    func parse(_ row: DirectivesRow) {
        let headers = row.isRequest ? request(row.fields).headers : response(row.fields).headers
        #expect(CacheDirectives.parse(headers, isRequest: row.isRequest) == row.expected)
    }

    /// The two lists of field names are values like the rest: set apart, changed apart in a
    /// copy, and directives whose lists were emptied equal ones that never had any.
    @Test func fieldNameListsAreValues() {
        let parsed = CacheDirectives.parse(response(["Cache-Control: no-cache=\"a\", private=\"b, c\""]).headers,
                                           isRequest: false)
        #expect(parsed.noCacheFields == [wire("a")] && parsed.privateFields == [wire("b"), wire("c")])
        var copy = parsed
        copy.privateFields.append(wire("d"))
        copy.noCacheFields = []
        #expect(parsed.noCacheFields == [wire("a")] && parsed.privateFields == [wire("b"), wire("c")])
        #expect(copy.noCacheFields.isEmpty && copy.privateFields == [wire("b"), wire("c"), wire("d")])
        #expect(copy != parsed)
        copy.privateFields = []
        var plain = parsed
        plain.noCacheFields = []
        plain.privateFields = []
        #expect(copy == plain && plain == CacheDirectives())  // naming fields set no other directive
    }
}
