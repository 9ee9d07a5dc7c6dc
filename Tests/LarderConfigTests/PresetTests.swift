import Testing
import Foundation
import CachePolicy
@testable import LarderConfig

/// The shipped presets: the files in `Config/presets/` are what the binary carries, each parses,
/// and `cache.presets` adds their rules after the user's own.
@Suite struct PresetTests {
    static let directory = repositoryRoot + "/Config/presets"

    /// The embedded copy is the files, byte for byte (regenerate with `scripts/embed-presets.py`).
    @Test func embeddedCopyEqualsTheFiles() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory)
            .filter { $0.hasSuffix(".yaml") }.map { String($0.dropLast(5)) }
        #expect(Set(files) == Set(Presets.names), "run scripts/embed-presets.py")
        for file in PresetFiles.all {
            let text = try #require(ConfigLoader.readFile(Self.directory + "/\(file.name).yaml"))
            #expect(text == file.text,
                    "Config/presets/\(file.name).yaml differs from the embedded copy: run scripts/embed-presets.py")
        }
    }

    @Test(arguments: PresetFiles.all.map(\.name)) func parses(_ name: String) throws {
        let file = try #require(PresetFiles.all.first { $0.name == name })
        let preset = try Presets.parse(name: name, text: file.text)
        #expect(!preset.rules.isEmpty && !preset.description.contains("\n"))
        // Presets name no host where registries are mirrored: only index rules of registries
        // whose documents have no path shape of their own do.
        for rule in preset.rules where rule.host != nil {
            #expect(rule.forcedLifetime == nil, "\(name): a host-bound rule keeps something for long")
        }
        // Long lifetimes are only ever given to successful answers.
        for rule in preset.rules where rule.forcedLifetime != nil {
            #expect(rule.statuses == [200], "\(name): forced freshness for other statuses")
        }
    }

    @Test func listedInTheIssuesOrder() {
        #expect(Presets.names == ["debian", "pypi", "npm", "crates", "go", "maven", "rubygems", "docker"])
    }

    @Test func usersRulesComeFirstThenPresetsInTheListedOrder() throws {
        let c = try ConfigLoader.load(yaml: """
        cache:
          presets: [pypi, debian]
          rules:
            - {path: "**.deb", storage: not-allowed}
        """)
        let rules = c.cache.effectiveRules
        let pypi = try #require(Presets.named("pypi")).rules
        let debian = try #require(Presets.named("debian")).rules
        #expect(rules == c.cache.rules + pypi + debian)
        #expect(rules.first?.path?.description == "**.deb")
    }

    @Test func environmentListsPresets() throws {
        var c = Config()
        try ConfigLoader.applyEnvironment(["LARDER_CACHE_PRESETS": "debian, go"], to: &c)
        #expect(c.cache.presets == ["debian", "go"])
    }

    @Test func presetFileProblemsAreReported() {
        #expect(throws: ValueError.self) { try Presets.parse(name: "x", text: "rules: []\n") }
        #expect(throws: ValueError.self) { try Presets.parse(name: "x", text: "description: d\n") }
        #expect(throws: ValueError.self) {
            try Presets.parse(name: "x", text: "description: d\ncolour: red\nrules:\n  - {storage: not-allowed}\n")
        }
        #expect(throws: ValueError.self) {
            try Presets.parse(name: "x", text: "description: d\nrules:\n  - {path: \"a\", storage: not-allowed}\n")
        }
    }

    /// What each preset matches, on the paths the registries use.
    @Test func presetsMatchTheirRegistriesPaths() throws {
        func lifetime(_ preset: String, _ path: String, status: Int = 200) throws -> (StoragePolicy, FreshnessOverride?) {
            let rules = try #require(Presets.named(preset)).rules.map { r in
                CacheRule(scheme: r.scheme?.name, host: r.host, pathPrefix: r.pathPrefix, path: r.path, statuses: r.statuses,
                          storagePolicy: r.storage.map { $0 },
                          freshness: (r.forcedLifetime ?? r.maximumLifetime ?? r.defaultLifetime) == nil ? nil
                            : FreshnessOverride(forcedLifetime: r.forcedLifetime.map { Int64($0) },
                                                maximumLifetime: r.maximumLifetime.map { Int64($0) },
                                                defaultLifetime: r.defaultLifetime.map { Int64($0) }))
            }
            return Array(path.utf8).withUnsafeBytes {
                let r = CacheRules(rules).storage(scheme: "https", host: Array("registry.npmjs.org".utf8), path: $0,
                                                  status: status, contentType: nil)
                return (r.policy, r.freshness)
            }
        }
        let year = FreshnessOverride(forcedLifetime: 365 * 86_400)
        let short = FreshnessOverride(maximumLifetime: 300, defaultLifetime: 300)
        let cases: [(String, String, StoragePolicy, FreshnessOverride?)] = [
            ("debian", "/debian/pool/main/h/hello/hello_2.10-3_amd64.deb", .allowed, year),
            ("debian", "/ubuntu/dists/noble/InRelease", .allowed, short),
            ("debian", "/debian/dists/bookworm/main/binary-amd64/Packages.xz", .allowed, short),
            ("debian", "/debian/dists/bookworm/main/binary-amd64/by-hash/SHA256/0a1b", .allowed, year),
            ("debian", "/debian/dists/bookworm/Release.gpg", .notAllowed, short),
            ("debian", "/debian/pool/main/h/hello/hello_2.10.orig.tar.gz", .allowed, year),
            ("pypi", "/packages/3f/a1/0123/requests-2.31.0-py3-none-any.whl", .allowed, year),
            ("pypi", "/packages/3f/a1/0123/requests-2.31.0-py3-none-any.whl.metadata", .allowed, year),
            ("pypi", "/simple/requests/", .allowed, short),
            ("pypi", "/pypi/requests/json", .allowed, short),
            ("npm", "/lodash/-/lodash-4.17.21.tgz", .allowed, year),
            ("npm", "/@types/node/-/node-20.1.0.tgz", .allowed, year),
            ("npm", "/lodash", .allowed, short),
            ("npm", "/-/v1/login", .notAllowed, short),
            ("crates", "/crates/serde/serde-1.0.190.crate", .allowed, year),
            ("crates", "/api/v1/me", .notAllowed, nil),
            ("go", "/golang.org/x/text/@v/v0.14.0.zip", .allowed, year),
            ("go", "/golang.org/x/text/@v/v0.14.0.mod", .allowed, year),
            ("go", "/golang.org/x/text/@v/list", .allowed, short),
            ("go", "/golang.org/x/text/@latest", .allowed, short),
            ("maven", "/maven2/org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9.jar", .allowed, year),
            ("maven", "/maven2/org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9.pom.sha1", .allowed, year),
            ("maven", "/maven2/org/slf4j/slf4j-api/maven-metadata.xml", .allowed, short),
            ("maven", "/maven2/org/x/y/1.0-SNAPSHOT/y-1.0-20240101.120000-1.jar", .allowed, short),
            ("rubygems", "/gems/rake-13.1.0.gem", .allowed, year),
            ("rubygems", "/info/rake", .allowed, short),
            ("rubygems", "/api/v1/api_key.json", .notAllowed, nil),
            ("docker", "/v2/library/alpine/blobs/sha256:0123abcd", .allowed, year),
            ("docker", "/v2/library/alpine/manifests/sha256:0123abcd", .allowed, year),
            ("docker", "/v2/library/alpine/manifests/3.19", .allowed, short),
            ("docker", "/v2/", .notAllowed, nil),
        ]
        for (preset, path, policy, freshness) in cases {
            let got = try lifetime(preset, path)
            #expect(got.0 == policy && got.1 == freshness, "\(preset) \(path): \(got)")
        }
        // Not found is never kept for long.
        #expect(try lifetime("debian", "/debian/pool/main/h/hello/hello_9_all.deb", status: 404).1 == nil)
        #expect(try lifetime("go", "/golang.org/x/text/@v/v9.zip", status: 410).1 == nil)
    }
}
