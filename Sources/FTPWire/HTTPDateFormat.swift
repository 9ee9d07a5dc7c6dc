/// HTTP's date format for Last-Modified (RFC 9110 §5.6.7), written without a date library.
public enum HTTPDateFormat {
    /// IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`. Times outside years 0–9999 are clamped
    /// to that range, which the format can write.
    public static func imfFixdate(_ seconds: Int64) -> String {
        let f = CivilTime.fields(min(max(seconds, minimum), maximum))
        var out: [UInt8] = []
        out.reserveCapacity(29)
        out += Array(dayNames[f.weekday].utf8)
        out += [0x2C, ftpSP]
        appendTwoDigits(f.day, to: &out)
        out.append(ftpSP)
        out += Array(monthNames[f.month - 1].utf8)
        out.append(ftpSP)
        appendTwoDigits(f.year / 100, to: &out)
        appendTwoDigits(f.year % 100, to: &out)
        out.append(ftpSP)
        appendTwoDigits(f.hour, to: &out)
        out.append(0x3A)
        appendTwoDigits(f.minute, to: &out)
        out.append(0x3A)
        appendTwoDigits(f.second, to: &out)
        out += Array(" GMT".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    /// An IMF-fixdate's seconds, nil for anything else. Only the preferred format: it is what
    /// the gateway writes in `Last-Modified`, so what a cache sends back in `If-Modified-Since`;
    /// a date in another format is simply not evaluated (the whole file is sent, RFC 9110 §13.1.3).
    public static func parseIMFFixdate(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count == 29, bytes[3] == 0x2C, bytes[4] == ftpSP, bytes[7] == ftpSP, bytes[11] == ftpSP,
              bytes[16] == ftpSP, bytes[19] == 0x3A, bytes[22] == 0x3A, bytes[25...].elementsEqual(" GMT".utf8),
              dayNames.contains(where: { $0.utf8.elementsEqual(bytes[0..<3]) }),
              let month = monthNames.firstIndex(where: { $0.utf8.elementsEqual(bytes[8..<11]) }) else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var n = 0
            for b in bytes[range] {
                guard b >= 0x30, b <= 0x39 else { return nil }
                n = n * 10 + Int(b - 0x30)
            }
            return n
        }
        guard let day = number(5..<7), let year = number(12..<16), let hour = number(17..<19),
              let minute = number(20..<22), let second = number(23..<25) else { return nil }
        return CivilTime.seconds(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second)
    }

    private static let minimum: Int64 = -62_167_219_200  // 0000-01-01T00:00:00Z
    private static let maximum: Int64 = 253_402_300_799  // 9999-12-31T23:59:59Z
    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}
