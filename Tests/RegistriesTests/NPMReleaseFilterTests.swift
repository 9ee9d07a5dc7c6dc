import Testing
@testable import Registries

private func filter(_ document: String, _ age: ReleaseAge = sevenDays) throws -> NPMReleaseFilter.Result {
    try NPMReleaseFilter.filter(bytes(document), age: age)
}

@Suite("npm release age")
struct NPMReleaseFilterTests {
    @Test func dropsTooNewVersionsAndTheirTimes() throws {
        let result = try filter(NPMFixtures.packument)
        let filtered = text(result.document)
        try JSONScanner.validate(result.document)
        #expect(result.removed.versions == ["2.0.0-beta.1", "2.0.0"])
        #expect(!filtered.contains("\"2.0.0\": {") && !filtered.contains("\"2.0.0-beta.1\": {"))
        #expect(!filtered.contains("\"2.0.0\": \"2023") && !filtered.contains("\"2.0.0-beta.1\": \"2023"))
        #expect(filtered.contains("\"1.0.0\": {") && filtered.contains("\"1.1.0\": {"))
    }

    /// Everything but the removed members is byte for byte what the registry sent: the expected
    /// document is the fixture rebuilt without them.
    @Test func changesNothingElse() throws {
        let expected = NPMFixtures.packument
            .replacing("    \"latest\": \"2.0.0\",\n    \"next\": \"2.0.0-beta.1\",\n", with: "    \"latest\": \"1.1.0\",\n")
            .replacing(",\n    \"2.0.0-beta.1\": \(NPMFixtures.version("2.0.0-beta.1", shasum: Hashes.c))", with: "")
            .replacing(",\n    \"2.0.0\": \(NPMFixtures.version("2.0.0", shasum: Hashes.d))", with: "")
            .replacing("    \"2.0.0-beta.1\": \"2023-11-10T12:00:00.000Z\",\n    \"2.0.0\": \"2023-11-13T12:00:00.000Z\",\n", with: "")
        #expect(text(try filter(NPMFixtures.packument).document) == expected)
    }

    @Test func movesLatestBackAndRemovesOtherTagsOfDroppedVersions() throws {
        let result = try filter(NPMFixtures.packument)
        #expect(result.distTagChanges == [
            NPMReleaseFilter.DistTagChange(tag: "latest", from: "2.0.0", to: "1.1.0"),
            NPMReleaseFilter.DistTagChange(tag: "next", from: "2.0.0-beta.1", to: nil),
        ])
        #expect(text(result.document).contains("\"dist-tags\": {\n    \"latest\": \"1.1.0\",\n    \"legacy\": \"1.0.0\"\n  }"))
    }

    @Test func reportsTheDroppedTarballs() throws {
        let result = try filter(NPMFixtures.packument)
        #expect(result.removed.files == [
            RemovedVersions.File(filename: "tiny-tool-2.0.0-beta.1.tgz",
                                 url: "https://registry.npmjs.org/tiny-tool/-/tiny-tool-2.0.0-beta.1.tgz",
                                 published: 1_699_617_600),
            RemovedVersions.File(filename: "tiny-tool-2.0.0.tgz", url: "https://registry.npmjs.org/tiny-tool/-/tiny-tool-2.0.0.tgz",
                                 published: 1_699_876_800),
        ])
        #expect(result.removed.summary
            == "removed 2 versions (2.0.0-beta.1, 2.0.0) and 2 files (tiny-tool-2.0.0-beta.1.tgz, tiny-tool-2.0.0.tgz)")
    }

    @Test func keepsTheBetaWhenOnlyTheReleaseIsTooNew() throws {
        let result = try filter(NPMFixtures.packument, ReleaseAge(minimumAge: 2 * day, now: now))
        #expect(result.removed.versions == ["2.0.0"])
        #expect(result.distTagChanges == [NPMReleaseFilter.DistTagChange(tag: "latest", from: "2.0.0", to: "1.1.0")])
        #expect(text(result.document).contains("\"next\": \"2.0.0-beta.1\""))
    }

    @Test func leavesAnOldEnoughDocumentUntouched() throws {
        let result = try filter(NPMFixtures.packument, ReleaseAge(minimumAge: day / 2, now: now))
        #expect(result.document == bytes(NPMFixtures.packument))
        #expect(result.removed.isEmpty && result.distTagChanges.isEmpty)
    }

    @Test func keepsVersionsWithoutAReadableTime() throws {
        let document = #"{"dist-tags":{"latest":"2.0.0"},"versions":{"1.0.0":{},"2.0.0":{}},"time":{"1.0.0":"2023-11-13T00:00:00Z","2.0.0":"soon"}}"#
        let result = try filter(document)
        #expect(text(result.document) == #"{"dist-tags":{"latest":"2.0.0"},"versions":{"2.0.0":{}},"time":{"2.0.0":"soon"}}"#)
    }

    @Test func removesLatestWhenNothingRemains() throws {
        let document = #"{"dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{}},"time":{"1.0.0":"2023-11-13T00:00:00Z"}}"#
        let result = try filter(document)
        #expect(text(result.document) == #"{"dist-tags":{},"versions":{},"time":{}}"#)
        #expect(result.distTagChanges == [NPMReleaseFilter.DistTagChange(tag: "latest", from: "1.0.0", to: nil)])
    }

    @Test func refusesTheAbbreviatedDocument() {
        #expect(throws: RegistryDocumentError.missingMember("time")) { try filter(NPMFixtures.abbreviated) }
    }

    @Test func takesTheLaterOfRepeatedTimes() throws {
        let document = #"{"versions":{"1.0.0":{}},"time":{"1.0.0":"2020-01-01T00:00:00Z","1.0.0":"2023-11-13T00:00:00Z"}}"#
        #expect(try filter(document).removed.versions == ["1.0.0"])
    }

    @Test func refusesHostileDocuments() {
        let truncated = Array(bytes(NPMFixtures.packument).dropLast(3))
        #expect(throws: RegistryDocumentError.json(JSONScanError(reason: .truncated, offset: truncated.count))) {
            try NPMReleaseFilter.filter(truncated, age: sevenDays)
        }
    }

    @Test("latest moves back", arguments: [
        ("2.0.0", ["1.0.0", "1.1.0", "1.2.0-rc.1"], "1.1.0"),
        // Below the dropped one first: a maintainer who kept latest on 1.x meant it.
        ("1.5.0", ["1.4.0", "2.0.0", "1.4.1"], "1.4.1"),
        ("1.0.0", ["2.0.0", "3.0.0"], "3.0.0"),
        ("2.0.0", ["1.0.0-beta.1", "1.0.0-beta.2"], "1.0.0-beta.2"),
        ("not-semver", ["1.0.0", "2.0.0"], "2.0.0"),
        ("2.0.0", ["junk", "1.0.0+build"], "1.0.0+build"),
        ("2.0.0", [], nil),
        ("2.0.0", ["junk"], nil),
    ] as [(String, [String], String?)])
    func latestMovesBack(_ old: String, _ remaining: [String], _ expected: String?) {
        #expect(NPMReleaseFilter.latest(replacing: old, among: remaining) == expected)
    }
}
