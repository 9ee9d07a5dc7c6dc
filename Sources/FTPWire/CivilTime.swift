/// UTC calendar arithmetic in the proleptic Gregorian calendar, without a clock or a time zone
/// database: FTP servers state times as UTC fields (MDTM, MLSD) and HTTP wants them as dates.
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

    static let secondsPerDay: Int64 = 86_400

    /// Seconds since the epoch of a UTC date and time, every field range-checked (second 60, a
    /// leap second, allowed); nil for an impossible date.
    static func seconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64? {
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(month, year),
              (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second) else { return nil }
        return daysFromCivil(year, month, day) * secondsPerDay + Int64(hour * 3600 + minute * 60 + second)
    }

    /// The UTC fields of a time in seconds since the epoch.
    static func fields(_ seconds: Int64) -> Fields {
        let days = seconds >= 0 ? seconds / secondsPerDay : -((-seconds + secondsPerDay - 1) / secondsPerDay)
        let secondOfDay = Int(seconds - days * secondsPerDay)
        let (year, month, day) = civilFromDays(days)
        let weekday = Int(((days % 7) + 11) % 7)  // 1970-01-01 was a Thursday (4)
        return Fields(year: year, month: month, day: day, hour: secondOfDay / 3600, minute: secondOfDay / 60 % 60,
                      second: secondOfDay % 60, weekday: weekday)
    }

    /// Days since 1970-01-01 (H. Hinnant's days_from_civil).
    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` after 1970-01-01 (H. Hinnant's civil_from_days).
    static func civilFromDays(_ days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    static func daysInMonth(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
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
