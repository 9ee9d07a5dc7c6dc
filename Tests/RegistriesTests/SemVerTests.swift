import Testing
@testable import Registries

@Suite("SemVer")
struct SemVerTests {
    @Test("Parses", arguments: [
        ("1.2.3", "1.2.3", false),
        ("0.0.0", "0.0.0", false),
        ("10.20.30", "10.20.30", false),
        ("1.0.0-alpha", "1.0.0-alpha", true),
        ("1.0.0-alpha.1", "1.0.0-alpha.1", true),
        ("1.0.0-0.3.7", "1.0.0-0.3.7", true),
        ("1.0.0-x.7.z.92", "1.0.0-x.7.z.92", true),
        ("1.0.0-x-y-z.--", "1.0.0-x-y-z.--", true),
        ("1.0.0+20130313144700", "1.0.0+20130313144700", false),
        ("1.0.0-beta+exp.sha.5114f85", "1.0.0-beta+exp.sha.5114f85", true),
        ("1.0.0+21AF26D3----117B344092BD", "1.0.0+21AF26D3----117B344092BD", false),
        ("1.0.0-rc.1+build.1", "1.0.0-rc.1+build.1", true),
    ])
    func parses(_ text: String, _ description: String, _ isPrerelease: Bool) throws {
        let version = try #require(SemVer(text))
        #expect(version.description == description)
        #expect(version.isPrerelease == isPrerelease)
    }

    @Test("Refuses (SemVer 2.0.0 §2, §9, §10)", arguments: [
        "", "1", "1.2", "1.2.3.4", "v1.2.3", "=1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "1.2.3-01",
        "1.2.3-alpha..1", "1.2.3+", "1.2.3+a..b", "1.2.3-a_b", "1.2.3 ", " 1.2.3", "1.2.-3", "a.b.c",
        "99999999999999999999.0.0", "1.2.3-é",
    ])
    func refuses(_ text: String) {
        #expect(SemVer(text) == nil)
    }

    /// §11's example order, each strictly below the next.
    static let ordered = [
        "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
        "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "1.10.0", "2.0.0-0", "2.0.0-1", "2.0.0-9", "2.0.0-10", "2.0.0-A",
        "2.0.0-a", "2.0.0", "10.0.0",
    ]

    @Test func ordersBySection11() throws {
        let versions = try Self.ordered.map { try #require(SemVer($0)) }
        for (lower, higher) in zip(versions, versions.dropFirst()) {
            #expect(lower < higher, "\(lower) < \(higher)")
            #expect(!(higher < lower), "not \(higher) < \(lower)")
        }
        #expect(versions.shuffled().sorted() == versions)
    }

    @Test func comparesHugeNumericIdentifiersAsNumbers() throws {
        let small = try #require(SemVer("1.0.0-99999999999999999999"))
        let large = try #require(SemVer("1.0.0-100000000000000000000"))
        #expect(small < large)
    }

    @Test func ignoresBuildMetadataForPrecedence() throws {
        let a = try #require(SemVer("1.0.0+a"))
        let b = try #require(SemVer("1.0.0+b"))
        #expect(a.hasSamePrecedence(as: b) && !(a < b) && !(b < a) && a != b)
    }
}
