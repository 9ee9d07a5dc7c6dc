import Testing
@testable import Registries

@Suite("Release age of package files")
struct ReleaseAgeTests {
    @Test func cutoffIsNowMinusTheAge() {
        #expect(sevenDays.cutoff == now - 7 * day)
        #expect(sevenDays.isOldEnough(published: now - 7 * day))
        #expect(!sevenDays.isOldEnough(published: now - 7 * day + 1))
    }

    @Test("Last-Modified verdicts", arguments: [
        ("Sun, 15 Oct 2023 22:13:20 GMT", FileAgeVerdict.allowed),  // 30 days old
        ("Tue, 07 Nov 2023 22:13:20 GMT", .allowed),  // exactly 7 days
        ("Tue, 07 Nov 2023 22:13:21 GMT", .refused(
            reason: "published 6 days 23 hours ago; this mirror serves files at least 7 days old (min_release_age)")),
        ("Sun, 12 Nov 2023 22:13:20 GMT", .refused(
            reason: "published 2 days ago; this mirror serves files at least 7 days old (min_release_age)")),
        ("Tue, 14 Nov 2023 22:12:50 GMT", .refused(
            reason: "published 30 seconds ago; this mirror serves files at least 7 days old (min_release_age)")),
        // A clock ahead of ours: as new as can be.
        ("Wed, 15 Nov 2023 22:13:20 GMT", .refused(
            reason: "published 0 seconds ago; this mirror serves files at least 7 days old (min_release_age)")),
        // RFC 850 and asctime forms are HTTP-dates too (RFC 9110 §5.6.7).
        ("Sunday, 12-Nov-23 22:13:20 GMT", .refused(
            reason: "published 2 days ago; this mirror serves files at least 7 days old (min_release_age)")),
        ("Sun Oct 15 22:13:20 2023", .allowed),
        ("yesterday", .undated),
        ("", .undated),
        ("2023-11-12T22:13:20Z", .undated),
    ])
    func judgesLastModified(_ header: String, _ expected: FileAgeVerdict) {
        #expect(sevenDays.verdict(lastModified: header) == expected)
    }

    @Test func noLastModifiedIsUndated() {
        #expect(sevenDays.verdict(lastModified: nil) == .undated)
    }

    @Test("Durations", arguments: [
        (0, "0 seconds"), (1, "1 second"), (59, "59 seconds"), (60, "1 minute"), (3_661, "1 hour 1 minute"),
        (86_400, "1 day"), (2 * 86_400, "2 days"), (7 * 86_400 - 1, "6 days 23 hours"),
        (2 * 86_400 + 300, "2 days"), (36 * 3_600, "1 day 12 hours"), (-5, "0 seconds"),
    ] as [(Int64, String)])
    func describesDurations(_ seconds: Int64, _ expected: String) {
        #expect(DurationText.describe(seconds) == expected)
    }

    @Test func summarisesRemovals() {
        #expect(RemovedVersions().summary == "removed nothing")
        let removed = RemovedVersions(versions: ["2.0.0"], files: [
            RemovedVersions.File(filename: "a-2.0.0.tar.gz", url: "u", published: nil),
            RemovedVersions.File(filename: "a-2.0.0-py3-none-any.whl", url: "v", published: nil),
        ])
        #expect(removed.summary == "removed 1 version (2.0.0) and 2 files (a-2.0.0.tar.gz, a-2.0.0-py3-none-any.whl)")
        let many = RemovedVersions(versions: (1...12).map { "1.0.\($0)" })
        #expect(many.summary == "removed 12 versions (1.0.1, 1.0.2, 1.0.3, 1.0.4, 1.0.5, 1.0.6, 1.0.7, 1.0.8, 1.0.9, 1.0.10, and 2 more)")
    }
}

@Suite("Registry timestamps")
struct TimestampsTests {
    @Test("RFC 3339", arguments: [
        ("2023-11-14T22:13:20Z", now),
        ("2023-11-14T22:13:20.123456Z", now),
        ("2023-11-14t22:13:20.5z", now),
        ("2023-11-14 22:13:20Z", now),
        ("2023-11-14T23:13:20+01:00", now),
        ("2023-11-14T20:13:20-02:00", now),
        ("1970-01-01T00:00:00Z", 0),
        ("2024-02-29T00:00:00Z", 1_709_164_800),
        ("2016-12-31T23:59:60Z", 1_483_228_800),
    ] as [(String, Int64)])
    func readsRFC3339(_ text: String, _ expected: Int64) {
        #expect(Timestamps.rfc3339(text) == expected)
    }

    @Test("Not RFC 3339", arguments: [
        "", "2023-11-14", "2023-11-14T22:13:20", "2023-11-14T22:13:20.Z", "2023-13-14T22:13:20Z",
        "2023-02-29T00:00:00Z", "2023-11-14T24:00:00Z", "2023-11-14T22:13:20+0100", "2023-11-14T22:13:20 Z",
        "Tue, 14 Nov 2023 22:13:20 GMT", "2023-11-14T22:13:20ZZ", "２０23-11-14T22:13:20Z",
    ])
    func refusesOthers(_ text: String) {
        #expect(Timestamps.rfc3339(text) == nil)
    }

    @Test("apt dates", arguments: [
        ("Tue, 14 Nov 2023 22:13:20 UTC", now),
        ("Tue, 14 Nov 2023 22:13:20 GMT", now),
        ("14 Nov 2023 22:13:20 UTC", now),
        ("Tue,  14 Nov 2023 22:13:20 +0000", now),
        ("Tue, 14 Nov 2023 23:13:20 +0100", now),
        ("Sat, 7 Oct 2023 09:42:51 UTC", 1_696_671_771),
    ] as [(String, Int64)])
    func readsAptDates(_ text: String, _ expected: Int64) {
        #expect(Timestamps.rfc2822(text) == expected)
    }

    @Test("Not apt dates", arguments: [
        "", "Tue, 14 Nov 2023", "Tue, 14 Nov 2023 22:13:20", "Tue, 14 Foo 2023 22:13:20 UTC",
        "Tue, 31 Nov 2023 22:13:20 UTC", "Tue, 14 Nov 23 22:13:20 UTC", "Tue, 14 Nov 2023 22:13 UTC",
        "Tue, 14 Nov 2023 22:13:20 CET",
    ])
    func refusesOtherAptDates(_ text: String) {
        #expect(Timestamps.rfc2822(text) == nil)
    }
}
