import Testing
import HTTPWire

/// 2023-11-14T22:13:20Z.
private let t0: Int64 = 1_700_000_000

private func withBytes<R>(_ text: String, _ body: (UnsafeRawBufferPointer) -> R) -> R { wire(text).withUnsafeBytes(body) }
private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

struct DateRow: Sendable, CustomTestStringConvertible {
    var name: String
    var input: String
    /// Reference time for two-digit years; nil uses the clock-free overload.
    var now: Int64?
    var expected: Int64?
    var testDescription: String { name }
}

struct FormatRow: Sendable, CustomTestStringConvertible {
    var name: String
    var seconds: Int64
    var expected: String
    var testDescription: String { name }
}

enum DateTable {
    static func row(_ name: String, _ input: String, _ expected: Int64?, now: Int64? = nil) -> DateRow {
        DateRow(name: name, input: input, now: now, expected: expected)
    }

    static let rfcExample: Int64 = 784_111_777  // Sun, 06 Nov 1994 08:49:37 GMT

    static let parse: [DateRow] = [
        row("RFC9110 5.6.7 IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", rfcExample),
        row("RFC9110 5.6.7 RFC 850 date", "Sunday, 06-Nov-94 08:49:37 GMT", rfcExample),
        row("RFC9110 5.6.7 asctime date, single-digit day", "Sun Nov  6 08:49:37 1994", rfcExample),
        row("RFC9110 5.6.7 asctime date, two-digit day", "Wed Nov 16 08:49:37 1994", rfcExample + 864_000),
        row("RFC9110 5.6.7 asctime date, zero-padded day", "Sun Nov 06 08:49:37 1994", rfcExample),
        row("RFC9110 5.6.7 IMF-fixdate the epoch", "Thu, 01 Jan 1970 00:00:00 GMT", 0),
        row("RFC9110 5.6.7 IMF-fixdate t0", "Tue, 14 Nov 2023 22:13:20 GMT", t0),
        row("RFC9110 5.6.7 IMF-fixdate before the epoch", "Wed, 31 Dec 1969 23:59:59 GMT", -1),
        row("RFC9110 5.6.7 leap day 2024", "Thu, 29 Feb 2024 00:00:00 GMT", 1_709_164_800),
        row("RFC9110 5.6.7 leap day 2000 (divisible by 400)", "Tue, 29 Feb 2000 12:00:00 GMT", 951_825_600),
        row("RFC9110 5.6.7 29 Feb 1900 does not exist", "Thu, 29 Feb 1900 00:00:00 GMT", nil),
        row("RFC9110 5.6.7 29 Feb 2023 does not exist", "Wed, 29 Feb 2023 00:00:00 GMT", nil),
        row("RFC9110 5.6.7 31 April does not exist", "Mon, 31 Apr 2023 00:00:00 GMT", nil),
        row("RFC9110 5.6.7 day 00 invalid", "Sun, 00 Nov 1994 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 1 March 2100", "Mon, 01 Mar 2100 00:00:00 GMT", 4_107_542_400),
        row("RFC9110 5.6.7 day of week not checked against the date", "Mon, 06 Nov 1994 08:49:37 GMT", rfcExample),
        row("RFC9110 5.6.7 unknown day name", "Xyz, 06 Nov 1994 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 unknown month", "Sun, 06 Nox 1994 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 names in lowercase accepted", "sun, 06 nov 1994 08:49:37 gmt", rfcExample),
        row("RFC9110 5.6.7 UTC instead of GMT rejected", "Sun, 06 Nov 1994 08:49:37 UTC", nil),
        row("RFC9110 5.6.7 numeric zone rejected", "Sun, 06 Nov 1994 08:49:37 +0000", nil),
        row("RFC9110 5.6.7 hour 24 rejected", "Sun, 06 Nov 1994 24:00:00 GMT", nil),
        row("RFC9110 5.6.7 minute 60 rejected", "Sun, 06 Nov 1994 08:60:00 GMT", nil),
        row("RFC9110 5.6.7 second 60 (leap second) accepted", "Sun, 06 Nov 1994 08:49:60 GMT", rfcExample + 23),
        row("RFC9110 5.6.7 second 61 rejected", "Sun, 06 Nov 1994 08:49:61 GMT", nil),
        row("RFC9110 5.6.7 single-digit day in IMF-fixdate rejected", "Sun, 6 Nov 1994 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 two-digit year in IMF-fixdate rejected", "Sun, 06 Nov 94 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 trailing garbage rejected", "Sun, 06 Nov 1994 08:49:37 GMT x", nil),
        row("RFC9110 5.6.7 leading space rejected", " Sun, 06 Nov 1994 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 missing colon rejected", "Sun, 06 Nov 1994 08:49.37 GMT", nil),
        row("RFC9111 5.3 Expires: 0 is not a date", "0", nil),
        row("RFC9110 5.6.7 empty string", "", nil),
        row("RFC9110 5.6.7 -1 is not a date", "-1", nil),
        row("RFC9110 5.6.7 ISO 8601 rejected", "1994-11-06T08:49:37Z", nil),
        row("RFC9110 5.6.7 RFC 850 with a short day name rejected", "Sun, 06-Nov-94 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 RFC 850 with an unknown long day name", "Funday, 06-Nov-94 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 RFC 850 with a four-digit year rejected", "Sunday, 06-Nov-1994 08:49:37 GMT", nil),
        row("RFC9110 5.6.7 RFC 850 Wednesday (longest name)", "Wednesday, 16-Nov-94 08:49:37 GMT", rfcExample + 864_000),
        row("RFC9110 5.6.7 asctime with a two-digit year rejected", "Sun Nov  6 08:49:37 94", nil),
        row("RFC9110 5.6.7 asctime with GMT appended rejected", "Sun Nov  6 08:49:37 1994 GMT", nil),
        // Two-digit years without a clock: read as if now were 2000.
        row("RFC9110 5.6.7 RFC 850 year 70 without a clock is 1970", "Thursday, 01-Jan-70 00:00:00 GMT", 0),
        row("RFC9110 5.6.7 RFC 850 year 50 without a clock is 2050", "Saturday, 01-Jan-50 00:00:00 GMT", 2_524_608_000),
        row("RFC9110 5.6.7 RFC 850 year 51 without a clock is 1951", "Monday, 01-Jan-51 00:00:00 GMT", -599_616_000),
        // With the clock at t0 (2023): up to 50 years ahead is the future, more is the past century.
        row("RFC9110 5.6.7 RFC 850 year 73 at 2023 is 2073 (50 years ahead)", "Sunday, 01-Jan-73 00:00:00 GMT",
            3_250_454_400, now: t0),
        row("RFC9110 5.6.7 RFC 850 year 74 at 2023 is 1974 (more than 50 years ahead)", "Tuesday, 01-Jan-74 00:00:00 GMT",
            126_230_400, now: t0),
        row("RFC9110 5.6.7 RFC 850 year 23 at 2023 is 2023", "Tuesday, 14-Nov-23 22:13:20 GMT", t0, now: t0),
        row("RFC9110 5.6.7 RFC 850 year 94 at 2023 is 1994", "Sunday, 06-Nov-94 08:49:37 GMT", rfcExample, now: t0),
        row("RFC9110 5.6.7 IMF-fixdate does not depend on the clock", "Sun, 06 Nov 1994 08:49:37 GMT", rfcExample, now: 0),
    ]

    static let format: [FormatRow] = [
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate of the RFC example", seconds: rfcExample,
                  expected: "Sun, 06 Nov 1994 08:49:37 GMT"),
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate of the epoch", seconds: 0, expected: "Thu, 01 Jan 1970 00:00:00 GMT"),
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate of t0", seconds: t0, expected: "Tue, 14 Nov 2023 22:13:20 GMT"),
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate before the epoch", seconds: -1, expected: "Wed, 31 Dec 1969 23:59:59 GMT"),
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate of a leap day", seconds: 1_709_164_800,
                  expected: "Thu, 29 Feb 2024 00:00:00 GMT"),
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate of 1 March 2100", seconds: 4_107_542_400,
                  expected: "Mon, 01 Mar 2100 00:00:00 GMT"),
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate clamps beyond year 9999", seconds: Int64.max,
                  expected: "Fri, 31 Dec 9999 23:59:59 GMT"),
        FormatRow(name: "RFC9110 5.6.7 IMF-fixdate clamps before year 0", seconds: Int64.min,
                  expected: "Sat, 01 Jan 0000 00:00:00 GMT"),
    ]
}

@Suite("HTTPDate")
struct HTTPDateTests {
    @Test("parse", arguments: DateTable.parse)
    func parse(_ row: DateRow) {
        let parsed = withBytes(row.input) { bytes in
            row.now.map { HTTPDate.parse(bytes, now: $0) } ?? HTTPDate.parse(bytes)
        }
        #expect(parsed == row.expected)
        if row.now == nil { #expect(HTTPDate.parse(row.input) == row.expected) }
    }

    @Test("format", arguments: DateTable.format)
    func format(_ row: FormatRow) {
        let formatted = HTTPDate.format(row.seconds)
        #expect(text(formatted) == row.expected)
        #expect(formatted.count == 29)
    }

    @Test("RFC9110 5.6.7 format then parse is the identity",
          arguments: [Int64(0), 1, 59, 86_399, 86_400, 784_111_777, 951_825_600, 1_700_000_000, 4_107_542_400, -86_401])
    func roundTrip(_ seconds: Int64) {
        #expect(HTTPDate.format(seconds).withUnsafeBytes { HTTPDate.parse($0) } == seconds)
    }

    /// Every month and every day name, in both cases, through the word comparison.
    @Test("RFC9110 5.6.7 every month and day name round-trips",
          arguments: (0..<12).map { Int64($0) * 31 * 86_400 } + (1..<7).map { Int64($0) * 86_400 })
    func everyName(_ seconds: Int64) {
        let formatted = HTTPDate.format(seconds)
        #expect(formatted.withUnsafeBytes { HTTPDate.parse($0) } == seconds)
        let upper = formatted.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }
        #expect(upper.withUnsafeBytes { HTTPDate.parse($0) } == seconds)
    }

    /// A byte just below `0` or above `9`, a letter or a space in any place of a digit, in each form,
    /// is not a date: the digits are read without a loop, by an unsigned compare each.
    @Test("RFC9110 5.6.7 a non-digit in any digit's place is rejected")
    func nonDigits() {
        let forms = ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov 16 08:49:37 1994",
                     "Sun Nov  6 08:49:37 1994"]
        for form in forms {
            let bytes = Array(form.utf8)
            #expect(bytes.withUnsafeBytes { HTTPDate.parse($0, now: 1_700_000_000) } != nil, "\(form)")
            for i in bytes.indices where bytes[i] >= 0x30 && bytes[i] <= 0x39 {
                // (asctime pads a one-digit day with a space: `Nov  6` is a date.)
                for bad: UInt8 in [0x2F, 0x3A, 0x61, 0x20, 0x00, 0xB0]
                where !(form.hasSuffix("1994") && i == 8 && bad == 0x20) {
                    var broken = bytes
                    broken[i] = bad
                    #expect(broken.withUnsafeBytes { HTTPDate.parse($0, now: 1_700_000_000) } == nil,
                            "\(form) with byte \(bad) at \(i)")
                }
            }
        }
    }
}
