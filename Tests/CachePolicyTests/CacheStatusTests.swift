import Testing
import CachePolicy

struct CacheStatusRow: Sendable, CustomTestStringConvertible {
    var name: String
    var status: CacheStatus
    var cacheName: String
    var expected: String
    var testDescription: String { name }
}

enum CacheStatusTable {
    static func row(_ name: String, _ status: CacheStatus, cacheName: String = "Larder", _ expected: String) -> CacheStatusRow {
        CacheStatusRow(name: name, status: status, cacheName: cacheName, expected: expected)
    }

    static let rows: [CacheStatusRow] = [
        row("RFC9211 2 nothing to say: the cache name alone", CacheStatus(), "Larder"),
        row("RFC9211 2.1 hit with ttl", CacheStatus(hit: true, ttl: 42), "Larder; hit; ttl=42"),
        row("RFC9211 2.2 fwd=uri-miss, fwd-status, stored",
            CacheStatus(forward: .uriMiss, forwardStatus: 200, stored: true), "Larder; fwd=uri-miss; fwd-status=200; stored"),
        row("RFC9211 2.2 fwd=vary-miss", CacheStatus(forward: .varyMiss), "Larder; fwd=vary-miss"),
        row("RFC9211 2.2 fwd=bypass", CacheStatus(forward: .bypass), "Larder; fwd=bypass"),
        row("RFC9211 2.2 fwd=method", CacheStatus(forward: .method), "Larder; fwd=method"),
        row("RFC9211 2.2 fwd=miss", CacheStatus(forward: .miss), "Larder; fwd=miss"),
        row("RFC9211 2.2 fwd=request", CacheStatus(forward: .request), "Larder; fwd=request"),
        row("RFC9211 2.2 fwd=partial", CacheStatus(forward: .partial), "Larder; fwd=partial"),
        row("RFC9211 2.2 fwd=stale revalidated with HEAD",
            CacheStatus(forward: .stale, forwardStatus: 304, stored: true, detail: "revalidated-head"),
            "Larder; fwd=stale; fwd-status=304; stored; detail=revalidated-head"),
        row("RFC9211 2.5 collapsed", CacheStatus(forward: .uriMiss, forwardStatus: 200, collapsed: true),
            "Larder; fwd=uri-miss; fwd-status=200; collapsed"),
        row("RFC9211 2.6 negative ttl when stale", CacheStatus(hit: true, ttl: -5, detail: "stale-if-error"),
            "Larder; hit; ttl=-5; detail=stale-if-error"),
        row("RFC9211 2.6 ttl zero", CacheStatus(hit: true, ttl: 0), "Larder; hit; ttl=0"),
        row("RFC9211 2 every parameter, in order",
            CacheStatus(hit: true, forward: .stale, forwardStatus: 503, stored: true, collapsed: true, ttl: 7, detail: "x"),
            "Larder; hit; fwd=stale; fwd-status=503; stored; collapsed; ttl=7; detail=x"),
        row("RFC9211 2.8 detail token", CacheStatus(forward: .bypass, detail: "no-store"), "Larder; fwd=bypass; detail=no-store"),
        row("RFC9211 2.8 detail token with / and :", CacheStatus(detail: "a/b:c"), "Larder; detail=a/b:c"),
        row("RFC8941 3.3.4 detail starting with a digit is a string", CacheStatus(detail: "304x"),
            "Larder; detail=\"304x\""),
        row("RFC8941 3.3.3 detail with a space is a string", CacheStatus(detail: "not stored"),
            "Larder; detail=\"not stored\""),
        row("RFC8941 3.3.3 quote and backslash escaped", CacheStatus(detail: "say \"hi\" \\o/"),
            "Larder; detail=\"say \\\"hi\\\" \\\\o/\""),
        row("RFC8941 3.3.3 non-ASCII dropped from strings", CacheStatus(detail: "caf\u{E9} ok"),
            "Larder; detail=\"caf ok\""),
        row("RFC8941 3.3.3 empty detail is an empty string", CacheStatus(detail: ""), "Larder; detail=\"\""),
        row("RFC9211 2 cache name as a token", CacheStatus(hit: true), cacheName: "proxy.example.net",
            "proxy.example.net; hit"),
        row("RFC9211 2 cache name that is not a token", CacheStatus(hit: true), cacheName: "My Cache",
            "\"My Cache\"; hit"),
        row("RFC9211 2 cache name from via_name, lowercase", CacheStatus(hit: true), cacheName: "larder", "larder; hit"),
        row("RFC9211 2 cache name starting with a digit is a string", CacheStatus(hit: true), cacheName: "10.0.0.7",
            "\"10.0.0.7\"; hit"),
        row("RFC8941 3.3.3 cache name with a quote escaped", CacheStatus(hit: true), cacheName: "a\"b",
            "\"a\\\"b\"; hit"),
        row("RFC9211 2 an answer made locally: no fwd, a detail", CacheStatus(detail: "denied"), cacheName: "edge-7",
            "edge-7; detail=denied"),
        row("RFC9211 2.2 an origin error after forwarding", CacheStatus(forward: .uriMiss, detail: "origin-error"),
            cacheName: "edge-7", "edge-7; fwd=uri-miss; detail=origin-error"),
        row("RFC9211 2.2 fwd-status without fwd still written", CacheStatus(forwardStatus: 502), "Larder; fwd-status=502"),
        row("RFC8941 3.3.1 large ttl", CacheStatus(hit: true, ttl: 2_147_483_648), "Larder; hit; ttl=2147483648"),
    ]
}

@Suite("CacheStatus")
struct CacheStatusTests {
    @Test("serialized", arguments: CacheStatusTable.rows)
    func serialized(_ row: CacheStatusRow) {
        #expect(text(row.status.serialized(cacheName: CacheName(row.cacheName))) == row.expected)
    }

    @Test("RFC9211 2.8 a response not stored names its reason as the detail", arguments: NotStoredReason.allCases)
    func notStoredDetail(_ reason: NotStoredReason) {
        #expect(reason.detail.description == reason.rawValue)
        #expect(text(CacheStatus(forward: .bypass, detail: reason.detail).serialized(cacheName: CacheName("c")))
                == "c; fwd=bypass; detail=\(reason.rawValue)")
    }

    @Test("RFC9211 2.8 details compare by their text")
    func detailEquality() {
        #expect(CacheStatus(detail: "stale") == CacheStatus(detail: "stale"))
        #expect(CacheStatus(detail: "stale") != CacheStatus(detail: "stale-if-error"))
        #expect(CacheStatus(detail: "x") != CacheStatus())
    }

    @Test("RFC9211 2 the name is serialized once, as it will be written")
    func nameBytes() {
        #expect(text(CacheName("edge-7").serialized) == "edge-7")
        #expect(text(CacheName("two words").serialized) == "\"two words\"")
    }
}
