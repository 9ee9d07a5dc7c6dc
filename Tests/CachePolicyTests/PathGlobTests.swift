import Testing
import CachePolicy

extension PathGlob: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { try! self.init(parsing: value) }
}

struct GlobRow: Sendable, CustomTestStringConvertible {
    var pattern: String
    var path: String
    var matches: Bool
    var testDescription: String { "\(pattern) \(matches ? "matches" : "does not match") \(path)" }
}

enum GlobTable {
    static func yes(_ pattern: String, _ path: String) -> GlobRow { GlobRow(pattern: pattern, path: path, matches: true) }
    static func no(_ pattern: String, _ path: String) -> GlobRow { GlobRow(pattern: pattern, path: path, matches: false) }

    static let rows: [GlobRow] = [
        // Literal patterns match the whole path, byte for byte.
        yes("/a/b", "/a/b"),
        no("/a/b", "/a/b/"),
        no("/a/b", "/a"),
        no("/a/b", "/A/b"),
        no("/a/b", "/a/bc"),
        yes("/", "/"),
        // * stays within a segment, matches the empty run too.
        yes("/-/*.tgz", "/-/a.tgz"),
        yes("/-/*.tgz", "/-/.tgz"),
        no("/-/*.tgz", "/-/a/b.tgz"),
        no("/-/*.tgz", "/-/a.tgz.sig"),
        yes("/*/*", "/a/b"),
        no("/*/*", "/a/b/c"),
        yes("/a*b*c", "/aXXbYYc"),
        yes("/a*b*c", "/abc"),
        no("/a*b*c", "/aXc"),
        // The literal start and end may overlap in a short path: the whole pattern still decides.
        no("/ab*ab", "/ab"),
        no("/ab*ab", "/aba"),
        yes("/ab*ab", "/abab"),
        yes("/ab*ab", "/abXab"),
        no("/x**", "/"),
        // ** crosses segments, matches the empty run too.
        yes("**/pool/**.deb", "/debian/pool/main/h/hello/hello_2.10_amd64.deb"),
        yes("**/pool/**.deb", "/pool/x.deb"),
        yes("**/pool/**.deb", "/a/b/c/pool/.deb"),
        no("**/pool/**.deb", "/debian/pools/x.deb"),
        no("**/pool/**.deb", "/debian/pool/x.deb.asc"),
        no("**/pool/**.deb", "/debian/dists/x.deb"),
        yes("**/dists/**/by-hash/**", "/debian/dists/stable/main/binary-amd64/by-hash/SHA256/ab12"),
        yes("**", "/anything/at/all"),
        yes("/**", "/"),
        yes("**/@v/*.zip", "/golang.org/x/text/@v/v0.3.0.zip"),
        no("**/@v/*.zip", "/golang.org/x/text/@v/sub/v0.3.0.zip"),
        yes("**-SNAPSHOT/**", "/maven2/org/x/y/1.0-SNAPSHOT/y-1.0-20240101.jar"),
        yes("**/*/*/*/*-*.jar", "/maven2/org/example/lib/1.0/lib-1.0.jar"),
        no("**/*/*/*/*-*.jar", "/lib/1.0/lib-1.0.jar"),
        yes("/v2/**/blobs/sha256:*", "/v2/library/alpine/blobs/sha256:0123abcd"),
        no("/v2/**/blobs/sha256:*", "/v2/library/alpine/blobs/sha256:0123/x"),
        // The query takes no part; a fragment never reaches the match.
        yes("**.whl", "/packages/a/b.whl?download=1"),
        no("**.whl", "/packages/a/b?x=.whl"),
        yes("/a", "/a?"),
        // Bytes beyond ASCII are compared as they are.
        yes("/caf\u{e9}/*", "/caf\u{e9}/x"),
        no("/caf\u{e9}/*", "/cafe/x"),
        // Hostile paths: long runs against many wildcards still answer (no backtracking blow-up).
        no("**a**a**a**a**a**a**a**a**b", "/" + String(repeating: "a", count: 8_000)),
        yes("**a**a**a**a**a**a**a**a**b", "/" + String(repeating: "a", count: 8_000) + "b"),
        no("/*a*a*a*a*a*a*a*a*b", "/" + String(repeating: "a", count: 8_000)),
        no("/a", ""),
        yes("**", ""),
    ]

    static let refused: [(String, String)] = [
        ("", "is empty"),
        ("pool/*.deb", "must start with / or *"),
        ("/a/***", "holds ***"),
        ("/a?b", "holds ?"),
        ("/a#b", "holds #"),
        ("/a b", "space or control"),
        ("/a\tb", "space or control"),
        ("/" + String(repeating: "x", count: 600), "longer than"),
    ]
}

@Suite("PathGlob")
struct PathGlobTests {
    @Test("matching", arguments: GlobTable.rows)
    func matching(_ row: GlobRow) throws {
        let glob = try PathGlob(parsing: row.pattern)
        #expect(glob.matches(row.path) == row.matches)
        #expect(glob.description == row.pattern)
    }

    @Test("refused patterns", arguments: GlobTable.refused.map { "\($0.0)\u{0}\($0.1)" })
    func refused(_ packed: String) {
        let parts = packed.split(separator: "\u{0}", omittingEmptySubsequences: false).map(String.init)
        #expect {
            _ = try PathGlob(parsing: parts[0])
        } throws: { error in
            "\(error)".contains(parts[1])
        }
    }

    @Test("a path pattern in a rule")
    func inRules() {
        let rules = CacheRules([
            CacheRule(path: "**/dists/**/Release.gpg", storagePolicy: .notAllowed),
            CacheRule(path: "**/pool/**.deb", statuses: [200], freshness: FreshnessOverride(forcedLifetime: 86_400)),
            CacheRule(pathPrefix: "/debian/", path: "**/dists/**", freshness: FreshnessOverride(maximumLifetime: 300)),
        ])
        func storage(_ path: String, status: Int = 200) -> (StoragePolicy, FreshnessOverride?) {
            Array(path.utf8).withUnsafeBytes {
                let r = rules.storage(scheme: "http", host: Array("mirror.test".utf8), path: $0, status: status, contentType: nil)
                return (r.policy, r.freshness)
            }
        }
        #expect(storage("/debian/dists/stable/Release.gpg").0 == .notAllowed)
        #expect(storage("/debian/dists/stable/Release.gpg").1 == FreshnessOverride(maximumLifetime: 300))
        #expect(storage("/debian/pool/main/x.deb").1 == FreshnessOverride(forcedLifetime: 86_400))
        #expect(storage("/debian/pool/main/x.deb", status: 404).1 == nil)
        #expect(storage("/ubuntu/dists/stable/Release").1 == nil)  // the prefix must match too
        #expect(storage("/debian/dists/stable/InRelease").1 == FreshnessOverride(maximumLifetime: 300))
    }
}
