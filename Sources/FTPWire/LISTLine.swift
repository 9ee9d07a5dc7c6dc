/// One line of a LIST listing, which RFC 959 leaves to the server: the Unix `ls -l` form most
/// servers write, and the DOS form of Windows servers. Dates are the server's clock read as UTC;
/// no listing says which zone it used.
public enum LISTLine {
    /// The entry a line describes, in either form; nil for anything else (`total 12`, banners,
    /// `.` and `..`), which a listing skips.
    public static func parse(_ line: ArraySlice<UInt8>, now: Int64?) -> FTPListingEntry? {
        unix(line, now: now) ?? dos(line)
    }

    /// `drwxr-xr-x 2 owner group 4096 Jan  2 15:04 name` or `… 4096 Jan  2  2020 name`, the group
    /// column optional. The name is the rest of the line after the blanks that follow the year or
    /// time (so names keep inner and trailing spaces, not leading ones); a link's ` -> target` is cut.
    ///
    /// A date with a time of day has no year: `ls` writes it for the last six months. With `now`
    /// it is the latest year that does not put the date more than a day (time zones) after `now`;
    /// without, the date is unknown.
    public static func unix(_ line: ArraySlice<UInt8>, now: Int64?) -> FTPListingEntry? {
        let fields = blankSeparatedFields(line, limit: 10)
        guard fields.count >= 6, let kind = unixKind(line[fields[0]]) else { return nil }
        for m in 2..<(fields.count - 2) {
            guard let month = monthNumber(line[fields[m]]),
                  let size = decimalValue(line[fields[m - 1]], limit: FTPReply.maxFileSize),
                  let day = decimalValue(line[fields[m + 1]], limit: 31), day >= 1, fields[m + 1].count <= 2,
                  let date = yearOrTime(line[fields[m + 2]]) else { continue }
            var name = Array(line[firstNonBlank(line, from: fields[m + 2].upperBound)...])
            if kind == .link, let arrow = arrowIndex(name) { name.removeSubrange(arrow...) }
            guard !name.isEmpty, name != [0x2E], name != [0x2E, 0x2E] else { return nil }
            let modified: Int64?
            switch date {
            case .year(let year):
                modified = CivilTime.seconds(year: year, month: month, day: day, hour: 0, minute: 0, second: 0)
            case .time(let hour, let minute):
                modified = now.flatMap { recentDate(month: month, day: day, hour: hour, minute: minute, now: $0) }
            }
            return FTPListingEntry(name: name, kind: kind, size: kind == .directory ? nil : size, modified: modified)
        }
        return nil
    }

    /// `01-02-20  03:04PM  <DIR>  name` or `01-02-2020  15:04  1234 name`. Two-digit years below
    /// 70 are 20xx, the others 19xx.
    public static func dos(_ line: ArraySlice<UInt8>) -> FTPListingEntry? {
        let fields = blankSeparatedFields(line, limit: 3)
        guard fields.count == 3 else { return nil }
        let dateParts = line[fields[0]].split(separator: 0x2D, omittingEmptySubsequences: false)
        guard dateParts.count == 3, dateParts[0].count == 2, dateParts[1].count == 2,
              dateParts[2].count == 2 || dateParts[2].count == 4,
              let month = decimalValue(dateParts[0], limit: 12), let day = decimalValue(dateParts[1], limit: 31),
              var year = decimalValue(dateParts[2], limit: 9999),
              let time = dosTime(line[fields[1]]) else { return nil }
        if dateParts[2].count == 2 { year += year < 70 ? 2000 : 1900 }
        let third = line[fields[2]]
        let kind: FTPListingEntry.Kind
        let size: Int?
        if equalsIgnoringCase(third, "<dir>") {
            kind = .directory
            size = nil
        } else if let bytes = decimalValue(third, limit: FTPReply.maxFileSize) {
            kind = .file
            size = bytes
        } else {
            return nil
        }
        let name = Array(line[firstNonBlank(line, from: fields[2].upperBound)...])
        guard !name.isEmpty, name != [0x2E], name != [0x2E, 0x2E] else { return nil }
        let modified = CivilTime.seconds(year: year, month: month, day: day, hour: time.hour, minute: time.minute, second: 0)
        return FTPListingEntry(name: name, kind: kind, size: size, modified: modified)
    }

    // MARK: - Pieces

    private enum DateEnd {
        case year(Int)
        case time(hour: Int, minute: Int)
    }

    /// The ranges of the first `limit` blank-separated fields.
    private static func blankSeparatedFields(_ line: ArraySlice<UInt8>, limit: Int) -> [Range<Int>] {
        var fields: [Range<Int>] = []
        var k = line.startIndex
        while fields.count < limit {
            k = firstNonBlank(line, from: k)
            guard k < line.endIndex else { break }
            let start = k
            while k < line.endIndex, line[k] != ftpSP, line[k] != ftpHTAB { k += 1 }
            fields.append(start..<k)
        }
        return fields
    }

    private static func firstNonBlank(_ line: ArraySlice<UInt8>, from start: Int) -> Int {
        var k = start
        while k < line.endIndex, line[k] == ftpSP || line[k] == ftpHTAB { k += 1 }
        return k
    }

    /// The kind a mode string's first letter gives (`-rw-r--r--`, `drwxr-xr-x`, `lrwxrwxrwx`, and
    /// devices, pipes and sockets as other); nil when the field is not a mode string.
    private static func unixKind(_ mode: ArraySlice<UInt8>) -> FTPListingEntry.Kind? {
        guard mode.count >= 10,
              mode.dropFirst().prefix(9).allSatisfy({ Array("rwxsStTl-".utf8).contains($0) }) else { return nil }
        switch mode.first {
        case 0x2D: return .file  // -
        case 0x64: return .directory  // d
        case 0x6C: return .link  // l
        case 0x62, 0x63, 0x70, 0x73: return .other  // b c p s
        default: return nil
        }
    }

    /// 1...12 for an English month abbreviation, any case.
    private static func monthNumber(_ field: ArraySlice<UInt8>) -> Int? {
        guard field.count == 3 else { return nil }
        for (index, name) in CivilTime.monthNames.enumerated() where equalsIgnoringCase(field, name) {
            return index + 1
        }
        return nil
    }

    /// `2020` or `15:04` (the hour may have one digit).
    private static func yearOrTime(_ field: ArraySlice<UInt8>) -> DateEnd? {
        if field.count == 4, let year = decimalValue(field, limit: 9999) { return .year(year) }
        guard let colon = field.firstIndex(of: 0x3A), colon - field.startIndex <= 2, field.endIndex - colon == 3,
              let hour = decimalValue(field[field.startIndex..<colon], limit: 23),
              let minute = decimalValue(field[(colon + 1)...], limit: 59) else { return nil }
        return .time(hour: hour, minute: minute)
    }

    /// `03:04PM`, `03:04AM` or `15:04`: hour and minute on a 24-hour clock.
    private static func dosTime(_ field: ArraySlice<UInt8>) -> (hour: Int, minute: Int)? {
        var clock = field
        var afternoon: Bool?
        if clock.count > 2 {
            let suffix = clock.suffix(2)
            if equalsIgnoringCase(suffix, "am") { afternoon = false }
            if equalsIgnoringCase(suffix, "pm") { afternoon = true }
            if afternoon != nil { clock = clock.dropLast(2) }
        }
        guard let colon = clock.firstIndex(of: 0x3A), colon - clock.startIndex <= 2, clock.endIndex - colon == 3,
              var hour = decimalValue(clock[clock.startIndex..<colon], limit: 23),
              let minute = decimalValue(clock[(colon + 1)...], limit: 59) else { return nil }
        if let afternoon {
            guard (1...12).contains(hour) else { return nil }
            hour = hour % 12 + (afternoon ? 12 : 0)
        }
        return (hour, minute)
    }

    /// Where ` -> ` starts in a link's name.
    private static func arrowIndex(_ name: [UInt8]) -> Int? {
        guard name.count >= 4 else { return nil }
        return (0...(name.count - 4)).first { name[$0] == ftpSP && name[$0 + 1] == 0x2D && name[$0 + 2] == 0x3E && name[$0 + 3] == ftpSP }
    }

    /// A date without a year, in the latest year that keeps it no more than a day after `now`.
    private static func recentDate(month: Int, day: Int, hour: Int, minute: Int, now: Int64) -> Int64? {
        let year = CivilTime.fields(now).year
        for candidate in [year, year - 1] {
            if let time = CivilTime.seconds(year: candidate, month: month, day: day, hour: hour, minute: minute, second: 0),
               time <= now + CivilTime.secondsPerDay {
                return time
            }
        }
        return nil
    }
}
