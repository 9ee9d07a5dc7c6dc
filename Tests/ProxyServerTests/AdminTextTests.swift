import Testing
@testable import ProxyServer

@Suite struct AdminTextTests {
    @Test("RFC 3339 times", arguments: [
        ("1970-01-01T00:00:00Z", Int64(0)),
        ("2026-11-23T01:02:03Z", Int64(1_795_395_723)),
        ("2026-11-23t01:02:03z", Int64(1_795_395_723)),
        ("2026-11-23T02:02:03+01:00", Int64(1_795_395_723)),
        ("2026-11-22T23:32:03-01:30", Int64(1_795_395_723)),
        ("2026-11-23T01:02:03.999Z", Int64(1_795_395_723)),
        ("2000-02-29T12:00:00Z", Int64(951_825_600)),
        ("1969-12-31T23:59:59Z", Int64(-1)),
    ])
    func parsesRFC3339(_ text: String, _ expected: Int64) {
        #expect(RFC3339.parse(text) == expected)
    }

    @Test("not RFC 3339", arguments: ["", "yesterday", "2026-11-23", "2026-11-23T01:02:03", "2026-13-01T00:00:00Z",
                                      "2026-11-23T25:00:00Z", "2026-11-23T01:02:03.Z", "2026-11-23T01:02:03Zjunk",
                                      "2026-11-23T01:02:03+0100"])
    func rejectsOthers(_ text: String) {
        #expect(RFC3339.parse(text) == nil)
    }

    @Test func formatsAndRoundTrips() {
        #expect(RFC3339.format(0) == "1970-01-01T00:00:00Z")
        #expect(RFC3339.format(-1) == "1969-12-31T23:59:59Z")
        for t: Int64 in [951_825_600, 1_795_395_723, 4_102_444_800] {
            #expect(RFC3339.parse(RFC3339.format(t)) == t)
        }
    }

    @Test func queryParametersAreDecoded() {
        let t = AdminTarget("/cache?url=http%3A%2F%2Fexample.com%2Fa%3Fb%3Dc&since=2026-11-23T00%3A00%3A00Z&flag&x=a+b")
        #expect(t.path == "/cache")
        #expect(t.value("url") == "http://example.com/a?b=c")
        #expect(t.value("since") == "2026-11-23T00:00:00Z")
        #expect(t.value("flag") == "")
        #expect(t.value("x") == "a b")
        #expect(t.value("missing") == nil)
        #expect(AdminTarget("/stats").query.isEmpty)
        #expect(AdminTarget("/bad?p=%zz").value("p") == "%zz")
    }
}
