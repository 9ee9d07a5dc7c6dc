/// How warm progress reads: sizes, durations, rates, the estimated time left, and the progress
/// line itself. Pure, so the terminal output is table-tested.
public enum WarmFormat {
    /// `512 B`, `1.5 KiB`, `12.3 MiB`, `2.0 GiB`.
    public static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(max(n, 0))
        var unit = 0
        while value >= 1_024, unit < units.count - 1 {
            value /= 1_024
            unit += 1
        }
        if unit == 0 { return "\(Int(value)) B" }
        return fixed(value, places: 1) + " " + units[unit]
    }

    /// `37ms`, `4.2s`, `42s`, `3m05s`, `2h07m`.
    public static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "?" }
        if seconds < 0.9995 { return "\(Int((seconds * 1_000).rounded()))ms" }
        if seconds < 10 { return fixed(seconds, places: 1) + "s" }
        let s = Int(seconds.rounded())
        if s < 60 { return "\(s)s" }
        if s < 3_600 { return "\(s / 60)m" + pad2(s % 60) + "s" }
        return "\(s / 3_600)h" + pad2((s % 3_600) / 60) + "m"
    }

    /// Seconds left at the rate so far; nil before anything is done or when all is.
    public static func eta(done: Int, total: Int, elapsed: Double) -> Double? {
        guard done > 0, total > done, elapsed > 0 else { return nil }
        return elapsed / Double(done) * Double(total - done)
    }

    /// `[ 523/1000]  52%  12.3 MiB  4.1 MiB/s  ETA 3.2s  stored 500 fresh 20 failed 3`
    public static func progressLine(_ t: WarmTally, elapsed: Double) -> String {
        let width = String(t.total).count
        let done = String(t.done)
        let percent = t.total > 0 ? t.done * 100 / t.total : 100
        let rate = elapsed > 0 ? Int64(Double(t.bytes) / elapsed) : 0
        let eta = Self.eta(done: t.done, total: t.total, elapsed: elapsed).map { "ETA " + duration($0) } ?? "ETA -"
        return "[" + String(repeating: " ", count: max(0, width - done.count)) + done + "/\(t.total)] "
            + String(repeating: " ", count: max(0, 3 - String(percent).count)) + "\(percent)%  "
            + bytes(t.bytes) + "  " + bytes(rate) + "/s  " + eta
            + "  stored \(t.stored) fresh \(t.fresh + t.revalidated) not-stored \(t.notStored) failed \(t.failed)"
    }

    static func fixed(_ value: Double, places: Int) -> String {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let scaled = Int64((value * scale).rounded())
        let whole = scaled / Int64(scale)
        let fraction = String(scaled % Int64(scale))
        return "\(whole)." + String(repeating: "0", count: places - fraction.count) + fraction
    }

    private static func pad2(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
}
