import Testing
@testable import Registries

private func rewrite(_ document: String, _ format: IndexFormat, _ map: URLPrefixMap) throws -> RewriteResult {
    try IndexRewrite.rewrite(bytes(document), as: format, with: map)
}

/// `document` with every occurrence of each `from` replaced: what a rewrite must produce when the
/// links are the only occurrences.
private func replacing(_ document: String, _ pairs: [(String, String)]) -> String {
    pairs.reduce(document) { $0.replacing($1.0, with: $1.1) }
}

@Suite("URL prefix map")
struct URLPrefixMapTests {
    static let map = URLPrefixMap([
        "https://pypi.org/": "http://mirror/pypi/",
        "https://pypi.org/simple/": "http://mirror/simple-only/",
        "https://files.pythonhosted.org/": "http://mirror/pypi/files/",
    ])

    @Test("Rewrites", arguments: [
        ("https://files.pythonhosted.org/packages/a/b.whl", "http://mirror/pypi/files/packages/a/b.whl"),
        ("https://pypi.org/simple/requests/", "http://mirror/simple-only/requests/"),
        ("https://pypi.org/project/requests/", "http://mirror/pypi/project/requests/"),
        ("HTTPS://Files.PythonHosted.ORG/packages/X.whl", "http://mirror/pypi/files/packages/X.whl"),
        ("https://files.pythonhosted.org/", "http://mirror/pypi/files/"),
        // Past the host the path compares exactly: `/Simple/` is not `/simple/`.
        ("https://PyPI.org/Simple/x", "http://mirror/pypi/Simple/x"),
    ])
    func rewritesTheLongestMatchingPrefix(_ url: String, _ expected: String) {
        #expect(Self.map.rewrite(url) == expected)
    }

    @Test("Leaves alone", arguments: [
        "https://files.pythonhosted.org",  // shorter than the prefix
        "http://files.pythonhosted.org/packages/a.whl",  // another scheme
        "https://files.pythonhosted.org.evil.example/packages/a.whl",
        "https://pypi.org.evil.example/",
        "../../packages/a/b.whl",
        "",
    ])
    func leavesOtherURLsAlone(_ url: String) {
        #expect(Self.map.rewrite(url) == nil)
    }
}

@Suite("Index rewriting")
struct IndexRewriteTests {
    @Test func pep691PageChangesOnlyFileURLs() throws {
        let result = try rewrite(PyPIFixtures.simpleJSON, .pypiSimpleJSON, Maps.pypiFiles)
        #expect(result.rewritten == 7 && result.leftAlone == 0)
        #expect(text(result.document) == replacing(PyPIFixtures.simpleJSON, [
            ("https://files.pythonhosted.org/", "http://larder.internal:3128/pypi/files/"),
        ]))
    }

    @Test func pypiJSONAPIChangesOnlyReleaseAndURLsFiles() throws {
        let result = try rewrite(PyPIFixtures.jsonAPI, .pypiJSONAPI, Maps.pypiFiles)
        #expect(result.rewritten == 4)
        let expected = replacing(PyPIFixtures.jsonAPI, [
            ("https://files.pythonhosted.org/packages", "http://larder.internal:3128/pypi/files/packages"),
        ])
        // `info.home_page` points at the files host too, but is not a file link.
        #expect(text(result.document) == expected)
        #expect(text(result.document).contains("\"home_page\":\"https://files.pythonhosted.org/not-a-file\""))
    }

    @Test func npmDocumentChangesOnlyTarballs() throws {
        let result = try rewrite(NPMFixtures.packument, .npmPackument, Maps.npm)
        #expect(result.rewritten == 4)
        let rewritten = text(result.document)
        #expect(rewritten == replacing(NPMFixtures.packument, [
            ("\"https://registry.npmjs.org/tiny-tool/-/", "\"http://larder.internal:3128/npm/tiny-tool/-/"),
        ]))
        // The README's link to the registry is text, not a tarball.
        #expect(rewritten.contains("See https://registry.npmjs.org/tiny-tool for more."))
    }

    @Test func abbreviatedNPMDocumentToo() throws {
        let result = try rewrite(NPMFixtures.abbreviated, .npmPackument, Maps.npm)
        #expect(result.rewritten == 2)
        #expect(text(result.document) == replacing(NPMFixtures.abbreviated, [
            ("https://registry.npmjs.org/", "http://larder.internal:3128/npm/"),
        ]))
    }

    @Test func npmVersionManifest() throws {
        let manifest = NPMFixtures.version("1.0.0", shasum: Hashes.a)
        let result = try rewrite(manifest, .npmVersion, Maps.npm)
        #expect(result.rewritten == 1)
        #expect(text(result.document).contains("\"tarball\":\"http://larder.internal:3128/npm/tiny-tool/-/tiny-tool-1.0.0.tgz\""))
    }

    @Test func cratesConfigChangesDlAndAPI() throws {
        let result = try rewrite(CratesFixtures.config, .cratesConfig, Maps.crates)
        #expect(result.rewritten == 2)
        #expect(text(result.document) == """
            {
              "dl": "http://larder.internal:3128/crates/dl",
              "api": "http://larder.internal:3128/crates/api"
            }
            """)
    }

    @Test func cratesConfigKeepsOtherMembersAndTemplates() throws {
        let config = #"{"dl":"https://static.crates.io/crates/{crate}/{version}/download","auth-required":false,"api":"https://crates.io"}"#
        let result = try rewrite(config, .cratesConfig, Maps.crates)
        #expect(text(result.document)
            == #"{"dl":"http://larder.internal:3128/crates/dl/{crate}/{version}/download","auth-required":false,"api":"http://larder.internal:3128/crates/api"}"#)
    }

    @Test func recognisesEscapedSlashesAndWritesThemPlain() throws {
        let page = #"{"files":[{"url":"https:\/\/files.pythonhosted.org\/packages\/x.whl","filename":"x\/y"}]}"#
        let result = try rewrite(page, .pypiSimpleJSON, Maps.pypiFiles)
        #expect(text(result.document)
            == #"{"files":[{"url":"http://larder.internal:3128/pypi/files/packages/x.whl","filename":"x\/y"}]}"#)
    }

    @Test func escapesAReplacementThatNeedsIt() throws {
        let map = URLPrefixMap(["https://files.pythonhosted.org/": "http://mirror/\"odd\\path\"/"])
        let result = try rewrite(#"{"files":[{"url":"https://files.pythonhosted.org/a"}]}"#, .pypiSimpleJSON, map)
        #expect(text(result.document) == #"{"files":[{"url":"http://mirror/\"odd\\path\"/a"}]}"#)
        try JSONScanner.validate(result.document)
    }

    @Test func leavesOtherLinksAndNonStringsAlone() throws {
        let page = #"{"files":[{"url":"../../packages/x.whl"},{"url":null},{"url":"https://elsewhere.example/y"},{"url":"\ud800"}]}"#
        let result = try rewrite(page, .pypiSimpleJSON, Maps.pypiFiles)
        #expect(result.document == bytes(page))
        #expect(result.rewritten == 0 && result.leftAlone == 3)
    }

    @Test func rewritesNothingOutsideTheLinkPaths() throws {
        let page = #"{"url":"https://files.pythonhosted.org/a","files":[{"hashes":{"url":"https://files.pythonhosted.org/b"}}],"x":{"files":[{"url":"https://files.pythonhosted.org/c"}]}}"#
        let result = try rewrite(page, .pypiSimpleJSON, Maps.pypiFiles)
        #expect(result.document == bytes(page) && result.rewritten == 0)
    }

    @Test("Hostile documents are refused whole", arguments: [
        (#"{"files":[{"url":"https://files.pythonhosted.org/a"}"#, RegistryDocumentError.json(JSONScanError(reason: .truncated, offset: 52))),
        (#"{"files":[{"url":"https://files.pythonhosted.org/a"}]} x"#, .json(JSONScanError(reason: .trailingContent, offset: 55))),
        ("{\"files\":[{\"url\":\"https://files.pythonhosted.org/\u{7F}\u{01}\"}]}", .json(JSONScanError(reason: .controlCharacterInString, offset: 50))),
    ])
    func refusesHostileDocuments(_ document: String, _ expected: RegistryDocumentError) {
        #expect(throws: expected) { try rewrite(document, .pypiSimpleJSON, Maps.pypiFiles) }
    }

    @Test func refusesInvalidUTF8AndDeepNesting() {
        let latin1: [UInt8] = bytes(#"{"files":[{"url":"https://files.pythonhosted.org/caf"#) + [0xE9] + bytes(#""}]}"#)
        #expect(throws: RegistryDocumentError.json(JSONScanError(reason: .invalidUTF8, offset: 52))) {
            try IndexRewrite.rewrite(latin1, as: .pypiSimpleJSON, with: Maps.pypiFiles)
        }
        let deep = bytes(#"{"files":"# + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}")
        #expect(throws: RegistryDocumentError.json(JSONScanError(reason: .tooDeep(limit: 64), offset: 72))) {
            try IndexRewrite.rewrite(deep, as: .pypiSimpleJSON, with: Maps.pypiFiles)
        }
    }

    @Test("Simple API content types", arguments: [
        ("application/vnd.pypi.simple.v1+json", IndexFormat.pypiSimpleJSON),
        ("Application/VND.pypi.simple.v1+JSON; charset=utf-8", .pypiSimpleJSON),
        ("application/vnd.pypi.simple.latest+json", .pypiSimpleJSON),
        ("application/vnd.pypi.simple.v1+html", .pypiSimpleHTML),
        ("text/html; charset=utf-8", .pypiSimpleHTML),
        ("application/json", nil),
        ("", nil),
    ] as [(String, IndexFormat?)])
    func readsSimpleContentTypes(_ contentType: String, _ expected: IndexFormat?) {
        #expect(IndexFormat(pypiSimpleContentType: contentType) == expected)
    }
}

@Suite("HTML link rewriting")
struct HTMLLinksTests {
    @Test func pep503PageChangesOnlyHrefs() throws {
        let result = try rewrite(PyPIFixtures.simpleHTML, .pypiSimpleHTML, Maps.pypiFiles)
        #expect(result.rewritten == 3 && result.leftAlone == 0)
        #expect(text(result.document) == replacing(PyPIFixtures.simpleHTML, [
            ("https://files.pythonhosted.org/", "http://larder.internal:3128/pypi/files/"),
        ]))
    }

    @Test("Rewrites", arguments: [
        (#"<a href="https://files.pythonhosted.org/x">x</a>"#, #"<a href="http://larder.internal:3128/pypi/files/x">x</a>"#),
        (#"<A HREF='https://files.pythonhosted.org/x'>x</A>"#, #"<A HREF='http://larder.internal:3128/pypi/files/x'>x</A>"#),
        (#"<a data-x="1" href = "https://files.pythonhosted.org/x" >"#, #"<a data-x="1" href = "http://larder.internal:3128/pypi/files/x" >"#),
        (#"<base href="https://files.pythonhosted.org/packages/">"#, #"<base href="http://larder.internal:3128/pypi/files/packages/">"#),
        ("<a\nhref=\"https://files.pythonhosted.org/x\"/>", "<a\nhref=\"http://larder.internal:3128/pypi/files/x\"/>"),
    ])
    func rewrites(_ page: String, _ expected: String) throws {
        #expect(text(try rewrite(page, .pypiSimpleHTML, Maps.pypiFiles).document) == expected)
    }

    @Test("Leaves alone", arguments: [
        #"<a href=https://files.pythonhosted.org/x>unquoted</a>"#,
        #"<link href="https://files.pythonhosted.org/x">"#,
        #"<a data-href="https://files.pythonhosted.org/x">"#,
        #"<!-- <a href="https://files.pythonhosted.org/x"> -->"#,
        #"<script>var s = '<a href="https://files.pythonhosted.org/x">';</script>"#,
        #"<title><a href="https://files.pythonhosted.org/x"></title>"#,
        #"<meta content='<a href="https://files.pythonhosted.org/x">'>"#,
        #"<p>see https://files.pythonhosted.org/x and a < b</p>"#,
        #"<a href="../../packages/x.whl">relative</a>"#,
    ])
    func leavesAlone(_ page: String) throws {
        #expect(try rewrite(page, .pypiSimpleHTML, Maps.pypiFiles).document == bytes(page))
    }

    @Test func escapesTheReplacementForTheAttribute() throws {
        let map = URLPrefixMap(["https://files.pythonhosted.org/": "http://mirror/?a=1&b='2'\"/"])
        let result = try IndexRewrite.rewrite(bytes(#"<a href="https://files.pythonhosted.org/x">"#), as: .pypiSimpleHTML, with: map)
        #expect(text(result.document) == #"<a href="http://mirror/?a=1&amp;b=&#39;2&#39;&quot;/x">"#)
    }

    @Test("Hostile pages", arguments: [
        ("<a href=\"https://files.pythonhosted.org/x", HTMLScanError(reason: .truncatedTag, offset: 0)),
        ("<p>ok</p><a href='x", HTMLScanError(reason: .truncatedTag, offset: 9)),
        ("<p>ok</p><a", HTMLScanError(reason: .truncatedTag, offset: 9)),
        ("<!-- never closed <a href=\"x\">", HTMLScanError(reason: .truncatedComment, offset: 0)),
        ("<!DOCTYPE html", HTMLScanError(reason: .truncatedTag, offset: 0)),
    ])
    func refusesHostilePages(_ page: String, _ expected: HTMLScanError) {
        #expect(throws: RegistryDocumentError.html(expected)) { try rewrite(page, .pypiSimpleHTML, Maps.pypiFiles) }
    }

    @Test func refusesInvalidUTF8() {
        let page = bytes("<a href=\"https://files.pythonhosted.org/caf") + [0xE9] + bytes("\">")
        #expect(throws: RegistryDocumentError.html(HTMLScanError(reason: .invalidUTF8, offset: 43))) {
            try IndexRewrite.rewrite(page, as: .pypiSimpleHTML, with: Maps.pypiFiles)
        }
    }

    @Test func rewritesLargePagesInLinearTime() throws {
        let anchor = #"<a href="https://files.pythonhosted.org/packages/ab/cd/x-1.0.tar.gz#sha256=00">x-1.0.tar.gz</a><br />"#
        let page = String(repeating: anchor + "\n", count: 20_000)
        let result = try rewrite(page, .pypiSimpleHTML, Maps.pypiFiles)
        #expect(result.rewritten == 20_000)
    }
}
