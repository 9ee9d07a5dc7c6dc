import Testing
import FTPWire

@Suite("FTPListingPage")
struct FTPListingPageTests {
    static let entries = [
        FTPListingEntry(name: wire("b.txt"), kind: .file, size: 1234, modified: 1_577_880_000),
        FTPListingEntry(name: wire("sub"), kind: .directory, modified: 1_609_459_200),
        FTPListingEntry(name: wire("a.txt"), kind: .file, size: 0),
        FTPListingEntry(name: wire("Zdir"), kind: .directory),
        FTPListingEntry(name: wire("latest"), kind: .link),
    ]

    @Test("a whole page")
    func wholePage() {
        let page = text(FTPListingPage.render(url: url("ftp://user:pw@Host:2121/pub/"), entries: Self.entries, truncated: false))
        #expect(page == """
            <!DOCTYPE html>
            <html>
            <head>
            <meta charset="utf-8">
            <title>Index of /pub/</title>
            </head>
            <body>
            <h1>Index of /pub/</h1>
            <table>
            <tr><th>Name</th><th>Size</th><th>Modified</th></tr>
            <tr><td><a href="ftp://host:2121/">Parent directory</a></td><td></td><td></td></tr>
            <tr><td><a href="ftp://host:2121/pub/Zdir/">Zdir/</a></td><td></td><td></td></tr>
            <tr><td><a href="ftp://host:2121/pub/sub/">sub/</a></td><td></td><td>2021-01-01 00:00</td></tr>
            <tr><td><a href="ftp://host:2121/pub/a.txt">a.txt</a></td><td>0</td><td></td></tr>
            <tr><td><a href="ftp://host:2121/pub/b.txt">b.txt</a></td><td>1234</td><td>2020-01-01 12:00</td></tr>
            <tr><td><a href="ftp://host:2121/pub/latest">latest</a></td><td></td><td></td></tr>
            </table>
            </body>
            </html>

            """)
    }

    @Test("the login directory has no parent link; a truncated listing says so")
    func rootAndTruncated() {
        let page = text(FTPListingPage.render(url: url("ftp://host/"), entries: [Self.entries[0]], truncated: true))
        #expect(page.contains("<title>Index of /</title>"))
        #expect(!page.contains("Parent directory"))
        #expect(page.contains("<a href=\"ftp://host/b.txt\">b.txt</a>"))
        #expect(page.contains("<p>The listing was cut short: only its first 1 entries are shown.</p>"))
    }

    @Test("hostile names are escaped in text and encoded in links", arguments: [
        ("<script>alert(1)</script>", "%3Cscript%3Ealert(1)%3C%2Fscript%3E", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("a\"onmouseover=\"x", "a%22onmouseover=%22x", "a&quot;onmouseover=&quot;x"),
        ("it's", "it%27s", "it&#39;s"),
        ("100%", "100%25", "100%"),
        ("a b", "a%20b", "a b"),
        ("#frag", "%23frag", "#frag"),
        ("q?x=1&y=2", "q%3Fx=1&amp;y=2", "q?x=1&amp;y=2"),
        ("semi;type=d", "semi%3Btype=d", "semi;type=d"),
        ("\u{1B}[31mred", "%1B%5B31mred", "\u{FFFD}[31mred"),
    ])
    func hostileNames(_ name: String, _ href: String, _ shown: String) {
        let entry = FTPListingEntry(name: wire(name), kind: .file)
        let page = text(FTPListingPage.render(url: url("ftp://host/d/"), entries: [entry], truncated: false))
        #expect(page.contains("<a href=\"ftp://host/d/\(href)\">\(shown)</a>"), "\(page)")
    }

    @Test("names that are not UTF-8 are shown with replacement characters and linked byte for byte")
    func notUTF8() {
        let entry = FTPListingEntry(name: [0x61, 0xE9, 0x62], kind: .file)  // Latin-1 "aéb"
        let page = text(FTPListingPage.render(url: url("ftp://host/"), entries: [entry], truncated: false))
        #expect(page.contains("<a href=\"ftp://host/a%E9b\">a\u{FFFD}b</a>"))
    }

    @Test("the title is escaped too")
    func title() {
        let page = text(FTPListingPage.render(url: url("ftp://host/%3Cb%3E/"), entries: [], truncated: false))
        #expect(page.contains("<title>Index of /&lt;b&gt;/</title>"))
        #expect(page.contains("<a href=\"ftp://host/\">Parent directory</a>"))
    }

    @Test("credentials never reach the page")
    func noCredentials() {
        let page = text(FTPListingPage.render(url: url("ftp://secretuser:secretpass@host/d/"), entries: Self.entries,
                                              truncated: false))
        #expect(!page.contains("secret"))
    }
}

@Suite("FTPStatusMapping and ContentTypes")
struct MappingTests {
    @Test("reply codes to HTTP statuses", arguments: [
        (550, 404), (530, 401), (532, 401), (421, 502), (425, 502), (426, 502), (450, 503), (451, 503), (452, 503),
        (552, 502), (553, 502), (500, 502), (501, 502), (502, 502), (504, 502), (226, 502), (150, 502), (331, 502),
    ])
    func statuses(_ code: Int, _ status: Int) {
        #expect(FTPStatusMapping.status(forReplyCode: code).code == status)
    }

    @Test("the error body is the server's text, without controls, bounded")
    func body() {
        let reply = FTPReply(code: 550, lines: [wire("No such file\u{7}"), wire("really")])
        #expect(text(FTPStatusMapping.body(for: reply)) == "550 No such file\nreally\n")
        let huge = FTPReply(550, String(repeating: "x", count: 100_000))
        #expect(FTPStatusMapping.body(for: huge, maxBytes: 100).count == 101)
    }

    @Test("media types by extension", arguments: [
        ("README.txt", "text/plain"), ("index.HTML", "text/html"), ("a.htm", "text/html"), ("s.css", "text/css"),
        ("x.js", "text/javascript"), ("d.json", "application/json"), ("f.xml", "application/xml"),
        ("linux.tar.gz", "application/gzip"), ("a.tgz", "application/gzip"), ("a.bz2", "application/x-bzip2"),
        ("a.xz", "application/x-xz"), ("a.zst", "application/zstd"), ("a.zip", "application/zip"),
        ("a.tar", "application/x-tar"), ("debian.iso", "application/x-iso9660-image"), ("disk.img", "application/octet-stream"),
        ("fw.bin", "application/octet-stream"), ("pkg.deb", "application/vnd.debian.binary-package"),
        ("pkg.rpm", "application/x-rpm"), ("doc.pdf", "application/pdf"), ("i.png", "image/png"), ("i.JPG", "image/jpeg"),
        ("i.jpeg", "image/jpeg"), ("i.gif", "image/gif"), ("i.svg", "image/svg+xml"), ("README.md", "text/markdown"),
        ("main.c", "text/plain"), ("main.h", "text/plain"), ("x.sig", "application/pgp-signature"),
        ("x.asc", "application/pgp-signature"), ("SHA256SUMS.sha256", "text/plain"),
        ("Makefile", "application/octet-stream"), ("archive.", "application/octet-stream"),
        ("name.unknownext", "application/octet-stream"), (".hidden", "application/octet-stream"),
    ])
    func mediaTypes(_ name: String, _ type: String) {
        #expect(ContentTypes.mediaType(forName: wire(name)) == type)
    }
}
