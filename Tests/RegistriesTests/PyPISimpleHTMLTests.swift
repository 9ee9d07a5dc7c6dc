import Testing
@testable import Registries

@Suite("PyPI simple HTML from JSON")
struct PyPISimpleHTMLTests {
    static let rendered = (try? PyPISimpleHTML.render(fromJSON: bytes(PyPIFixtures.simpleJSON))) ?? []

    @Test func writesAPEP503Page() {
        let page = text(Self.rendered)
        #expect(page.hasPrefix("""
            <!DOCTYPE html>
            <html>
              <head>
                <meta name="pypi:repository-version" content="1.1">
                <title>Links for example-pkg</title>
              </head>
              <body>
                <h1>Links for example-pkg</h1>
                <a href="https://files.pythonhosted.org/packages/0a/1b/\(Hashes.a.prefix(60))/example_pkg-1.0.0-py3-none-any.whl#sha256=\(Hashes.a)" \
            data-requires-python="&gt;=3.8" data-dist-info-metadata="sha256=\(Hashes.b)" data-core-metadata="sha256=\(Hashes.b)">\
            example_pkg-1.0.0-py3-none-any.whl</a><br />

            """))
        #expect(page.hasSuffix("</a><br />\n  </body>\n</html>\n"))
    }

    /// What pip reads from each anchor (pip's HTML parser: href, its hash fragment, the data-
    /// attributes, the text) is what the JSON said.
    @Test func pipRelevantAttributesRoundTrip() throws {
        let anchors = try HTMLLinks.anchors(in: Self.rendered)
        try #require(anchors.count == 7)
        let expected: [(file: String, hash: String, metadata: String?, yanked: String?, python: String)] = [
            ("example_pkg-1.0.0-py3-none-any.whl", Hashes.a, "sha256=\(Hashes.b)", nil, ">=3.8"),
            ("example_pkg-1.0.0.tar.gz", Hashes.c, nil, nil, ">=3.8"),
            ("example_pkg-1.1.0-py3-none-any.whl", Hashes.d, "sha256=\(Hashes.e)", nil, ">=3.8"),
            ("example_pkg-1.1.0.tar.gz", Hashes.f, nil, "Missing \"py.typed\" & <data> files", ">=3.8"),
            ("example_pkg-1.1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", Hashes.g, "true", nil, ">=3.8"),
            ("example_pkg-2.0.0-py3-none-any.whl", Hashes.h, "sha256=\(Hashes.h)", nil, ">=3.9"),
            ("example_pkg-2.0.0.tar.gz", Hashes.a, nil, nil, ">=3.9"),
        ]
        for (anchor, file) in zip(anchors, expected) {
            #expect(anchor.text == file.file)
            let href = try #require(anchor.attributes["href"])
            #expect(href.hasPrefix("https://files.pythonhosted.org/packages/") && href.contains("/\(file.file)#"))
            #expect(href.hasSuffix("#sha256=\(file.hash)"))
            #expect(anchor.attributes["data-requires-python"] == file.python)
            #expect(anchor.attributes["data-core-metadata"] == file.metadata)
            #expect(anchor.attributes["data-dist-info-metadata"] == file.metadata)
            #expect(anchor.attributes["data-yanked"] == file.yanked)
        }
    }

    @Test func writesEachPEPAttribute() throws {
        let page = """
            {"name":"A&B","files":[{"filename":"a<b>-1.0.tar.gz","url":"https://h/a?x=1&y=2",\
            "hashes":{"md5":"00","sha512":"11"},"requires-python":"","gpg-sig":true,"yanked":true,\
            "provenance":"https://pypi.org/integrity/a/1.0/a-1.0.tar.gz/provenance",\
            "dist-info-metadata":{"sha256":"22"}},\
            {"filename":"b-1.0.tar.gz","url":"https://h/b#sha256=33","hashes":{"sha256":"33"},"yanked":"",\
            "core-metadata":false,"dist-info-metadata":true,"gpg-sig":false}]}
            """
        let html = text(try PyPISimpleHTML.render(fromJSON: bytes(page)))
        #expect(html.contains("<title>Links for A&amp;B</title>"))
        #expect(html.contains("<meta name=\"pypi:repository-version\" content=\"1.0\">"))
        // No sha256: the first hash name in order; an empty requires-python is left out (pip
        // reads it as none); the legacy metadata key still counts.
        #expect(html.contains("""
            <a href="https://h/a?x=1&amp;y=2#md5=00" data-dist-info-metadata="sha256=22" data-core-metadata="sha256=22" \
            data-gpg-sig="true" data-yanked="" data-provenance="https://pypi.org/integrity/a/1.0/a-1.0.tar.gz/provenance">\
            a&lt;b&gt;-1.0.tar.gz</a><br />
            """))
        // A URL that already has a fragment keeps it; `core-metadata: false` wins over the legacy key;
        // an empty yank reason is not a yank (as pip reads it).
        #expect(html.contains(#"<a href="https://h/b#sha256=33" data-gpg-sig="false">b-1.0.tar.gz</a><br />"#))
    }

    @Test func filteredJSONRendersWithoutTheTooNewFiles() throws {
        let filtered = try PyPISimpleFilter.filter(bytes(PyPIFixtures.simpleJSON), age: sevenDays)
        let anchors = try HTMLLinks.anchors(in: PyPISimpleHTML.render(fromJSON: filtered.document))
        #expect(anchors.map(\.text) == ["example_pkg-1.0.0-py3-none-any.whl", "example_pkg-1.0.0.tar.gz",
                                        "example_pkg-1.1.0-py3-none-any.whl", "example_pkg-1.1.0.tar.gz"])
    }

    @Test func refusesHostileJSON() {
        #expect(throws: RegistryDocumentError.json(JSONScanError(reason: .truncated, offset: 10))) {
            try PyPISimpleHTML.render(fromJSON: bytes(#"{"files":["#))
        }
    }
}
