import Testing
@testable import Warming

/// What each answer counts as, from its status and Larder's Cache-Status entry.
@Suite struct WarmOutcomeTests {
    @Test(arguments: [
        (200, "larder; fwd=uri-miss; fwd-status=200; stored; ttl=3600", WarmOutcome.stored),
        (200, "larder; hit; ttl=3599", .fresh),
        (200, "larder; hit; ttl=10; detail=stale-while-revalidate", .fresh),
        (200, "larder; fwd=stale; fwd-status=304; ttl=60; detail=revalidated", .revalidated),
        (200, "larder; fwd=stale; fwd-status=200; ttl=60; detail=revalidated-head", .revalidated),
        (200, "larder; fwd=stale; fwd-status=200; stored; detail=revalidated-head-changed", .stored),
        (200, "larder; fwd=stale; fwd-status=200; detail=revalidated-head-changed", .notStored("revalidated-head-changed")),
        (200, "larder; fwd=uri-miss; fwd-status=200; detail=no-store", .notStored("no-store")),
        (200, "larder; fwd=uri-miss; fwd-status=200; detail=too-large", .notStored("too-large")),
        (200, "larder; fwd=bypass; detail=cache-disabled", .notStored("cache-disabled")),
        (200, "larder; fwd=uri-miss; fwd-status=200", .notStored("not cacheable (fwd=uri-miss)")),
        (200, "larder", .notStored("not cacheable")),
        (301, "larder; fwd=uri-miss; fwd-status=301; stored", .stored),
        (204, "larder; fwd=uri-miss; fwd-status=204; detail=status", .notStored("status")),
    ] as [(Int, String, WarmOutcome)])
    func answers(status: Int, cacheStatus: String, expected: WarmOutcome) {
        #expect(WarmOutcome.classify(status: status, reason: "R", cacheStatus: cacheStatus, cacheName: "larder") == expected)
    }

    @Test func errorsFailWithTheirStatusAndText() {
        #expect(WarmOutcome.classify(status: 404, reason: "Not Found", cacheStatus: "larder; fwd=uri-miss; fwd-status=404")
                == .failed("HTTP 404 Not Found"))
        #expect(WarmOutcome.classify(status: 403, reason: "Forbidden", cacheStatus: nil, errorText: "denied")
                == .failed("HTTP 403 Forbidden: denied"))
        #expect(WarmOutcome.classify(status: 502, reason: "", cacheStatus: nil) == .failed("HTTP 502"))
        #expect(WarmOutcome.classify(status: 100, reason: "Continue", cacheStatus: nil) == .failed("HTTP 100 Continue"))
    }

    @Test func noCacheStatusIsNotStored() {
        #expect(WarmOutcome.classify(status: 200, reason: "OK", cacheStatus: nil) == .notStored("no Cache-Status in the answer"))
        #expect(WarmOutcome.classify(status: 200, reason: "OK", cacheStatus: "  , ;") == .notStored("no Cache-Status in the answer"))
    }

    @Test func theNamedCachesEntryCountsElseTheLast() {
        // An origin's own cache said hit; Larder (nearer the client) stored it.
        let field = "origin-cdn; hit, larder; fwd=uri-miss; stored"
        #expect(WarmOutcome.classify(status: 200, reason: "OK", cacheStatus: field, cacheName: "larder") == .stored)
        #expect(WarmOutcome.classify(status: 200, reason: "OK", cacheStatus: field, cacheName: "origin-cdn") == .fresh)
        #expect(WarmOutcome.classify(status: 200, reason: "OK", cacheStatus: field, cacheName: "other") == .stored)
        #expect(WarmOutcome.classify(status: 200, reason: "OK", cacheStatus: field, cacheName: nil) == .stored)
    }

    @Test func parsesQuotedNamesAndDetails() {
        let entries = CacheStatusEntry.parse("\"my, cache\"; hit; detail=\"a; b, c\"; ttl=5, x")
        #expect(entries.count == 2)
        #expect(entries[0].name == "my, cache")
        #expect(entries[0].has("hit"))
        #expect(entries[0].value("detail") == "a; b, c")
        #expect(entries[0].value("ttl") == "5")
        #expect(entries[1].name == "x")
        #expect(!CacheStatusEntry.parse("c; hit=?0")[0].has("hit"))
    }

    @Test func garbageNeverTraps() {
        for field in ["\"", "\\", ";;;,,,", "\"unterminated; hit", String(repeating: ";=", count: 1_000), "a;=;b=;=c"] {
            _ = CacheStatusEntry.parse(field)
            _ = WarmOutcome.classify(status: 200, reason: "", cacheStatus: field)
        }
    }
}

@Suite struct WarmTallyTests {
    @Test func countsAndSummarises() {
        var t = WarmTally(total: 6)
        t.record(.stored, url: "http://a/1", bytes: 1_000)
        t.record(.stored, url: "http://a/2", bytes: 1_048)
        t.record(.fresh, url: "http://a/3", bytes: 10)
        t.record(.notStored("no-store"), url: "http://a/4")
        t.record(.failed("HTTP 404 Not Found"), url: "http://a/5")
        #expect(t.done == 5 && !t.isComplete)
        t.record(.failed("HTTP 404 Not Found"), url: "http://a/6")
        #expect(t.isComplete)
        #expect(t.bytes == 2_058)
        let summary = t.summary(seconds: 2)
        #expect(summary.hasPrefix("warmed 6 of 6 URLs in 2.0s: 2 stored, 1 already fresh, 0 revalidated, 1 not stored, "
                                  + "2 failed; 2.0 KiB (1.0 KiB/s)\n"))
        #expect(summary.contains("not stored:\n  1 × no-store\n"))
        #expect(summary.contains("failed:\n  2 × HTTP 404 Not Found\n"))
        #expect(summary.contains("  http://a/5: HTTP 404 Not Found\n  http://a/6: HTTP 404 Not Found\n"))
    }

    @Test func reasonsAndExamplesAreBounded() {
        var t = WarmTally(total: 1_000)
        for i in 0..<1_000 { t.record(.failed("reason \(i)"), url: "http://h/\(i)") }
        #expect(t.failed == 1_000)
        #expect(t.failureReasons.count == WarmTally.maxReasons)
        #expect(t.failureReasons.reduce(0) { $0 + $1.count } == 1_000)
        #expect(t.failureReasons.last?.reason == "other reasons")
        #expect(t.failedExamples.count == WarmTally.maxExamples)
        #expect(t.summary(seconds: 1).contains("failed URLs (the first 20):"))
    }

    @Test func jsonEscapes() {
        var t = WarmTally(total: 1)
        t.record(.failed("a \"quoted\"\nline\u{01}"), url: "http://h/\\")
        let json = "{" + t.jsonMembers() + "}"
        #expect(json.contains(#""reason":"a \"quoted\"\nline\u0001""#))
        #expect(json.contains(#""url":"http://h/\\""#))
    }
}

@Suite struct WarmFormatTests {
    @Test(arguments: [(0, "0 B"), (1_023, "1023 B"), (1_024, "1.0 KiB"), (1_536, "1.5 KiB"), (10 << 20, "10.0 MiB"),
                      (Int64(3) << 30, "3.0 GiB"), (-5, "0 B")] as [(Int64, String)])
    func bytes(n: Int64, text: String) {
        #expect(WarmFormat.bytes(n) == text)
    }

    @Test(arguments: [(0, "0ms"), (0.0374, "37ms"), (0.9994, "999ms"), (0.9996, "1.0s"), (4.24, "4.2s"), (9.96, "10.0s"), (42.4, "42s"), (65, "1m05s"), (3_599, "59m59s"),
                      (7_620, "2h07m"), (-1, "?"), (Double.infinity, "?")] as [(Double, String)])
    func duration(seconds: Double, text: String) {
        #expect(WarmFormat.duration(seconds) == text)
    }

    @Test func eta() {
        #expect(WarmFormat.eta(done: 0, total: 10, elapsed: 5) == nil)
        #expect(WarmFormat.eta(done: 10, total: 10, elapsed: 5) == nil)
        #expect(WarmFormat.eta(done: 25, total: 100, elapsed: 10) == 30)
    }

    @Test func progressLine() {
        var t = WarmTally(total: 1_000)
        for i in 0..<250 { t.record(i % 10 == 0 ? .fresh : .stored, url: "u", bytes: 4_096) }
        t.record(.failed("x"), url: "u")
        #expect(WarmFormat.progressLine(t, elapsed: 2) ==
                "[ 251/1000]  25%  1000.0 KiB  500.0 KiB/s  ETA 6.0s  stored 225 fresh 25 not-stored 0 failed 1")
        #expect(WarmFormat.progressLine(WarmTally(total: 0), elapsed: 0) ==
                "[0/0] 100%  0 B  0 B/s  ETA -  stored 0 fresh 0 not-stored 0 failed 0")
    }
}
