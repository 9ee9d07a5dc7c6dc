import Testing
@testable import LarderConfig

/// `mirrors`: built-in names, mappings that override them, and what the parser refuses.
@Suite struct MirrorConfigTests {
    static func parse(_ yaml: String) throws -> Config {
        try ConfigLoader.parse(yaml: yaml, fileName: "mirrors.yaml")
    }

    static func error(_ yaml: String) -> String {
        do {
            _ = try parse(yaml)
            return "accepted"
        } catch {
            return "\(error)"
        }
    }

    @Test func builtInNamesGiveThePublicRegistries() throws {
        let config = try Self.parse("mirrors: [debian, pypi, npm, crates, go, maven, rubygems]\n")
        let described = config.mirrors.map { "\($0.path) \($0.upstream)" + $0.also.map { " \($0.subpath) \($0.upstream)" }.joined() }
        #expect(described == [
            "/debian/ https://deb.debian.org/debian/",
            "/pypi/ https://pypi.org/ files/ https://files.pythonhosted.org/",
            "/npm/ https://registry.npmjs.org/",
            "/crates/ https://index.crates.io/ dl/ https://static.crates.io/crates/",
            "/go/ https://proxy.golang.org/",
            "/maven/ https://repo.maven.apache.org/maven2/",
            "/rubygems/ https://rubygems.org/",
        ])
        // Each turns its preset on, after the listed ones and once.
        let withPresets = try Self.parse("mirrors: [pypi, debian]\ncache:\n  presets: [debian, npm]\n")
        #expect(withPresets.presetsInForce == ["debian", "npm", "pypi"])
    }

    @Test func aMappingOverridesABuiltIn() throws {
        let config = try Self.parse("""
            mirrors:
              - {name: pypi, upstream: "https://127.0.0.1:8443/", also: {files: "https://127.0.0.1:8444"}, min_release_age: 7d}
              - {name: pypi-internal, kind: pypi, path: /internal, upstream: https://devpi.example/root/pypi}
              - {name: tools, upstream: "http://10.0.0.1:8080/tools"}
            """)
        let pypi = config.mirrors[0]
        #expect(pypi.kind == .pypi && pypi.path == "/pypi/" && pypi.upstream.description == "https://127.0.0.1:8443/")
        #expect(pypi.also == [MirrorRoute(subpath: "files/", upstream: try MirrorUpstream.parse("https://127.0.0.1:8444/"))])
        #expect(pypi.minReleaseAge == Double(7 * 86_400))
        // Another upstream than the built-in's: the built-in's files host is not assumed.
        let devpi = config.mirrors[1]
        #expect(devpi.kind == .pypi && devpi.path == "/internal/" && devpi.also.isEmpty)
        #expect(devpi.upstream.description == "https://devpi.example/root/pypi/")
        let tools = config.mirrors[2]
        #expect(tools.kind == .plain && tools.path == "/tools/" && tools.upstream.description == "http://10.0.0.1:8080/tools/")
    }

    @Test(arguments: [
        ("mirrors: [pip]\n", "unknown mirror \"pip\""),
        ("mirrors: [{name: x}]\n", "needs an upstream"),
        ("mirrors: [{upstream: https://a.example/}]\n", "needs a name"),
        ("mirrors: [pypi, pypi]\n", "listed twice"),
        ("mirrors: [{name: a, path: /p/, upstream: https://a.example/}, {name: b, path: /p/, upstream: https://b.example/}]\n",
         "both use the path /p/"),
        ("mirrors: [{name: a, path: /, upstream: https://a.example/}]\n", "expected /NAME/"),
        ("mirrors: [{name: a, path: /../x/, upstream: https://a.example/}]\n", "expected /NAME/"),
        ("mirrors: [{name: a, path: \"/a b/\", upstream: https://a.example/}]\n", "expected /NAME/"),
        ("mirrors: [{name: a, upstream: https://a.example/x/../y/}]\n", "without . or .. segments"),
        ("mirrors: [{name: a, upstream: \"https://user@a.example/\"}]\n", "without path, user or query"),
        ("mirrors: [{name: a, upstream: ftp://a.example/}]\n", "expected http://HOST"),
        ("mirrors: [{name: debian, min_release_age: 7d}]\n", "min_release_age needs a registry"),
        ("mirrors: [{name: a, upstream: https://a.example/, also: {../x: https://b.example/}}]\n", "a subpath is"),
        ("mirrors: [{name: \"a/b\", upstream: https://a.example/}]\n", "letters, digits"),
        ("mirrors: [{name: a, upstream: https://a.example/, colour: red}]\n", "unknown key"),
    ])
    func refusesWhatCannotBeServedSafely(_ yaml: String, _ expected: String) {
        let message = Self.error(yaml)
        #expect(message.contains(expected), "\(message)")
    }
}
