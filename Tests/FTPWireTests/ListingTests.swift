import Testing
import FTPWire

/// The fixed "now" of listing tests: Tue, 14 Nov 2023 22:13:20 GMT.
let listingNow: Int64 = 1_700_000_000

struct ListingLineRow: Sendable, CustomTestStringConvertible {
    var line: String
    /// Name, kind, size, modified; nil when the line is skipped.
    var entry: FTPListingEntry?
    var testDescription: String { line }
}

func row(_ line: String, _ name: String, _ kind: FTPListingEntry.Kind, size: Int? = nil, modified: Int64? = nil) -> ListingLineRow {
    ListingLineRow(line: line, entry: FTPListingEntry(name: wire(name), kind: kind, size: size, modified: modified))
}

func skipped(_ line: String) -> ListingLineRow { ListingLineRow(line: line, entry: nil) }

@Suite("Listings")
struct ListingTests {
    static let mlsd: [ListingLineRow] = [
        row("type=file;size=123;modify=20200101120000;perm=r; file.txt", "file.txt", .file, size: 123, modified: 1_577_880_000),
        row("Type=DIR;Modify=20200101120000.5; pub", "pub", .directory, modified: 1_577_880_000),
        row("type=file;size=5; name with  spaces ", "name with  spaces ", .file, size: 5),
        row("type=file; semi;colon=in name", "semi;colon=in name", .file),
        row("size=7;type=file;unknown.fact=x; a", "a", .file, size: 7),
        row("type=OS.unix=slink:/srv/target; link", "link", .link),
        row("type=OS.unix=symlink; link2", "link2", .link),
        row("type=special; fifo", "fifo", .other),
        row("size=1; untyped", "untyped", .other, size: 1),
        row("type=file;size=12x;modify=20231399000000; bad facts", "bad facts", .file),
        row("; no facts", "no facts", .other),
        skipped("type=cdir;modify=20200101120000; /pub"),
        skipped("type=pdir; .."),
        skipped("type=file; ."),
        skipped("type=file;size=1;no-space"),
        skipped("type=file;size=1; "),
        skipped(""),
    ]

    @Test("MLSD lines", arguments: mlsd)
    func mlsdLines(_ row: ListingLineRow) {
        #expect(MLSDLine.parse(wire(row.line)[...]) == row.entry)
    }

    static let list: [ListingLineRow] = [
        row("-rw-r--r--    1 ftp      ftp        123456 Jan 02  2020 file.tar.gz", "file.tar.gz", .file, size: 123_456,
            modified: 1_577_923_200),
        row("drwxr-xr-x    2 ftp      ftp          4096 Mar 15 10:30 pub", "pub", .directory, modified: 1_678_876_200),
        row("-rw-r--r--    1 ftp      ftp            10 Nov 14 22:00 today", "today", .file, size: 10, modified: 1_699_999_200),
        // In the future of "now" by more than a day: last year.
        row("-rw-r--r--    1 ftp      ftp            10 Dec 25 08:00 christmas", "christmas", .file, size: 10,
            modified: 1_671_955_200),
        row("-rw-r--r--    1 ftp      ftp            10 Nov 15 20:00 tomorrow", "tomorrow", .file, size: 10,
            modified: 1_700_078_400),
        row("lrwxrwxrwx    1 ftp      ftp             7 Jan  1  2021 latest -> v1.2.3", "latest", .link, size: 7,
            modified: 1_609_459_200),
        row("-rw-r--r--    1 ftp      ftp             3 Jan  1  2021 a name with  spaces.txt", "a name with  spaces.txt",
            .file, size: 3, modified: 1_609_459_200),
        row("-rw-r--r--    1 owner       3 Jan  1  2021 no-group", "no-group", .file, size: 3, modified: 1_609_459_200),
        row("-rw-r--r--+   1 Jan      staff          3 Jan  1  2021 owner named Jan", "owner named Jan", .file, size: 3,
            modified: 1_609_459_200),
        row("-rw-r--r--    1 1000     1000     4294967296 Feb 29  2024 big.iso", "big.iso", .file, size: 4_294_967_296,
            modified: 1_709_164_800),
        row("crw-rw-rw-    1 root     root            0 Jan  1  2021 null", "null", .other, size: 0, modified: 1_609_459_200),
        row("-rw-r--r--    1 ftp      ftp             1 JAN  1  2021 upper", "upper", .file, size: 1, modified: 1_609_459_200),
        row("01-02-20  03:04PM       <DIR>          Program Files", "Program Files", .directory, modified: 1_577_977_440),
        row("12-31-99  11:59AM                 1234 old.txt", "old.txt", .file, size: 1234, modified: 946_641_540),
        row("01-02-2020  12:00AM     5 midnight.txt", "midnight.txt", .file, size: 5, modified: 1_577_923_200),
        row("01-02-2020  12:30PM     5 noon.txt", "noon.txt", .file, size: 5, modified: 1_577_968_200),
        row("01-02-2020  15:04     5 24h.txt", "24h.txt", .file, size: 5, modified: 1_577_977_440),
        skipped("total 1234"),
        skipped("drwxr-xr-x    2 ftp      ftp          4096 Mar 15 10:30 ."),
        skipped("drwxr-xr-x    2 ftp      ftp          4096 Mar 15 10:30 .."),
        skipped("drwxr-xr-x    2 ftp      ftp          4096 Mar 15 10:30"),
        skipped("xrwxr-xr-x    2 ftp      ftp          4096 Mar 15 10:30 bad-mode"),
        skipped("-rw-r--r--    1 ftp      ftp          big Mar 15 10:30 bad-size"),
        skipped("-rw-r--r--    1 ftp      ftp          1 Mar 32 10:30 bad-day"),
        skipped("-rw-r--r--    1 ftp      ftp          1 Foo 15 10:30 bad-month"),
        skipped("-rw-r--r--    1 ftp      ftp          1 Jan 31 25:00 bad-time"),
        skipped("13-02-20  03:04PM       <DIR>          bad month"),
        skipped("01-02-20  13:04PM       <DIR>          bad hour"),
        skipped("01-02-20  03:04PM       <FILE>         bad kind"),
        skipped("Welcome to the archive"),
        skipped(""),
    ]

    @Test("LIST lines (Unix and DOS)", arguments: list)
    func listLines(_ row: ListingLineRow) {
        #expect(LISTLine.parse(wire(row.line)[...], now: listingNow) == row.entry)
    }

    @Test("a time of day without a clock leaves the date unknown")
    func noClock() {
        let entry = LISTLine.parse(wire("-rw-r--r-- 1 ftp ftp 10 Nov 14 22:00 today")[...], now: nil)
        #expect(entry == FTPListingEntry(name: wire("today"), kind: .file, size: 10, modified: nil))
    }

    static let listing = "-rw-r--r-- 1 ftp ftp 5 Jan  1  2021 a.txt\r\n" + "total 3\r\n"
        + "drwxr-xr-x 2 ftp ftp 4096 Jan  1  2021 dir\r\n" + "garbage line\n" + "-rw-r--r-- 1 ftp ftp 7 Jan  1  2021 last"
    static let listingEntries = [
        FTPListingEntry(name: wire("a.txt"), kind: .file, size: 5, modified: 1_609_459_200),
        FTPListingEntry(name: wire("dir"), kind: .directory, modified: 1_609_459_200),
        FTPListingEntry(name: wire("last"), kind: .file, size: 7, modified: 1_609_459_200),
    ]

    @Test("the streaming parser gives the same entries however the bytes are split")
    func streamingSplits() {
        let bytes = wire(Self.listing)
        for cut in 0...bytes.count {
            var parser = FTPListingParser(format: .list)
            parser.feed(Array(bytes[..<cut]))
            parser.feed(Array(bytes[cut...]))
            parser.finish()
            #expect(parser.entries == Self.listingEntries, "split at \(cut)")
            #expect(!parser.isTruncated)
        }
        var byByte = FTPListingParser(format: .list)
        for b in bytes { byByte.feed([b]) }
        byByte.finish()
        #expect(byByte.entries == Self.listingEntries)
    }

    @Test("MLSD through the streaming parser")
    func streamingMLSD() {
        var parser = FTPListingParser(format: .mlsd)
        parser.feed(wire("type=cdir; /pub\r\ntype=file;size=3; x\r\ntype=dir; y\r\n"))
        parser.finish()
        #expect(parser.entries == [FTPListingEntry(name: wire("x"), kind: .file, size: 3),
                                   FTPListingEntry(name: wire("y"), kind: .directory)])
    }

    @Test("more entries than the bound: truncated, the rest ignored")
    func maxEntries() {
        var parser = FTPListingParser(format: .mlsd, maxEntries: 2)
        parser.feed(wire("type=file; a\r\ntype=file; b\r\n"))
        #expect(parser.entries.count == 2 && !parser.isTruncated)
        parser.feed(wire("type=file; c\r\ntype=file; d\r\n"))
        #expect(parser.entries.map(\.name) == [wire("a"), wire("b")])
        #expect(parser.isTruncated)
        parser.feed(wire("type=file; e\r\n"))
        parser.finish()
        #expect(parser.entries.count == 2)
    }

    @Test("exactly the bound of entries is not truncated")
    func exactlyMaxEntries() {
        var parser = FTPListingParser(format: .mlsd, maxEntries: 2)
        parser.feed(wire("type=file; a\r\ntype=file; b\r\ntype=cdir; .\r\n"))
        parser.finish()
        #expect(parser.entries.count == 2 && !parser.isTruncated)
    }

    @Test("a line over the bound truncates, also before its end arrives")
    func maxLineBytes() {
        var parser = FTPListingParser(format: .mlsd, maxLineBytes: 16)
        parser.feed(wire("type=file; a\r\n"))
        parser.feed(wire("type=file; " + String(repeating: "x", count: 10)))
        #expect(parser.isTruncated)
        #expect(parser.entries.map(\.name) == [wire("a")])

        var exact = FTPListingParser(format: .mlsd, maxLineBytes: 16)
        exact.feed(wire("type=file; 12345\r\n"))  // 16 bytes and CRLF
        exact.finish()
        #expect(!exact.isTruncated && exact.entries.map(\.name) == [wire("12345")])
    }

    @Test("an endless listing stops at maxBytes")
    func maxBytes() {
        var parser = FTPListingParser(format: .mlsd, maxBytes: 1_000)
        for _ in 0..<10_000 { parser.feed(wire("type=file; name\r\n")) }
        #expect(parser.isTruncated)
        #expect(parser.entries.count == 1_000 / 17)
    }
}
