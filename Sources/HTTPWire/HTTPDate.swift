/// HTTP dates (RFC 9110 §5.6.7) as seconds since the Unix epoch: IMF-fixdate, and the obsolete
/// RFC 850 and asctime forms on input.
///
/// Month, day names and `GMT` are matched case-insensitively; the day name must be one of the seven
/// but is not checked against the date. Day of month, hours, minutes and seconds are range-checked
/// (second 60, a leap second, is accepted). Anything else is nil.
public enum HTTPDate {
    /// Without a clock, two-digit RFC 850 years are read as if now were 2000-01-01: 00–50 are
    /// 2000–2050, 51–99 are 1951–1999. Callers that know the time use `parse(_:now:)`.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        parse(bytes, referenceYear: { 2000 })
    }

    public static func parse(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { parse(UnsafeRawBufferPointer($0)) }
    }

    /// As `parse(_:)`, reading a two-digit RFC 850 year that would be more than 50 years after `now`
    /// as the most recent past year with those digits (RFC 9110 §5.6.7).
    public static func parse(_ bytes: UnsafeRawBufferPointer, now: Int64) -> Int64? {
        // The year is worked out only for the form that needs it, not for every stored Date.
        parse(bytes, referenceYear: { civil(fromDays: floorDivide(now, secondsPerDay)).year })
    }

    /// IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT` (29 bytes). Times outside years 0–9999 are
    /// clamped to that range.
    public static func format(_ seconds: Int64) -> [UInt8] {
        let clamped = min(max(seconds, minimumFormattable), maximumFormattable)
        let days = floorDivide(clamped, secondsPerDay)
        let secondOfDay = Int(clamped - days * secondsPerDay)
        let date = civil(fromDays: days)
        let weekday = Int((days % 7 + 7 + 4) % 7)  // 1970-01-01 was a Thursday (index 4 from Sunday)
        var out: [UInt8] = []
        out.reserveCapacity(29)
        out.append(contentsOf: dayNames[weekday])
        out.append(asciiComma)
        out.append(asciiSP)
        appendTwoDigits(date.day, to: &out)
        out.append(asciiSP)
        out.append(contentsOf: monthNames[date.month - 1])
        out.append(asciiSP)
        appendTwoDigits(date.year / 100, to: &out)
        appendTwoDigits(date.year % 100, to: &out)
        out.append(asciiSP)
        appendTwoDigits(secondOfDay / 3600, to: &out)
        out.append(asciiColon)
        appendTwoDigits(secondOfDay / 60 % 60, to: &out)
        out.append(asciiColon)
        appendTwoDigits(secondOfDay % 60, to: &out)
        out.append(contentsOf: [asciiSP, 0x47, 0x4D, 0x54])  // " GMT"
        return out
    }

    // MARK: - Parsing

    public static let secondsPerDay: Int64 = 86_400
    private static let minimumFormattable: Int64 = -62_167_219_200  // 0000-01-01T00:00:00Z
    private static let maximumFormattable: Int64 = 253_402_300_799  // 9999-12-31T23:59:59Z

    private static let dayNames: [[UInt8]] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"].map { Array($0.utf8) }
    private static let monthNames: [[UInt8]] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].map { Array($0.utf8) }

    private static func parse(_ p: UnsafeRawBufferPointer, referenceYear: () -> Int) -> Int64? {
        guard p.count >= 24 else { return nil }
        if p[3] == asciiComma { return imfFixdate(p) }
        if p[3] == asciiSP { return asctime(p) }
        return rfc850(p, referenceYear: referenceYear())
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    private static func imfFixdate(_ p: UnsafeRawBufferPointer) -> Int64? {
        guard p.count == 29, isShortDayName(p, 0), p[4] == asciiSP, p[7] == asciiSP, p[11] == asciiSP,
              p[16] == asciiSP, p[25] == asciiSP, equalsIgnoringCase(p, 26, 29, "GMT"),
              let day = digits(p, 5, 2), let month = month(p, 8), let year = digits(p, 12, 4) else { return nil }
        return timestamp(year: year, month: month, day: day, p, timeAt: 17)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`
    private static func rfc850(_ p: UnsafeRawBufferPointer, referenceYear: Int) -> Int64? {
        var comma = 0
        while comma < p.count, comma < 10, p[comma] != asciiComma { comma += 1 }
        guard comma < p.count, isLongDayName(p, 0, comma), p.count - comma == 24 else { return nil }
        let s = comma + 1  // " 06-Nov-94 08:49:37 GMT"
        guard p[s] == asciiSP, p[s + 3] == 0x2D, p[s + 7] == 0x2D, p[s + 10] == asciiSP, p[s + 19] == asciiSP,
              equalsIgnoringCase(p, s + 20, s + 23, "GMT"),
              let day = digits(p, s + 1, 2), let month = month(p, s + 4), let yy = digits(p, s + 8, 2) else { return nil }
        // RFC 9110 §5.6.7: more than 50 years in the future means the previous century.
        var year = referenceYear - referenceYear % 100 + yy
        if year > referenceYear + 50 { year -= 100 } else if year <= referenceYear - 50 { year += 100 }
        return timestamp(year: year, month: month, day: day, p, timeAt: s + 11)
    }

    /// `Sun Nov  6 08:49:37 1994`
    private static func asctime(_ p: UnsafeRawBufferPointer) -> Int64? {
        guard p.count == 24, isShortDayName(p, 0), p[7] == asciiSP, p[10] == asciiSP, p[19] == asciiSP,
              let month = month(p, 4), let year = digits(p, 20, 4) else { return nil }
        let day: Int
        if p[8] == asciiSP, let d = digits(p, 9, 1) {
            day = d
        } else if let d = digits(p, 8, 2) {
            day = d
        } else {
            return nil
        }
        return timestamp(year: year, month: month, day: day, p, timeAt: 11)
    }

    /// Reads `HH:MM:SS` at `t` and combines it with the date, checking every range.
    private static func timestamp(year: Int, month: Int, day: Int, _ p: UnsafeRawBufferPointer, timeAt t: Int) -> Int64? {
        guard p[t + 2] == asciiColon, p[t + 5] == asciiColon,
              let hour = digits(p, t, 2), let minute = digits(p, t + 3, 2), let second = digits(p, t + 6, 2)
        else { return nil }
        return seconds(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    /// Digits read without a loop (a date's are two or four, and every stored response has one):
    /// a byte below `0` wraps around, so one unsigned compare checks each.
    @inline(__always)
    private static func digits(_ p: UnsafeRawBufferPointer, _ start: Int, _ count: Int) -> Int? {
        let a = p[start] &- 0x30
        guard a < 10 else { return nil }
        guard count > 1 else { return Int(a) }
        let b = p[start + 1] &- 0x30
        guard b < 10 else { return nil }
        guard count > 2 else { return Int(a) * 10 + Int(b) }
        precondition(count == 4, "dates have one, two or four digits in a row")
        let c = p[start + 2] &- 0x30, d = p[start + 3] &- 0x30
        guard c < 10, d < 10 else { return nil }
        return Int(a) * 1000 + Int(b) * 100 + Int(c) * 10 + Int(d)
    }

    /// Month number 1–12 of the three letters at `start`.
    /// Compared as three lowercased bytes in one word, in a switch: every stored response's Date is parsed.
    private static func month(_ p: UnsafeRawBufferPointer, _ start: Int) -> Int? {
        switch lowered3(p, start) {
        case 0x6a616e: return 1  // jan
        case 0x666562: return 2  // feb
        case 0x6d6172: return 3  // mar
        case 0x617072: return 4  // apr
        case 0x6d6179: return 5  // may
        case 0x6a756e: return 6  // jun
        case 0x6a756c: return 7  // jul
        case 0x617567: return 8  // aug
        case 0x736570: return 9  // sep
        case 0x6f6374: return 10  // oct
        case 0x6e6f76: return 11  // nov
        case 0x646563: return 12  // dec
        default: return nil
        }
    }

    private static func isShortDayName(_ p: UnsafeRawBufferPointer, _ start: Int) -> Bool {
        dayWords.contains(lowered3(p, start))
    }

    private static func lowered3(_ p: UnsafeRawBufferPointer, _ start: Int) -> UInt32 {
        UInt32(asciiLower(p[start])) << 16 | UInt32(asciiLower(p[start + 1])) << 8 | UInt32(asciiLower(p[start + 2]))
    }

    private static func lowered3(_ name: [UInt8]) -> UInt32 {
        name.withUnsafeBytes { lowered3($0, 0) }
    }

    private static let dayWords: [UInt32] = dayNames.map(lowered3)

    private static let longDayNames: [[UInt8]] = ["sunday", "monday", "tuesday", "wednesday", "thursday",
                                                  "friday", "saturday"].map { Array($0.utf8) }

    private static func isLongDayName(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        longDayNames.contains { equalsLowered(p, start, end, $0) }
    }

    private static func appendTwoDigits(_ value: Int, to out: inout [UInt8]) {
        out.append(0x30 + UInt8(value / 10))
        out.append(0x30 + UInt8(value % 10))
    }

    // MARK: - Civil calendar (proleptic Gregorian; H. Hinnant's days_from_civil / civil_from_days)
    // The one copy of the calendar: HTTP dates here, and the other timestamps the proxy reads and
    // writes (FTP's MDTM and listings, registry documents, the admin endpoint's RFC 3339).

    /// A UTC date and time as seconds since the epoch, every field range-checked (second 60, a
    /// leap second, allowed); nil for an impossible one.
    public static func seconds(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64? {
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(month, year),
              (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second) else { return nil }
        return days(fromCivil: year, month, day) * secondsPerDay + Int64(hour * 3600 + minute * 60 + second)
    }

    public static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    private static func isLeapYear(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    public static func daysInMonth(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01.
    public static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` after 1970-01-01.
    public static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }
}
