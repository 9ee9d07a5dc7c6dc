import Testing
@testable import FTPWire
import HTTPWire

/// 192.0.2.10, the control connection's peer in these tests.
let controlAddress: UInt32 = 0xC000_020A

@Suite("Values in replies: PASV, EPSV, SIZE, MDTM")
struct ReplyValueTests {
    @Test("227 gives the port, and whether the named host was another", arguments: [
        ("Entering Passive Mode (192,0,2,10,4,1)", 1025, false),
        ("Entering Passive Mode (10,0,0,5,4,1)", 1025, true),  // another host: only the port is used
        ("Entering Passive Mode 192,0,2,10,255,255", 65_535, false),  // no parentheses
        ("=192,0,2,10,0,21", 21, false),
        ("Entering Passive Mode (127,0,0,1,0,22).", 22, true),  // a bounce toward the proxy's own services
        ("Mode 1,2 then (192,0,2,10,8,0)", 2048, false),  // the first six numbers in a row
        ("Entering Passive Mode (0,0,0,0,31,64)", 8000, true),
    ])
    func pasv(_ text: String, _ port: Int, _ otherHost: Bool) {
        let passive = FTPReply(227, text).passivePort(controlIPv4: controlAddress)
        #expect(passive == PassivePort(port: port, namedOtherHost: otherHost))
    }

    @Test("227 without a comparison address never says another host")
    func pasvWithoutAddress() {
        #expect(FTPReply(227, "(10,0,0,5,4,1)").passivePort(controlIPv4: nil) == PassivePort(port: 1025, namedOtherHost: false))
    }

    @Test("227 refuses", arguments: [
        "Entering Passive Mode (192,0,2,10,4)",  // five numbers
        "Entering Passive Mode (192,0,2,256,4,1)",  // a number over 255
        "Entering Passive Mode (192,0,2,10,4,1000)",
        "Entering Passive Mode (192,0,2,10,0,0)",  // port 0
        "Entering Passive Mode (192, 0, 2, 10, 4, 1)",  // spaces break the run
        "Entering Passive Mode (0192,0,2,10,4,1)",  // four digits
        "Entering Passive Mode",
        "",
    ])
    func pasvRefuses(_ text: String) {
        #expect(FTPReply(227, text).passivePort(controlIPv4: controlAddress) == nil)
    }

    @Test("only a 227 is read as PASV, only a 229 as EPSV")
    func wrongCodes() {
        #expect(FTPReply(200, "(192,0,2,10,4,1)").passivePort(controlIPv4: nil) == nil)
        #expect(FTPReply(200, "(|||6446|)").extendedPassivePort == nil)
    }

    @Test("229 gives the port", arguments: [
        ("Entering Extended Passive Mode (|||6446|)", 6446),
        ("Entering Extended Passive Mode (!!!1!)", 1),
        ("Entering Extended Passive Mode (~~~65535~)", 65_535),
        ("Extended (odd) text (|||2121|)", 2121),  // the first well-formed parenthesis
        ("(|||21|) trailing text", 21),
    ])
    func epsv(_ text: String, _ port: Int) {
        #expect(FTPReply(229, text).extendedPassivePort == port)
    }

    @Test("229 refuses", arguments: [
        "Entering Extended Passive Mode (|||0|)",
        "Entering Extended Passive Mode (|||65536|)",
        "Entering Extended Passive Mode (|||123456|)",
        "Entering Extended Passive Mode (|||6446!)",  // delimiters differ
        "Entering Extended Passive Mode (||!6446|)",
        "Entering Extended Passive Mode (|1|192.0.2.9|6446|)",  // a host is never taken
        "Entering Extended Passive Mode (111644611)",  // a digit as delimiter
        "Entering Extended Passive Mode (   6446 )",  // space is not a delimiter
        "Entering Extended Passive Mode (|||6446|",
        "Entering Extended Passive Mode (||||)",
        "Entering Extended Passive Mode |||6446|",
    ])
    func epsvRefuses(_ text: String) {
        #expect(FTPReply(229, text).extendedPassivePort == nil)
    }

    @Test("SIZE", arguments: [
        ("213 0", 0), ("213 12345", 12_345), ("213 0000012", 12), ("213  42 ", 42),
        ("213 9007199254740992", 9_007_199_254_740_992),  // 2^53
    ] as [(String, Int)])
    func size(_ line: String, _ size: Int) throws {
        let reply = try #require(parseOne(line))
        #expect(reply.fileSize == size)
    }

    @Test("SIZE refuses", arguments: [
        "213 9007199254740993", "213 99999999999999999999999", "213 -1", "213 +5", "213 1.5", "213 12 bytes", "213 0x10",
        "213", "213 ", "550 12", "200 12",
    ])
    func sizeRefuses(_ line: String) throws {
        let reply = try #require(parseOne(line))
        #expect(reply.fileSize == nil)
    }

    @Test("MDTM", arguments: [
        ("213 19700101000000", 0),
        ("213 20200101120000", 1_577_880_000),
        ("213 20240229235959", 1_709_251_199),  // a leap day
        ("213 20231114221320.123", 1_700_000_000),  // the fraction is dropped
        ("213 20231114221320.9", 1_700_000_000),
        ("213 19691231235959", -1),
        ("213 20161231235960", 1_483_228_800),  // a leap second
    ] as [(String, Int64)])
    func mdtm(_ line: String, _ seconds: Int64) throws {
        let reply = try #require(parseOne(line))
        #expect(reply.modificationTime == seconds)
    }

    @Test("MDTM refuses", arguments: [
        "213 191000101000000",  // year 19100
        "213 20230229120000",  // no 29 February in 2023
        "213 20231301120000", "213 20231100120000", "213 20231131120000", "213 20231114241320", "213 20231114226020",
        "213 20231114221361", "213 2023111422132", "213 20231114221320.", "213 20231114221320Z", "213 2023-11-14 22:13:20",
        "550 20231114221320",
    ])
    func mdtmRefuses(_ line: String) throws {
        let reply = try #require(parseOne(line))
        #expect(reply.modificationTime == nil)
    }

    @Test("IMF-fixdate", arguments: [
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (1_700_000_000, "Tue, 14 Nov 2023 22:13:20 GMT"),
        (1_709_251_199, "Thu, 29 Feb 2024 23:59:59 GMT"),
        (-1, "Wed, 31 Dec 1969 23:59:59 GMT"),
        (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (4_102_444_800, "Fri, 01 Jan 2100 00:00:00 GMT"),
        (-62_167_219_200, "Sat, 01 Jan 0000 00:00:00 GMT"),
        (-99_999_999_999_999, "Sat, 01 Jan 0000 00:00:00 GMT"),  // clamped
        (253_402_300_799, "Fri, 31 Dec 9999 23:59:59 GMT"),
        (999_999_999_999_999, "Fri, 31 Dec 9999 23:59:59 GMT"),  // clamped
    ] as [(Int64, String)])
    func httpDate(_ seconds: Int64, _ formatted: String) {
        #expect(String(decoding: HTTPDate.format(seconds), as: UTF8.self) == formatted)
    }
}

@Suite("Calendar arithmetic")
struct CivilTimeTests {
    @Test("days and dates round-trip from 1600 to 2400, weekdays in step")
    func roundTrip() {
        var weekday = CivilTime.fields(HTTPDate.days(fromCivil: 1600, 1, 1) * 86_400).weekday
        for days in HTTPDate.days(fromCivil: 1600, 1, 1)...HTTPDate.days(fromCivil: 2400, 12, 31) {
            let date = HTTPDate.civil(fromDays: days)
            #expect(HTTPDate.days(fromCivil: date.year, date.month, date.day) == days)
            let fields = CivilTime.fields(days * 86_400 + 3_723)
            #expect(fields.year == date.year && fields.month == date.month && fields.day == date.day)
            #expect(fields.hour == 1 && fields.minute == 2 && fields.second == 3)
            #expect(fields.weekday == weekday)
            weekday = (weekday + 1) % 7
        }
    }

    @Test("impossible dates are refused", arguments: [
        (2023, 2, 29), (1900, 2, 29), (2023, 4, 31), (2023, 0, 1), (2023, 13, 1), (2023, 1, 0), (2023, 1, 32),
    ])
    func impossible(_ year: Int, _ month: Int, _ day: Int) {
        #expect(CivilTime.seconds(year: year, month: month, day: day, hour: 0, minute: 0, second: 0) == nil)
    }

    @Test("leap days that exist")
    func leapDays() {
        #expect(CivilTime.seconds(year: 2000, month: 2, day: 29, hour: 0, minute: 0, second: 0) == 951_782_400)
        #expect(CivilTime.seconds(year: 2024, month: 2, day: 29, hour: 0, minute: 0, second: 0) == 1_709_164_800)
    }
}
