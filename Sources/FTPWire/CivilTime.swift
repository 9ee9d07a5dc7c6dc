import HTTPWire

/// UTC times as FTP servers state them (MDTM, MLSD, LIST), on HTTPWire's calendar (`HTTPDate`):
/// no clock, no time zone database.
enum CivilTime {
    /// A date and time broken into fields.
    struct Fields: Equatable {
        var year: Int
        var month: Int
        var day: Int
        var hour: Int
        var minute: Int
        var second: Int
        /// 0 for Sunday … 6 for Saturday.
        var weekday: Int
    }

    static let secondsPerDay = HTTPDate.secondsPerDay
    static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the epoch of a UTC date and time, every field range-checked (second 60, a
    /// leap second, allowed); nil for an impossible date.
    static func seconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64? {
        HTTPDate.seconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    /// The UTC fields of a time in seconds since the epoch.
    static func fields(_ seconds: Int64) -> Fields {
        let days = HTTPDate.floorDivide(seconds, secondsPerDay)
        let secondOfDay = Int(seconds - days * secondsPerDay)
        let (year, month, day) = HTTPDate.civil(fromDays: days)
        let weekday = Int(((days % 7) + 11) % 7)  // 1970-01-01 was a Thursday (4)
        return Fields(year: year, month: month, day: day, hour: secondOfDay / 3600, minute: secondOfDay / 60 % 60,
                      second: secondOfDay % 60, weekday: weekday)
    }

    /// `YYYYMMDDHHMMSS` with an optional `.fraction` (RFC 3659 §2.3 `time-val`), as MDTM and MLSD's
    /// `modify` fact write it, in whole seconds (the fraction dropped). Nil for anything else,
    /// including the `19100…` years of servers that once printed `tm_year` after "19".
    static func timeVal(_ bytes: ArraySlice<UInt8>) -> Int64? {
        guard bytes.count >= 14 else { return nil }
        let s = bytes.startIndex
        if bytes.count > 14 {
            guard bytes[s + 14] == 0x2E, bytes.count > 15, bytes[(s + 15)...].allSatisfy(isDecimal) else { return nil }
        }
        guard let year = decimalValue(bytes[s..<(s + 4)], limit: 9999),
              let month = decimalValue(bytes[(s + 4)..<(s + 6)], limit: 99),
              let day = decimalValue(bytes[(s + 6)..<(s + 8)], limit: 99),
              let hour = decimalValue(bytes[(s + 8)..<(s + 10)], limit: 99),
              let minute = decimalValue(bytes[(s + 10)..<(s + 12)], limit: 99),
              let second = decimalValue(bytes[(s + 12)..<(s + 14)], limit: 99) else { return nil }
        return seconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }
}
