import CachePolicy
import HTTPWire
import Testing

/// Which POST answers are stored for their target (`PostReuse`, RFC 9110 §9.3.3).
@Suite struct PostReuseTests {
    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var status = 200
        var fields: [String]
        var reusable: Bool
        var testDescription: String { name }
    }

    static let target = wire("http://example.com/form?x=1")

    static let rows: [Row] = [
        Row(name: "max-age and the target's path", fields: ["Cache-Control: max-age=60", "Content-Location: /form?x=1"],
            reusable: true),
        Row(name: "the target as an absolute URI", fields: ["Cache-Control: max-age=60",
                                                            "Content-Location: http://example.com/form?x=1"], reusable: true),
        Row(name: "an empty reference is the target", fields: ["Cache-Control: max-age=60", "Content-Location: "], reusable: true),
        Row(name: "Expires is explicit freshness", fields: ["Expires: \(Dates.plus3600)", "Content-Location: /form?x=1"],
            reusable: true),
        Row(name: "s-maxage", fields: ["Cache-Control: s-maxage=60", "Content-Location: /form?x=1"], reusable: true),
        Row(name: "203", status: 203, fields: ["Cache-Control: max-age=60", "Content-Location: /form?x=1"], reusable: true),
        Row(name: "no explicit freshness", fields: ["ETag: \"a\"", "Content-Location: /form?x=1"], reusable: false),
        Row(name: "no Content-Location", fields: ["Cache-Control: max-age=60"], reusable: false),
        Row(name: "another path", fields: ["Cache-Control: max-age=60", "Content-Location: /other"], reusable: false),
        Row(name: "another query", fields: ["Cache-Control: max-age=60", "Content-Location: /form?x=2"], reusable: false),
        Row(name: "another host", fields: ["Cache-Control: max-age=60", "Content-Location: http://evil.example/form?x=1"],
            reusable: false),
        Row(name: "another scheme", fields: ["Cache-Control: max-age=60", "Content-Location: https://example.com/form?x=1"],
            reusable: false),
        Row(name: "two fields", fields: ["Cache-Control: max-age=60", "Content-Location: /form?x=1",
                                         "Content-Location: /form?x=1"], reusable: false),
        Row(name: "201", status: 201, fields: ["Cache-Control: max-age=60", "Content-Location: /form?x=1"], reusable: false),
        Row(name: "a redirect", status: 303, fields: ["Cache-Control: max-age=60", "Content-Location: /form?x=1"],
            reusable: false),
    ]

    @Test(arguments: rows) func reusable(_ row: Row) {
        #expect(PostReuse.reusable(response: response(row.fields, status: row.status), targetKey: Self.target)
                == row.reusable)
    }

    @Test func aReusablePostIsJudgedAsAGetWouldBe() {
        let post = request(["Content-Length: 0"], method: "POST")
        let answer = response(["Cache-Control: max-age=60", "Content-Location: /"])
        #expect(Storability.decide(request: post, response: answer, storagePolicy: .allowed, settings: PolicySettings())
                == .doNotStore(.method))
        #expect(Storability.decide(request: post, response: answer, storagePolicy: .allowed, settings: PolicySettings(),
                                   reusablePost: true) == .store(tier: .allowed, omitFields: []))
        let privateAnswer = response(["Cache-Control: max-age=60, private", "Content-Location: /"])
        #expect(Storability.decide(request: post, response: privateAnswer, storagePolicy: .allowed,
                                   settings: PolicySettings(), reusablePost: true) == .doNotStore(.privateResponse))
        let put = request(["Content-Length: 0"], method: "PUT")
        #expect(Storability.decide(request: put, response: answer, storagePolicy: .allowed, settings: PolicySettings(),
                                   reusablePost: true) == .doNotStore(.method))
    }
}
