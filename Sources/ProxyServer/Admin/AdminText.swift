import HTTPWire

/// Small text formats the admin endpoint reads and writes: RFC 3339 times and URL queries.
enum RFC3339 {
    /// Seconds since the epoch for `2026-11-23T01:02:03Z`, `…T01:02:03.5+01:00` and the like.
    static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func digits(_ at: Int, _ n: Int) -> Int? {
            guard at + n <= b.count else { return nil }
            var v = 0
            for i in at..<at + n {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                v = v * 10 + Int(b[i] - 0x30)
            }
            return v
        }
        guard b.count >= 20, let year = digits(0, 4), b[4] == 0x2D, let month = digits(5, 2), b[7] == 0x2D,
              let day = digits(8, 2), b[10] == 0x54 || b[10] == 0x74 || b[10] == 0x20,
              let hour = digits(11, 2), b[13] == 0x3A, let minute = digits(14, 2), b[16] == 0x3A,
              let second = digits(17, 2),
              let local = HTTPDate.seconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        else { return nil }
        var i = 19
        if i < b.count, b[i] == 0x2E {
            i += 1
            let start = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
            guard i > start else { return nil }
        }
        guard i < b.count else { return nil }
        var offset = 0
        if b[i] == 0x5A || b[i] == 0x7A {
            i += 1
        } else if b[i] == 0x2B || b[i] == 0x2D, let oh = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == 0x3A,
                  let om = digits(i + 4, 2), oh < 24, om < 60 {
            offset = (oh * 3600 + om * 60) * (b[i] == 0x2B ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        return local - Int64(offset)
    }

    /// `2026-11-23T01:02:03Z` for seconds since the epoch.
    static func format(_ time: Int64) -> String {
        let days = Int(time >= 0 ? time / 86_400 : (time - 86_399) / 86_400)
        let secs = Int(time - Int64(days) * 86_400)
        let (y, m, d) = civilFromDays(days)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(y)-\(two(m))-\(two(d))T\(two(secs / 3600)):\(two(secs / 60 % 60)):\(two(secs % 60))Z"
    }

    /// The date `days` after 1970-01-01 (HTTPWire's calendar).
    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let date = HTTPDate.civil(fromDays: Int64(days))
        return (date.year, date.month, date.day)
    }
}

/// A request target's path and decoded query parameters.
struct AdminTarget {
    var path: String
    var query: [(name: String, value: String)]

    init(_ target: String) {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        path = String(parts[0])
        query = []
        guard parts.count == 2 else { return }
        for pair in parts[1].split(separator: "&") where !pair.isEmpty {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            query.append((AdminTarget.decode(kv[0]), kv.count == 2 ? AdminTarget.decode(kv[1]) : ""))
        }
    }

    func value(_ name: String) -> String? { query.first { $0.name == name }?.value }

    /// `target` as it may be logged: the value of every `token` parameter (the admin token, which a
    /// browser opening the dashboard puts in the URL) replaced, however the name is cased or encoded.
    static func redacted(_ target: String) -> String {
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return target }
        let pairs = parts[1].split(separator: "&", omittingEmptySubsequences: false).map { pair -> Substring in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            return decode(name).lowercased() == "token" ? name + "=REDACTED" : pair
        }
        return parts[0] + "?" + pairs.joined(separator: "&")
    }

    /// Percent-decoding, `+` as space (form encoding, which curl's --data-urlencode also produces).
    static func decode(_ s: Substring) -> String {
        var out: [UInt8] = []
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == 0x25, i + 2 < b.count, let h = hex(b[i + 1]), let l = hex(b[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(b[i] == 0x2B ? 0x20 : b[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x37
        case 0x61...0x66: return c - 0x57
        default: return nil
        }
    }
}
