/// The statistics at one moment, summed over workers, ready to be written as JSON or Prometheus text.
public struct StatisticsSnapshot: Sendable {
    public struct Series: Sendable {
        public var label: String
        public var value: Double
    }

    public var metrics: [(metric: Metric, series: [Series])]
    public var version: String

    public static func take(workers: [WorkerStatistics], version: String,
                            sample: (Sample) -> Double) -> StatisticsSnapshot {
        var out: [(metric: Metric, series: [Series])] = []
        for m in Metrics.table {
            var series: [Series] = []
            for s in m.series {
                switch s.source {
                case .count(let c):
                    series.append(Series(label: s.value, value: Double(workers.reduce(0) { $0 &+ $1[c] })))
                case .level(let l):
                    series.append(Series(label: s.value, value: Double(workers.reduce(0) { $0 + $1[l] })))
                case .perWorker(let l, let divisor):
                    for (i, w) in workers.enumerated() {
                        series.append(Series(label: String(i), value: Double(w[l]) / divisor))
                    }
                case .sampled(let sampleID):
                    series.append(Series(label: s.value, value: sample(sampleID)))
                }
            }
            out.append((m, series))
        }
        return StatisticsSnapshot(metrics: out, version: version)
    }

    /// The value of one series (label "" for unlabelled metrics).
    public func value(_ name: String, _ label: String = "") -> Double {
        guard let entry = metrics.first(where: { $0.metric.name == name }) else { return 0 }
        return entry.series.first(where: { $0.label == label })?.value ?? 0
    }

    /// Share of cacheable lookups answered from the cache, and share of body bytes sent from it.
    public var hitRatio: (requests: Double, bytes: Double) {
        let served = value("cache_lookups", "hit") + value("cache_lookups", "stale_served")
            + value("cache_lookups", "revalidated_unchanged")
        let fetched = value("cache_lookups", "miss") + value("cache_lookups", "revalidated_changed")
            + value("cache_lookups", "only_if_cached_miss")
        let fromCache = value("client_bytes", "cache")
        let fromOrigin = value("client_bytes", "origin")
        return (served + fetched > 0 ? served / (served + fetched) : 0,
                fromCache + fromOrigin > 0 ? fromCache / (fromCache + fromOrigin) : 0)
    }

    // MARK: - Prometheus text exposition format 0.0.4

    public func prometheusText() -> String {
        var out = "# HELP larder_build_info Larder's version.\n# TYPE larder_build_info gauge\n"
        out += "larder_build_info{version=\"\(escapeLabel(version))\"} 1\n"
        for (m, series) in metrics {
            let name = m.prometheusName
            out += "# HELP \(name) \(m.help)\n# TYPE \(name) \(m.kind.rawValue)\n"
            for s in series {
                out += name
                if let label = m.label { out += "{\(label)=\"\(escapeLabel(s.label))\"}" }
                out += " " + number(s.value) + "\n"
            }
        }
        return out
    }

    private func escapeLabel(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    // MARK: - JSON

    /// `{"version": …, "<metric>": value or {"<label value>": value, …}, …, "hit_ratio": {…}}`,
    /// keys in table order.
    public func json(extra: String = "") -> String {
        var out = "{\"version\":" + jsonString(version)
        for (m, series) in metrics {
            out += "," + jsonString(m.name) + ":"
            if m.label == nil, series.count == 1 {
                out += number(series[0].value)
            } else {
                out += "{" + series.map { jsonString($0.label) + ":" + number($0.value) }.joined(separator: ",") + "}"
            }
        }
        let ratio = hitRatio
        out += ",\"hit_ratio\":{\"requests\":\(number(ratio.requests)),\"bytes\":\(number(ratio.bytes))}"
        if !extra.isEmpty { out += "," + extra }
        return out + "}"
    }

    private func number(_ v: Double) -> String {
        if v.isNaN || v.isInfinite { return "0" }
        if v == v.rounded(), abs(v) < 9.0e15 { return String(Int64(v)) }
        return String(v)
    }
}

/// A JSON string literal.
public func jsonString(_ s: String) -> String {
    var out = "\""
    for u in s.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if u.value < 0x20 {
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(u)
            }
        }
    }
    return out + "\""
}
