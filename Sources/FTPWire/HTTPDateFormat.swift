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

    private static let minimum: Int64 = -62_167_219_200  // 0000-01-01T00:00:00Z
    private static let maximum: Int64 = 253_402_300_799  // 9999-12-31T23:59:59Z
    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}
