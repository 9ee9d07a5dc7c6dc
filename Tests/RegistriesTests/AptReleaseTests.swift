import Testing
@testable import Registries

private func release(_ text: String) throws -> AptRelease {
    try AptRelease(text: bytes(text))
}

/// A plain Release file: a minimal head, then the given lines.
private func releaseFile(_ lines: String...) -> String {
    releaseFile(lines)
}

private func releaseFile(_ lines: [String]) -> String {
    (["Origin: Debian", "Suite: stable"] + lines).joined(separator: "\n") + "\n"
}

@Suite("apt Release files")
struct AptReleaseTests {
    @Test func readsAClearSignedInRelease() throws {
        let parsed = try release(DebianFixtures.inRelease)
        #expect(parsed.suite == "stable" && parsed.codename == "bookworm")
        #expect(parsed.acquireByHash)
        #expect(parsed.date == 1_696_671_771)
        #expect(parsed.validUntil == 1_696_671_771 + 7 * day)
        #expect(parsed.sha256.count == 6)
        #expect(parsed.sha256["main/binary-amd64/Packages.xz"] == AptRelease.FileHash(sha256: Hashes.d, size: 8_786_420))
        #expect(parsed.sha256["main/i18n/Translation-en.bz2"] == AptRelease.FileHash(sha256: Hashes.f, size: 121_456))
        // The MD5Sum list is not read into the SHA-256 one.
        #expect(parsed.sha256["contrib/Contents-all"]?.sha256 == Hashes.a)
    }

    @Test func readsTheSameTextUnsigned() throws {
        let signed = try release(DebianFixtures.inRelease)
        let text = DebianFixtures.inRelease.split(separator: "\n", omittingEmptySubsequences: false)
            .dropFirst(3).prefix { $0 != "-----BEGIN PGP SIGNATURE-----" }.joined(separator: "\n")
        #expect(try release(text) == signed)
        #expect(try release(text.replacing("\n", with: "\r\n")) == signed)
    }

    @Test func undoesDashEscaping() throws {
        let signed = """
            -----BEGIN PGP SIGNED MESSAGE-----
            Hash: SHA256

            Suite: stable
            - Codename: bookworm
            -----BEGIN PGP SIGNATURE-----

            abc
            -----END PGP SIGNATURE-----
            """
        #expect(try release(signed).codename == "bookworm")
    }

    @Test func missingFieldsAreAbsent() throws {
        let parsed = try release("Suite: sid\n")
        #expect(parsed.suite == "sid" && parsed.codename == nil && !parsed.acquireByHash)
        #expect(parsed.date == nil && parsed.validUntil == nil && parsed.sha256.isEmpty)
        #expect(!parsed.isExpired(now: now))
    }

    @Test func expiresAfterValidUntil() throws {
        let parsed = try release(DebianFixtures.inRelease)
        #expect(!parsed.isExpired(now: 1_696_671_771 + 7 * day))
        #expect(parsed.isExpired(now: 1_696_671_771 + 7 * day + 1))
    }

    @Test func toleratesIdenticalDuplicateEntries() throws {
        let parsed = try release(releaseFile("SHA256:", " \(Hashes.a) 10 main/a", " \(Hashes.a) 10 main/a"))
        #expect(parsed.sha256 == ["main/a": AptRelease.FileHash(sha256: Hashes.a, size: 10)])
    }

    @Test func acceptsUppercaseHexAndReadsItLowercase() throws {
        let parsed = try release(releaseFile("SHA256:", " \(Hashes.a.uppercased()) 10 main/a"))
        #expect(parsed.sha256["main/a"]?.sha256 == Hashes.a)
    }

    static let hostile: [(String, String, AptReleaseError)] = [
        ("conflicting duplicate", releaseFile("SHA256:", " \(Hashes.a) 10 main/a", " \(Hashes.b) 10 main/a"),
         .conflictingEntries("main/a")),
        ("duplicate field", releaseFile("Date: Sat, 07 Oct 2023 09:42:51 UTC", "date: Sun, 08 Oct 2023 09:42:51 UTC"),
         .duplicateField("date")),
        ("duplicate SHA256 section", releaseFile("SHA256:", " \(Hashes.a) 10 main/a", "SHA256:"), .duplicateField("SHA256")),
        ("short hash", releaseFile("SHA256:", " abc 10 main/a"), .invalidHashLine("abc 10 main/a")),
        ("size not a number", releaseFile("SHA256:", " \(Hashes.a) -10 main/a"), .invalidHashLine("\(Hashes.a) -10 main/a")),
        ("missing path", releaseFile("SHA256:", " \(Hashes.a) 10"), .invalidHashLine("\(Hashes.a) 10")),
        ("path with ..", releaseFile("SHA256:", " \(Hashes.a) 10 main/../../etc"), .unsafePath("main/../../etc")),
        ("absolute path", releaseFile("SHA256:", " \(Hashes.a) 10 /etc/passwd"), .unsafePath("/etc/passwd")),
        ("bad date", releaseFile("Date: yesterday"), .invalidDate("Date")),
        ("bad Valid-Until", releaseFile("Valid-Until: Sat, 07 Oct 2023"), .invalidDate("Valid-Until")),
        ("line without a colon", releaseFile("Garbage"), .invalidLine("Garbage")),
        ("continuation first", " \(Hashes.a) 10 main/a\n", .invalidLine(" \(Hashes.a) 10 main/a")),
        ("second paragraph", releaseFile("") + "Suite: other\n", .multipleParagraphs),
        ("signature never comes", "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nSuite: stable\n",
         .unterminatedSignedMessage),
        ("huge line", releaseFile("Description: " + String(repeating: "x", count: 20_000)), .lineTooLong),
    ]

    @Test("Hostile Release files", arguments: hostile)
    func refusesHostileText(_ name: String, _ text: String, _ expected: AptReleaseError) {
        #expect(throws: expected, "\(name)") { try release(text) }
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: AptReleaseError.invalidUTF8) { try AptRelease(text: bytes("Suite: ") + [0xFF]) }
    }

    @Test func readsManyEntriesInLinearTime() throws {
        let lines = (0..<10_000).map { " \(Hashes.a) \($0) main/f\($0)" }
        let parsed = try release(releaseFile(["SHA256:"] + lines))
        #expect(parsed.sha256.count == 10_000)
    }

    @Test func mapsIndexesToTheirByHashPaths() throws {
        let parsed = try release(DebianFixtures.inRelease)
        #expect(parsed.byHashPath(for: "main/binary-amd64/Packages.xz") == "main/binary-amd64/by-hash/SHA256/\(Hashes.d)")
        #expect(parsed.byHashPath(for: "main/binary-amd64/Packages.gz") == nil)  // not listed
        var withoutByHash = parsed
        withoutByHash.acquireByHash = false
        #expect(withoutByHash.byHashPath(for: "main/binary-amd64/Packages.xz") == nil)
    }
}

@Suite("apt dists paths")
struct AptDistPathTests {
    @Test("Splits", arguments: [
        ("dists/bookworm/InRelease", "bookworm", "InRelease"),
        ("/dists/bookworm/main/binary-amd64/Packages.xz", "bookworm", "main/binary-amd64/Packages.xz"),
        ("dists/bookworm-updates/main/i18n/Translation-en.bz2", "bookworm-updates", "main/i18n/Translation-en.bz2"),
        ("dists/stretch/updates/main/binary-amd64/Packages", "stretch", "updates/main/binary-amd64/Packages"),
    ])
    func splits(_ path: String, _ suite: String, _ relative: String) throws {
        let split = try #require(AptDistPath(requestPath: path))
        #expect(split.suite == suite && split.relativePath == relative)
        #expect(split.requestPath == String(path.drop { $0 == "/" }))
    }

    @Test("Refuses", arguments: [
        "", "dists", "dists/bookworm", "dists/bookworm/", "pool/main/a/apt/apt_2.6.1_amd64.deb",
        "dists/../etc/passwd", "dists/bookworm/main/../../x", "dists//bookworm/Release", "dists/./bookworm/Release",
    ])
    func refuses(_ path: String) {
        #expect(AptDistPath(requestPath: path) == nil)
    }

    @Test func namesTheByHashTwin() throws {
        let path = try #require(AptDistPath(requestPath: "dists/bookworm/main/binary-amd64/Packages.xz"))
        #expect(path.byHashPath(sha256: Hashes.d).requestPath == "dists/bookworm/main/binary-amd64/by-hash/SHA256/\(Hashes.d)")
        #expect(!path.isByHash && path.byHashPath(sha256: Hashes.d).isByHash)
        let top = AptDistPath(suite: "bookworm", relativePath: "Contents-amd64.gz")
        #expect(top.byHashPath(sha256: Hashes.a).relativePath == "by-hash/SHA256/\(Hashes.a)")
    }
}
