import HTTPWire

/// The date formats registries publish, read as whole seconds since the Unix epoch (fractions of a
/// second dropped): registry documents' ISO 8601 times and apt's RFC 2822 dates.
enum Timestamps {
    /// RFC 3339 (the ISO 8601 profile both PEP 700's `upload-time` and npm's `time` use), e.g.
    /// `2023-11-14T22:13:20.123456Z` or `2023-11-14T23:13:20+01:00`; `t`, `z` and a space for `T`
    /// are accepted. Nil for anything else.
    static func rfc3339(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
              bytes[10] | 0x20 == UInt8(ascii: "t") || bytes[10] == UInt8(ascii: " "),
              bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
              let year = number(bytes, 0, 4), let month = number(bytes, 5, 2), let day = number(bytes, 8, 2),
              let hour = number(bytes, 11, 2), let minute = number(bytes, 14, 2), let second = number(bytes, 17, 2),
              let local = seconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        else { return nil }
        var i = 19
        if bytes[i] == UInt8(ascii: ".") {
            i += 1
            let digitsStart = i
            while i < bytes.count, isDecimalDigit(bytes[i]) { i += 1 }
            guard i > digitsStart, i < bytes.count else { return nil }
        }
        guard let offset = zoneOffset(bytes[i...]) else { return nil }
        return local - offset
    }

    /// `Z`, or `+hh:mm` / `-hh:mm`: seconds east of UTC.
    private static func zoneOffset(_ zone: ArraySlice<UInt8>) -> Int64? {
        let bytes = Array(zone)
        if bytes.count == 1, bytes[0] | 0x20 == UInt8(ascii: "z") { return 0 }
        guard bytes.count == 6, bytes[3] == UInt8(ascii: ":"),
              bytes[0] == UInt8(ascii: "+") || bytes[0] == UInt8(ascii: "-"),
              let hours = number(bytes, 1, 2), let minutes = number(bytes, 4, 2), hours < 24, minutes < 60 else { return nil }
        let offset = Int64(hours * 3600 + minutes * 60)
        return bytes[0] == UInt8(ascii: "-") ? -offset : offset
    }

    /// The `Date` and `Valid-Until` of an apt Release file: RFC 2822 as dpkg and apt write it,
    /// `Sat, 10 Feb 2024 09:50:40 UTC`. The day name is optional, the day may have one digit,
    /// and the zone is `UTC`, `GMT`, `UT`, `Z` or `±hhmm`.
    static func rfc2822(_ text: String) -> Int64? {
        var words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        if let first = words.first, first.hasSuffix(",") { words.removeFirst() }
        guard words.count == 5, let day = Int(words[0]), words[0].count <= 2,
              let month = monthNames.firstIndex(of: words[1].lowercased()), let year = Int(words[2]), words[2].count == 4
        else { return nil }
        let time = words[3].split(separator: ":", omittingEmptySubsequences: false)
        guard time.count == 3, time.allSatisfy({ $0.count == 2 }),
              let hour = Int(time[0]), let minute = Int(time[1]), let second = Int(time[2]),
              let offset = rfc2822Zone(words[4]),
              let local = seconds(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second)
        else { return nil }
        return local - offset
    }

    private static let monthNames = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    private static func rfc2822Zone(_ zone: String) -> Int64? {
        switch zone.uppercased() {
        case "UTC", "GMT", "UT", "Z": return 0
        default:
            let bytes = Array(zone.utf8)
            guard bytes.count == 5, bytes[0] == UInt8(ascii: "+") || bytes[0] == UInt8(ascii: "-"),
                  let hours = number(bytes, 1, 2), let minutes = number(bytes, 3, 2), hours < 24, minutes < 60
            else { return nil }
            let offset = Int64(hours * 3600 + minutes * 60)
            return bytes[0] == UInt8(ascii: "-") ? -offset : offset
        }
    }

    // MARK: - Calendar

    static func seconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64? {
        HTTPDate.seconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    /// `count` decimal digits at `start`, or nil.
    private static func number(_ bytes: [UInt8], _ start: Int, _ count: Int) -> Int? {
        guard start + count <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[start..<(start + count)] {
            guard isDecimalDigit(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }
}
