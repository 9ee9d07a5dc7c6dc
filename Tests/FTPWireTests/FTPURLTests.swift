import Testing
import FTPWire

struct URLRow: Sendable, CustomTestStringConvertible {
    var target: String
    var user: String?
    var password: String?
    var host: String
    var port: Int = 21
    var segments: [String]
    var isDirectory: Bool
    var typeCode: FTPURL.TypeCode?
    var commandPath: String
    var displayPath: String
    var withoutCredentials: String

    var testDescription: String { target }
}

@Suite("FTPURL")
struct FTPURLTests {
    static let valid: [URLRow] = [
        URLRow(target: "ftp://ftp.example.org/pub/file.txt", host: "ftp.example.org", segments: ["pub", "file.txt"],
               isDirectory: false, commandPath: "pub/file.txt", displayPath: "/pub/file.txt",
               withoutCredentials: "ftp://ftp.example.org/pub/file.txt"),
        URLRow(target: "FTP://FTP.Example.ORG:21/Pub/", host: "ftp.example.org", segments: ["Pub"], isDirectory: true,
               commandPath: "Pub", displayPath: "/Pub/", withoutCredentials: "ftp://ftp.example.org/Pub/"),
        URLRow(target: "ftp://host", host: "host", segments: [], isDirectory: true, commandPath: "", displayPath: "/",
               withoutCredentials: "ftp://host/"),
        URLRow(target: "ftp://host/", host: "host", segments: [], isDirectory: true, commandPath: "", displayPath: "/",
               withoutCredentials: "ftp://host/"),
        URLRow(target: "ftp://alice:s%3Acret%40x@host:2121/a%20b/c", user: "alice", password: "s:cret@x", host: "host",
               port: 2121, segments: ["a b", "c"], isDirectory: false, commandPath: "a b/c", displayPath: "/a b/c",
               withoutCredentials: "ftp://host:2121/a%20b/c"),
        URLRow(target: "ftp://bob@host/x", user: "bob", host: "host", segments: ["x"], isDirectory: false,
               commandPath: "x", displayPath: "/x", withoutCredentials: "ftp://host/x"),
        URLRow(target: "ftp://bob:@host/x", user: "bob", password: "", host: "host", segments: ["x"], isDirectory: false,
               commandPath: "x", displayPath: "/x", withoutCredentials: "ftp://host/x"),
        URLRow(target: "ftp://192.0.2.7/x", host: "192.0.2.7", segments: ["x"], isDirectory: false, commandPath: "x",
               displayPath: "/x", withoutCredentials: "ftp://192.0.2.7/x"),
        URLRow(target: "ftp://[2001:DB8::1]:990/x", host: "2001:db8::1", port: 990, segments: ["x"], isDirectory: false,
               commandPath: "x", displayPath: "/x", withoutCredentials: "ftp://[2001:db8::1]:990/x"),
        URLRow(target: "ftp://[::ffff:192.0.2.1]/", host: "::ffff:192.0.2.1", segments: [], isDirectory: true,
               commandPath: "", displayPath: "/", withoutCredentials: "ftp://[::ffff:192.0.2.1]/"),
        URLRow(target: "ftp://host:/x", host: "host", segments: ["x"], isDirectory: false, commandPath: "x",
               displayPath: "/x", withoutCredentials: "ftp://host/x"),
        // RFC 1738: %2F makes the path absolute.
        URLRow(target: "ftp://host/%2Fetc/motd", host: "host", segments: ["/etc", "motd"], isDirectory: false,
               commandPath: "/etc/motd", displayPath: "//etc/motd", withoutCredentials: "ftp://host/%2Fetc/motd"),
        URLRow(target: "ftp://host/pub;type=d", host: "host", segments: ["pub"], isDirectory: true, typeCode: .directory,
               commandPath: "pub", displayPath: "/pub/", withoutCredentials: "ftp://host/pub/"),
        URLRow(target: "ftp://host/f.txt;type=a", host: "host", segments: ["f.txt"], isDirectory: false, typeCode: .ascii,
               commandPath: "f.txt", displayPath: "/f.txt", withoutCredentials: "ftp://host/f.txt"),
        URLRow(target: "ftp://host/f.iso;TYPE=I", host: "host", segments: ["f.iso"], isDirectory: false, typeCode: .image,
               commandPath: "f.iso", displayPath: "/f.iso", withoutCredentials: "ftp://host/f.iso"),
        URLRow(target: "ftp://host/dir/;type=d", host: "host", segments: ["dir"], isDirectory: true, typeCode: .directory,
               commandPath: "dir", displayPath: "/dir/", withoutCredentials: "ftp://host/dir/"),
        URLRow(target: "ftp://host/a;b=c", host: "host", segments: ["a;b=c"], isDirectory: false, commandPath: "a;b=c",
               displayPath: "/a;b=c", withoutCredentials: "ftp://host/a%3Bb=c"),
        URLRow(target: "ftp://host/~user/%7Ex", host: "host", segments: ["~user", "~x"], isDirectory: false,
               commandPath: "~user/~x", displayPath: "/~user/~x", withoutCredentials: "ftp://host/~user/~x"),
        URLRow(target: "ftp://host/a//b", host: "host", segments: ["a", "", "b"], isDirectory: false,
               commandPath: "a//b", displayPath: "/a//b", withoutCredentials: "ftp://host/a//b"),
        URLRow(target: "ftp://host/caf%C3%A9/%25%23%3F%22", host: "host", segments: ["caf\u{00E9}", "%#?\""],
               isDirectory: false, commandPath: "caf\u{00E9}/%#?\"", displayPath: "/caf\u{00E9}/%#?\"",
               withoutCredentials: "ftp://host/caf%C3%A9/%25%23%3F%22"),
        URLRow(target: "ftp://host/[x]{y}", host: "host", segments: ["[x]{y}"], isDirectory: false, commandPath: "[x]{y}",
               displayPath: "/[x]{y}", withoutCredentials: "ftp://host/%5Bx%5D%7By%7D"),
    ]

    @Test("parses", arguments: valid)
    func parses(_ row: URLRow) throws {
        let parsed = try #require(FTPURL(row.target))
        #expect(parsed.user.map(text) == row.user)
        #expect(parsed.password.map(text) == row.password)
        #expect(text(parsed.host) == row.host)
        #expect(parsed.port == row.port)
        #expect(parsed.segments.map(text) == row.segments)
        #expect(parsed.isDirectory == row.isDirectory)
        #expect(parsed.typeCode == row.typeCode)
        #expect(text(parsed.commandPath) == row.commandPath)
        #expect(text(parsed.displayPath) == row.displayPath)
        #expect(parsed.withoutCredentials == row.withoutCredentials)
    }

    @Test("the spelling without credentials parses back to the same place", arguments: valid)
    func canonicalRoundTrip(_ row: URLRow) throws {
        let parsed = try #require(FTPURL(row.target))
        let again = try #require(FTPURL(parsed.withoutCredentials))
        #expect(again.user == nil && again.password == nil)
        #expect(again.host == parsed.host && again.port == parsed.port)
        #expect(again.segments == parsed.segments && again.isDirectory == parsed.isDirectory)
        #expect(again.withoutCredentials == parsed.withoutCredentials)
    }

    @Test("refuses", arguments: [
        "http://host/x", "ftp:/host/x", "ftp://", "ftp:///x", "ftps://host/x", "ftp://host/x#frag", "ftp://host/x?y",
        "ftp://host/a b", "ftp://host/a\tb", "ftp://host/caf\u{00E9}", "ftp://a@b@host/x", "ftp://@host/x", "ftp://:pw@host/x",
        "ftp://host:0/x", "ftp://host:65536/x", "ftp://host:99999999/x", "ftp://host:2x/x", "ftp://ho%41st/x",
        "ftp://ho$t/x", "ftp://[::1/x", "ftp://[::1]x/x", "ftp://[::1%25eth0]/x", "ftp://[zz::1]/x", "ftp://[1]/x",
        "ftp://host/%zz", "ftp://host/%4", "ftp://host/x;type=q", "ftp://host/x;type=", "ftp://host/x;type=ab",
        "ftp://us er@host/x", "ftp://user:p%@host/x", "ftp://user:p/w@host/x",
    ])
    func refuses(_ target: String) {
        #expect(FTPURL(target) == nil)
    }

    @Test("encoded control bytes are refused in every part", arguments: controlBytes)
    func refusesEncodedControls(_ byte: UInt8) {
        let hex = String(byte, radix: 16, uppercase: true)
        let escape = "%" + (hex.count == 1 ? "0" + hex : hex)
        #expect(FTPURL("ftp://host/pub/a\(escape)b") == nil)
        #expect(FTPURL("ftp://host/a\(escape)b/file") == nil)
        #expect(FTPURL("ftp://us\(escape)er@host/x") == nil)
        #expect(FTPURL("ftp://user:pa\(escape)ss@host/x") == nil)
    }

    @Test("raw control bytes are refused", arguments: controlBytes)
    func refusesRawControls(_ byte: UInt8) {
        #expect(FTPURL(wire("ftp://host/a") + [byte] + wire("b")) == nil)
    }

    @Test("the byte-buffer entry point reads the same URL")
    func rawBuffer() {
        let bytes = wire("ftp://u:p@host/x")
        let parsed = bytes.withUnsafeBytes { FTPURL($0) }
        #expect(parsed == FTPURL(bytes))
        #expect(parsed?.user == wire("u"))
    }

    @Test("credentials never appear in the spelling without them")
    func noCredentials() throws {
        let parsed = try #require(FTPURL("ftp://secretuser:secretpass@host/dir/"))
        #expect(!parsed.withoutCredentials.contains("secret"))
        #expect(!parsed.link(to: [wire("x")], directory: false).contains("secret"))
        #expect(parsed.authority == "host")
    }

    @Test("links for other paths on the same server")
    func links() throws {
        let parsed = try #require(FTPURL("ftp://[::1]:2121/a/"))
        #expect(parsed.authority == "[::1]:2121")
        #expect(parsed.link(to: [], directory: true) == "ftp://[::1]:2121/")
        #expect(parsed.link(to: [wire("a"), wire("b c/d")], directory: true) == "ftp://[::1]:2121/a/b%20c%2Fd/")
        #expect(parsed.link(to: [wire("x#y?z")], directory: false) == "ftp://[::1]:2121/x%23y%3Fz")
    }
}
