import Foundation
import Testing
@testable import Statistics

@Suite struct StatisticsTests {
    @Test func everyCounterAndLevelFeedsExactlyOneSeries() {
        var counts: [Count: Int] = [:]
        var levels: [Level: Int] = [:]
        var samples: [Sample: Int] = [:]
        for m in Metrics.table {
            for s in m.series {
                switch s.source {
                case .count(let c): counts[c, default: 0] += 1
                case .level(let l), .perWorker(let l, _): levels[l, default: 0] += 1
                case .sampled(let x): samples[x, default: 0] += 1
                }
            }
        }
        for c in Count.allCases { #expect(counts[c] == 1, "\(c)") }
        for l in Level.allCases { #expect(levels[l] == 1, "\(l)") }
        for x in Sample.allCases { #expect(samples[x] == 1, "\(x)") }
    }

    @Test func namesFollowPrometheusConventions() {
        var seen: Set<String> = []
        for m in Metrics.table {
            #expect(seen.insert(m.name).inserted, "duplicate \(m.name)")
            #expect(m.name.allSatisfy { $0.isLowercase || $0 == "_" || $0.isNumber }, "\(m.name)")
            #expect(!m.name.hasSuffix("_total"), "the suffix is added for counters: \(m.name)")
            #expect(m.prometheusName.hasPrefix("larder_"))
            #expect((m.kind == .counter) == m.prometheusName.hasSuffix("_total"))
            #expect((m.label == nil) == (m.series.count == 1 && m.series[0].value.isEmpty) || m.name == "loop_lag_seconds")
        }
    }

    @Test func countsFromEveryWorkerAreSummed() {
        let a = WorkerStatistics()
        let b = WorkerStatistics()
        a.add(.lookupHit, 3)
        b.add(.lookupHit)
        b.add(.lookupMiss, 4)
        a.add(.clientBytesFromCache, 300)
        b.add(.clientBytesFromOrigin, 100)
        a.set(.loopLagMicroseconds, 1500)
        b.set(.loopLagMicroseconds, 20)
        a.set(.clientConnectionsOpen, 2)
        b.set(.clientConnectionsOpen, 5)
        let snap = StatisticsSnapshot.take(workers: [a, b], version: "1.2.3") { $0 == .diskBytes ? 4096 : 0 }
        #expect(snap.value("cache_lookups", "hit") == 4)
        #expect(snap.value("cache_lookups", "miss") == 4)
        #expect(snap.value("client_connections_open") == 7)
        #expect(snap.value("cache_bytes", "disk") == 4096)
        #expect(snap.value("loop_lag_seconds", "0") == 0.0015)
        #expect(snap.value("loop_lag_seconds", "1") == 0.00002)
        #expect(snap.hitRatio.requests == 0.5)
        #expect(snap.hitRatio.bytes == 0.75)
    }

    @Test func prometheusTextHasHelpTypeAndOneSamplePerSeries() {
        let w = WorkerStatistics()
        w.add(.requestGET, 2)
        let text = StatisticsSnapshot.take(workers: [w], version: "v\"1") { _ in 1 }.prometheusText()
        #expect(text.contains("larder_build_info{version=\"v\\\"1\"} 1\n"))
        #expect(text.contains("# TYPE larder_requests_total counter\n"))
        #expect(text.contains("larder_requests_total{method=\"GET\"} 2\n"))
        #expect(text.contains("larder_cache_bytes{tier=\"memory\"} 1\n"))
        #expect(text.contains("larder_loop_lag_seconds{worker=\"0\"} 0\n"))
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            #expect(parts.count == 2, "\(line)")
            #expect(Double(parts[1]) != nil, "\(line)")
        }
    }

    @Test func jsonParsesAndNestsLabelledSeries() throws {
        let w = WorkerStatistics()
        w.add(.lookupPass, 9)
        let json = StatisticsSnapshot.take(workers: [w], version: "x") { _ in 0.5 }.json()
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["version"] as? String == "x")
        #expect((object["cache_lookups"] as? [String: Any])?["pass"] as? Int == 9)
        #expect(object["lmdb_map_size_bytes"] as? Double == 0.5)
        #expect((object["hit_ratio"] as? [String: Any])?["requests"] as? Int == 0)
    }

    /// The README lists every metric: the table is the documentation's source too.
    @Test func readmeDocumentsEveryMetric() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        for m in Metrics.table {
            #expect(text.contains("`\(m.prometheusName)`"), "README lacks \(m.prometheusName)")
        }
    }
}
