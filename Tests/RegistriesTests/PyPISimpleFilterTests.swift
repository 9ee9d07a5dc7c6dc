import Testing
@testable import Registries

private func filter(_ document: String, _ age: ReleaseAge = sevenDays) throws -> PyPISimpleFilter.Result {
    try PyPISimpleFilter.filter(bytes(document), age: age)
}

/// `text` without the part from the first `from` up to (not including) the first `upTo` after it.
private func cutting(_ text: String, from: String, upTo: String) throws -> String {
    let start = try #require(text.firstRange(of: from)).lowerBound
    let end = try #require(text[start...].firstRange(of: upTo)).lowerBound
    return String(text[..<start] + text[end...])
}

@Suite("PyPI simple API release age")
struct PyPISimpleFilterTests {
    @Test func dropsTooNewFilesAndVersionsLeftWithoutFiles() throws {
        let result = try filter(PyPIFixtures.simpleJSON)
        #expect(result.removed.files.map(\.filename) == [
            "example_pkg-1.1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "example_pkg-2.0.0-py3-none-any.whl",
            "example_pkg-2.0.0.tar.gz",
        ])
        #expect(result.removed.files.map(\.published) == [1_699_776_000, 1_699_724_710, 1_699_724_712])
        #expect(result.removed.files[2].url.hasPrefix("https://files.pythonhosted.org/packages/2a/3b/"))
        // 1.1.0 keeps its older files; 0.9.0 never had any and stays listed as upstream lists it.
        #expect(result.removed.versions == ["2.0.0"])
        #expect(result.keptUndated == 0)
    }

    /// Everything but the removed entries is byte for byte what PyPI sent.
    @Test func changesNothingElse() throws {
        var expected = try cutting(PyPIFixtures.simpleJSON, from: ",\n    {\n      \"core-metadata\": true", upTo: "\n  ],\n  \"meta\"")
        expected = expected.replacing(",\n    \"2.0.0\"\n  ]", with: "\n  ]")
        let result = try filter(PyPIFixtures.simpleJSON)
        #expect(text(result.document) == expected)
        try JSONScanner.validate(result.document)
    }

    @Test func leavesAnOldEnoughPageUntouched() throws {
        let result = try filter(PyPIFixtures.simpleJSON, ReleaseAge(minimumAge: day, now: now))
        #expect(result.document == bytes(PyPIFixtures.simpleJSON) && result.removed.isEmpty)
    }

    @Test func keepsFilesWithoutUploadTime() throws {
        let page = """
            {"meta":{"api-version":"1.0"},"name":"x","files":[\
            {"filename":"x-1.0.tar.gz","url":"https://h/x-1.0.tar.gz","hashes":{}},\
            {"filename":"x-1.1.tar.gz","url":"https://h/x-1.1.tar.gz","hashes":{},"upload-time":"last week"},\
            {"filename":"x-1.2.tar.gz","url":"https://h/x-1.2.tar.gz","hashes":{},"upload-time":"2023-11-14T00:00:00Z"}]}
            """
        let result = try filter(page)
        #expect(result.keptUndated == 2)
        #expect(result.removed.files.map(\.filename) == ["x-1.2.tar.gz"])
        #expect(result.removed.versions.isEmpty)  // API 1.0: no `versions` list
        #expect(!text(result.document).contains("x-1.2") && text(result.document).contains("x-1.1.tar.gz"))
    }

    /// The limit of reading versions from file names without PEP 440 normalisation: the new wheel
    /// spells the version `1.0b0`, the old sdist `1.0-beta`; nothing ties the two, so `1.0b0` goes
    /// while the sdist (the same release to pip) stays.
    @Test func versionSpellingsAreComparedAsWritten() throws {
        let page = """
            {"name":"x","versions":["1.0b0","1.0-beta"],"files":[\
            {"filename":"x-1.0-beta.tar.gz","url":"u","upload-time":"2020-01-01T00:00:00Z"},\
            {"filename":"x-1.0b0-py3-none-any.whl","url":"v","upload-time":"2023-11-14T00:00:00Z"}]}
            """
        let result = try filter(page)
        #expect(result.removed.versions == ["1.0b0"])
        #expect(text(result.document).contains(#""versions":["1.0-beta"]"#))
    }

    @Test func refusesHostilePages() {
        #expect(throws: RegistryDocumentError.json(JSONScanError(reason: .tooDeep(limit: 64), offset: 86))) {
            try filter(#"{"files":[{"upload-time":"# + String(repeating: "[", count: 80))
        }
        let truncated = Array(bytes(PyPIFixtures.simpleJSON).prefix(500))
        #expect(throws: RegistryDocumentError.json(JSONScanError(reason: .truncated, offset: 500))) {
            try PyPISimpleFilter.filter(truncated, age: sevenDays)
        }
    }
}

@Suite("PyPI file names")
struct PyPIFilenamesTests {
    @Test("Versions from file names", arguments: [
        ("example_pkg-1.0.0-py3-none-any.whl", "example-pkg", "1.0.0"),
        ("example_pkg-1.0.0-1-py3-none-any.whl", "example-pkg", "1.0.0"),  // with a build tag
        ("numpy-1.26.2-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "numpy", "1.26.2"),
        ("example_pkg-1.0.0.tar.gz", "example-pkg", "1.0.0"),
        ("Example-Pkg-1.0.0.tar.gz", "example-pkg", "1.0.0"),  // an older sdist with `-` in its name
        ("example.pkg-2.0rc1.zip", "example-pkg", "2.0rc1"),
        ("zope.interface-6.1.tar.gz", "zope-interface", "6.1"),
        ("foo-bar-1.0-beta.tar.gz", "foo-bar", "1.0-beta"),
        ("foo-bar-1.0-beta.tar.gz", nil, "beta"),  // without the project name: the last `-`
        ("setuptools-0.6c11-py2.7.egg", "setuptools", "0.6c11"),
        ("pkg-1.0.tar.bz2", "pkg", "1.0"),
        ("pkg-1.0.win32.exe", "pkg", nil),
        ("pkg.whl", "pkg", nil),
        ("pkg.tar.gz", "pkg", nil),
    ] as [(String, String?, String?)])
    func readsVersions(_ filename: String, _ project: String?, _ expected: String?) {
        #expect(PyPIFilenames.version(ofFile: filename, project: project) == expected)
    }

    @Test("PEP 503 normalised names", arguments: [
        ("Django", "django"), ("zope.interface", "zope-interface"), ("Foo__Bar-._baz", "foo-bar-baz"),
    ])
    func normalises(_ name: String, _ expected: String) {
        #expect(PyPIFilenames.normalizedProjectName(name) == expected)
    }
}
