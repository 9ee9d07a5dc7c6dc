import Testing
@testable import Registries

struct ClassificationRow: Sendable, CustomTestStringConvertible {
    var kind: RegistryKind
    var path: String
    var expected: RequestClass

    var testDescription: String { "\(kind) \(path)" }

    init(_ kind: RegistryKind, _ path: String, _ expected: RequestClass) {
        self.kind = kind
        self.path = path
        self.expected = expected
    }
}

private let file = RequestClass.packageFile
private let pass = RequestClass.passthrough
private func document(_ kind: IndexDocument) -> RequestClass { .indexDocument(kind) }

@Suite("Request classification")
struct RequestClassificationTests {
    static let pypi: [ClassificationRow] = [
        ClassificationRow(.pypi, "/simple/", document(.pypiSimple)),
        ClassificationRow(.pypi, "/simple/requests/", document(.pypiSimple)),
        ClassificationRow(.pypi, "/simple/requests", document(.pypiSimple)),
        ClassificationRow(.pypi, "simple/Django/", document(.pypiSimple)),
        ClassificationRow(.pypi, "/simple/requests/?format=json", document(.pypiSimple)),
        ClassificationRow(.pypi, "/pypi/requests/json", document(.pypiJSONAPI)),
        ClassificationRow(.pypi, "/pypi/requests/2.31.0/json", document(.pypiJSONAPI)),
        ClassificationRow(.pypi, "/files/packages/70/8e/0e2d847013cb52cd35b38c009bb167a1a26b2ce6cd6965bf26b47bc0bf44/requests-2.31.0-py3-none-any.whl", file),
        ClassificationRow(.pypi, "/files/packages/9d/be/10918a2eac4ae9f02f6cfe6414b7a155ccd8f7f9d4380d62fd5b955065c3/requests-2.31.0.tar.gz", file),
        ClassificationRow(.pypi, "/files/packages/70/8e/0e2d/requests-2.31.0-py3-none-any.whl.metadata", file),
        ClassificationRow(.pypi, "/files/packages/", pass),
        ClassificationRow(.pypi, "/files/other/x.whl", pass),
        ClassificationRow(.pypi, "/pypi/requests/", pass),
        ClassificationRow(.pypi, "/pypi//json", .rejected(reason: "empty path segment")),
        ClassificationRow(.pypi, "/project/requests/", pass),
        ClassificationRow(.pypi, "/", pass),
    ]

    static let npm: [ClassificationRow] = [
        ClassificationRow(.npm, "/lodash", document(.npmPackument)),
        ClassificationRow(.npm, "lodash", document(.npmPackument)),
        ClassificationRow(.npm, "/@types%2fnode", document(.npmPackument)),
        ClassificationRow(.npm, "/@types%2Fnode", document(.npmPackument)),
        ClassificationRow(.npm, "/@types/node", document(.npmPackument)),
        ClassificationRow(.npm, "/lodash/4.17.21", document(.npmVersion)),
        ClassificationRow(.npm, "/lodash/latest", document(.npmVersion)),
        ClassificationRow(.npm, "/@types/node/20.9.0", document(.npmVersion)),
        ClassificationRow(.npm, "/lodash/-/lodash-4.17.21.tgz", file),
        ClassificationRow(.npm, "/@types/node/-/node-20.9.0.tgz", file),
        ClassificationRow(.npm, "/@types%2fnode/-/node-20.9.0.tgz", file),
        ClassificationRow(.npm, "/lodash/-/lodash-4.17.21.tar", pass),
        ClassificationRow(.npm, "/-/v1/search?text=lodash", pass),
        ClassificationRow(.npm, "/-/npm/v1/security/advisories/bulk", pass),
        ClassificationRow(.npm, "/-/ping", pass),
        ClassificationRow(.npm, "/", pass),
        ClassificationRow(.npm, "/lodash/", pass),
        ClassificationRow(.npm, "/@types", pass),
        ClassificationRow(.npm, "/lodash/-/a/b.tgz", pass),
        ClassificationRow(.npm, "/@types%2f..%2f..%2fx", .rejected(reason: "dot segment in path")),
    ]

    static let crates: [ClassificationRow] = [
        ClassificationRow(.crates, "/config.json", document(.cratesConfig)),
        ClassificationRow(.crates, "/1/a", document(.cratesIndexEntry)),
        ClassificationRow(.crates, "/2/cc", document(.cratesIndexEntry)),
        ClassificationRow(.crates, "/3/s/syn", document(.cratesIndexEntry)),
        ClassificationRow(.crates, "/se/rd/serde", document(.cratesIndexEntry)),
        ClassificationRow(.crates, "/dl/serde/1.0.193/download", file),
        ClassificationRow(.crates, "/dl/serde/serde-1.0.193.crate", file),
        ClassificationRow(.crates, "/dl/", pass),
        ClassificationRow(.crates, "/api/v1/crates/serde", pass),
        ClassificationRow(.crates, "/ser/de/serde", pass),
    ]

    static let debian: [ClassificationRow] = [
        ClassificationRow(.debian, "/dists/bookworm/InRelease", document(.aptRelease)),
        ClassificationRow(.debian, "/dists/bookworm/Release", document(.aptRelease)),
        ClassificationRow(.debian, "/dists/bookworm/Release.gpg", document(.aptRelease)),
        ClassificationRow(.debian, "/dists/bookworm/main/binary-amd64/Packages.xz", document(.aptIndex)),
        ClassificationRow(.debian, "/dists/bookworm/main/binary-amd64/by-hash/SHA256/\(Hashes.a)", document(.aptIndex)),
        ClassificationRow(.debian, "/dists/bookworm/main/Release", document(.aptIndex)),
        ClassificationRow(.debian, "/pool/main/a/apt/apt_2.6.1_amd64.deb", file),
        ClassificationRow(.debian, "/pool/main/a/apt/", pass),
        ClassificationRow(.debian, "/dists/bookworm/", pass),
        ClassificationRow(.debian, "/README", pass),
        ClassificationRow(.debian, "/pool/main/../../etc/passwd", .rejected(reason: "dot segment in path")),
        ClassificationRow(.debian, "/pool/main/%2e%2e/x.deb", .rejected(reason: "dot segment in path")),
        ClassificationRow(.debian, "/pool//main/x.deb", .rejected(reason: "empty path segment")),
    ]

    static let go: [ClassificationRow] = [
        ClassificationRow(.go, "/golang.org/x/text/@v/list", document(.goVersionList)),
        ClassificationRow(.go, "/github.com/!burnt!sushi/toml/@latest", document(.goLatest)),
        ClassificationRow(.go, "/golang.org/x/text/@v/v0.14.0.info", file),
        ClassificationRow(.go, "/golang.org/x/text/@v/v0.14.0.mod", file),
        ClassificationRow(.go, "/golang.org/x/text/@v/v0.14.0.zip", file),
        ClassificationRow(.go, "/golang.org/x/text/@v/.zip", pass),
        ClassificationRow(.go, "/sumdb/sum.golang.org/supported", pass),
        ClassificationRow(.go, "/golang.org/x/text", pass),
    ]

    static let maven: [ClassificationRow] = [
        ClassificationRow(.maven, "/org/apache/commons/commons-lang3/maven-metadata.xml", document(.mavenMetadata)),
        ClassificationRow(.maven, "/org/apache/commons/commons-lang3/maven-metadata.xml.sha1", document(.mavenMetadata)),
        ClassificationRow(.maven, "/archetype-catalog.xml", document(.mavenMetadata)),
        ClassificationRow(.maven, "/org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.jar", file),
        ClassificationRow(.maven, "/org/apache/commons/commons-lang3/3.14.0/commons-lang3-3.14.0.pom.sha1", file),
        ClassificationRow(.maven, "/junit/junit/4.13.2/junit-4.13.2.jar", file),
        ClassificationRow(.maven, "/org/apache/commons/", pass),
        ClassificationRow(.maven, "/robots.txt", pass),
    ]

    static let rubygems: [ClassificationRow] = [
        ClassificationRow(.rubygems, "/versions", document(.rubygemsIndex)),
        ClassificationRow(.rubygems, "/names", document(.rubygemsIndex)),
        ClassificationRow(.rubygems, "/info/rails", document(.rubygemsIndex)),
        ClassificationRow(.rubygems, "/specs.4.8.gz", document(.rubygemsIndex)),
        ClassificationRow(.rubygems, "/latest_specs.4.8.gz", document(.rubygemsIndex)),
        ClassificationRow(.rubygems, "/prerelease_specs.4.8.gz", document(.rubygemsIndex)),
        ClassificationRow(.rubygems, "/api/v1/dependencies?gems=rails", document(.rubygemsIndex)),
        ClassificationRow(.rubygems, "/gems/rails-7.1.2.gem", file),
        ClassificationRow(.rubygems, "/quick/Marshal.4.8/rails-7.1.2.gemspec.rz", file),
        ClassificationRow(.rubygems, "/api/v1/gems/rails.json", pass),
        ClassificationRow(.rubygems, "/gems/", pass),
    ]

    static let plain: [ClassificationRow] = [
        ClassificationRow(.plain, "/anything/at/all.tar.gz", pass),
        ClassificationRow(.plain, "/", pass),
        ClassificationRow(.plain, "/a/../b", .rejected(reason: "dot segment in path")),
        ClassificationRow(.plain, "/a/%2E%2e/b", .rejected(reason: "dot segment in path")),
        ClassificationRow(.plain, "/a/..%5cb", .rejected(reason: "dot segment in path")),
        ClassificationRow(.plain, "/a/.", .rejected(reason: "dot segment in path")),
        ClassificationRow(.plain, "/a/...", pass),
        ClassificationRow(.plain, "/a/..b", pass),
    ]

    @Test("Classifies", arguments: pypi + npm + crates + debian + go + maven + rubygems + plain)
    func classifies(_ row: ClassificationRow) {
        #expect(row.kind.classify(path: row.path) == row.expected)
        #expect(row.kind.classify(path: Array(row.path.utf8)) == row.expected)
    }

    @Test("Rewrite formats", arguments: [
        (IndexDocument.pypiSimple, "application/vnd.pypi.simple.v1+json", IndexFormat.pypiSimpleJSON),
        (.pypiSimple, "text/html", .pypiSimpleHTML),
        (.pypiSimple, nil, nil),
        (.pypiJSONAPI, "application/json", .pypiJSONAPI),
        (.npmPackument, "application/vnd.npm.install-v1+json", .npmPackument),
        (.npmVersion, nil, .npmVersion),
        (.cratesConfig, nil, .cratesConfig),
        (.cratesIndexEntry, nil, nil),
        (.aptRelease, nil, nil),
        (.rubygemsIndex, nil, nil),
    ] as [(IndexDocument, String?, IndexFormat?)])
    func namesTheRewrite(_ document: IndexDocument, _ contentType: String?, _ expected: IndexFormat?) {
        #expect(document.rewriteFormat(contentType: contentType) == expected)
    }
}
