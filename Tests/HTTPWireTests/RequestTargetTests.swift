import Testing
import HTTPWire

struct TargetRow: Sendable, CustomTestStringConvertible {
    var name: String
    var target: String
    var method: HTTPMethod
    var expected: Result<RequestTarget, HTTPWireError>

    var testDescription: String { name }
}

enum TargetTable {
    static func origin(_ name: String, _ target: String, method: HTTPMethod = .get) -> TargetRow {
        TargetRow(name: name, target: target, method: method,
                  expected: .success(RequestTarget(form: .origin, scheme: .http, host: [], port: 0,
                                                   hasExplicitPort: false, pathOffset: 0)))
    }

    static func absolute(_ name: String, _ target: String, _ scheme: URIScheme, host: String, port: Int,
                         explicit: Bool, path: Int?, fragment: Int? = nil, method: HTTPMethod = .get) -> TargetRow {
        TargetRow(name: name, target: target, method: method,
                  expected: .success(RequestTarget(form: .absolute, scheme: scheme, host: wire(host), port: port,
                                                   hasExplicitPort: explicit, pathOffset: path, fragmentStart: fragment)))
    }

    static func authority(_ name: String, _ target: String, host: String, port: Int) -> TargetRow {
        TargetRow(name: name, target: target, method: .connect,
                  expected: .success(RequestTarget(form: .authority, scheme: .http, host: wire(host), port: port,
                                                   hasExplicitPort: true, pathOffset: nil)))
    }

    static func ftp(_ name: String, _ target: String, host: String, port: Int, path: Int?, userinfo: Range<Int>) -> TargetRow {
        TargetRow(name: name, target: target, method: .get,
                  expected: .success(RequestTarget(form: .absolute, scheme: .ftp, host: wire(host), port: port,
                                                   hasExplicitPort: target.contains("h:"), pathOffset: path,
                                                   userinfo: userinfo)))
    }

    static func reject(_ name: String, _ target: String, method: HTTPMethod = .get) -> TargetRow {
        TargetRow(name: name, target: target, method: method, expected: .failure(.invalidTarget))
    }

    static let rows: [TargetRow] = [
        // §3.2.1 origin-form
        origin("§3.2.1 origin-form root", "/"),
        origin("§3.2.1 origin-form with query", "/a/b?c=d&e"),
        origin("§3.2.1 origin-form with percent-encoding", "/a%20b"),
        origin("§3.2.1 origin-form for POST", "/submit", method: .post),
        origin("§3.2.1 origin-form for OPTIONS", "/x", method: .options),
        origin("§3.2.1 origin-form starting with //", "//double"),
        // §3.2.2 absolute-form
        absolute("§3.2.2 http with path", "http://example.com/a?b", .http, host: "example.com", port: 80,
                 explicit: false, path: 18),
        absolute("§3.2.2 https without path", "https://example.com", .https, host: "example.com", port: 443,
                 explicit: false, path: nil),
        absolute("§3.2.2 host lowercased", "http://WWW.Example.COM/", .http, host: "www.example.com", port: 80,
                 explicit: false, path: 22),
        absolute("§3.2.2 scheme case-insensitive", "HTTPS://h/", .https, host: "h", port: 443, explicit: false, path: 9),
        absolute("§3.2.2 explicit port", "http://h:8080/p", .http, host: "h", port: 8080, explicit: true, path: 13),
        absolute("§3.2.2 explicit default port", "https://h:443/", .https, host: "h", port: 443, explicit: true, path: 13),
        absolute("§3.2.2 port 1", "http://h:1/", .http, host: "h", port: 1, explicit: true, path: 10),
        absolute("§3.2.2 port 65535", "http://h:65535", .http, host: "h", port: 65535, explicit: true, path: nil),
        absolute("§3.2.2 port with leading zero", "http://h:0080/", .http, host: "h", port: 80, explicit: true, path: 13),
        absolute("§3.2.2 query without path", "http://h?x=1", .http, host: "h", port: 80, explicit: false, path: 8),
        absolute("§3.2.2 port then query", "http://h:81?x", .http, host: "h", port: 81, explicit: true, path: 11),
        absolute("§3.2.2 IPv4 host", "http://127.0.0.1:3128/", .http, host: "127.0.0.1", port: 3128, explicit: true,
                 path: 21),
        absolute("§3.2.2 IPv6 loopback without brackets", "http://[::1]/", .http, host: "::1", port: 80,
                 explicit: false, path: 12),
        absolute("§3.2.2 IPv6 with port, lowercased", "http://[2001:DB8::A]:8080/x", .http, host: "2001:db8::a",
                 port: 8080, explicit: true, path: 25),
        absolute("§3.2.2 IPv6 full form", "http://[1:2:3:4:5:6:7:8]/", .http, host: "1:2:3:4:5:6:7:8", port: 80,
                 explicit: false, path: 24),
        absolute("§3.2.2 IPv4-mapped IPv6", "https://[::ffff:192.0.2.1]/", .https, host: "::ffff:192.0.2.1",
                 port: 443, explicit: false, path: 26),
        absolute("§3.2.2 hostname with - _ ~", "http://a-b_c~d.example/", .http, host: "a-b_c~d.example", port: 80,
                 explicit: false, path: 22),
        absolute("§3.2.2 '@' after the authority is path", "http://h/a@b", .http, host: "h", port: 80,
                 explicit: false, path: 8),
        absolute("§3.2.2 absolute-form for POST", "http://h/", .http, host: "h", port: 80, explicit: false, path: 8,
                 method: .post),
        // §3.2.3 authority-form
        authority("§3.2.3 CONNECT host:port", "example.com:443", host: "example.com", port: 443),
        authority("§3.2.3 CONNECT host lowercased", "Mail.Example.COM:993", host: "mail.example.com", port: 993),
        authority("§3.2.3 CONNECT IPv6", "[::1]:8443", host: "::1", port: 8443),
        authority("§3.2.3 CONNECT IPv4", "10.0.0.1:22", host: "10.0.0.1", port: 22),
        // §3.2.4 asterisk-form
        TargetRow(name: "§3.2.4 OPTIONS *", target: "*", method: .options,
                  expected: .success(RequestTarget(form: .asterisk, scheme: .http, host: [], port: 0,
                                                   hasExplicitPort: false, pathOffset: nil))),

        reject("§3.2.4 * with GET", "*"),
        reject("§3.2.4 *x with OPTIONS", "*x", method: .options),
        reject("§3.2.3 authority-form without CONNECT", "example.com:443"),
        reject("§3.2.3 CONNECT with origin-form", "/", method: .connect),
        reject("§3.2.3 CONNECT with absolute-form", "http://h:443/", method: .connect),
        reject("§3.2.3 CONNECT without port", "example.com", method: .connect),
        reject("§3.2.3 CONNECT with empty port", "example.com:", method: .connect),
        reject("§3.2.3 CONNECT with port 0", "example.com:0", method: .connect),
        reject("§3.2.3 CONNECT with port 65536", "example.com:65536", method: .connect),
        reject("§3.2.3 CONNECT IPv6 without port", "[::1]", method: .connect),
        reject("§3.2.3 CONNECT with userinfo", "user@example.com:443", method: .connect),
        reject("§3.2.3 CONNECT with a path", "example.com:443/x", method: .connect),
        reject("§3.2.3 CONNECT with empty host", ":443", method: .connect),
        reject("§3.2.3 CONNECT *", "*", method: .connect),
        reject("§3.2.2 userinfo", "http://user@h/"),
        reject("§3.2.2 userinfo with password", "http://user:pw@h/"),
        reject("§3.2.2 userinfo hiding the real host", "http://trusted.example@evil.example/"),
        reject("§3.2.2 other scheme", "gopher://h/"),
        // ftp, for the gateway: userinfo taken apart from the host (RFC 1738 §3.1)
        absolute("ftp with path", "ftp://h/pub/a.txt", .ftp, host: "h", port: 21, explicit: false, path: 7),
        absolute("ftp explicit port", "FTP://H:2121/", .ftp, host: "h", port: 2121, explicit: true, path: 12),
        ftp("ftp user", "ftp://anonymous@h/x", host: "h", port: 21, path: 17, userinfo: 6..<15),
        ftp("ftp user and encoded password", "ftp://u:p%40ss@h:21/x", host: "h", port: 21, path: 19, userinfo: 6..<14),
        ftp("ftp empty userinfo", "ftp://@h/", host: "h", port: 21, path: 8, userinfo: 6..<6),
        reject("ftp two @: which one ends the credentials is where parsers disagree", "ftp://a@trusted@evil/"),
        reject("ftp userinfo with a bracket", "ftp://a[b@h/"),
        reject("ftp userinfo with a quote", "ftp://a\"b@h/"),
        reject("ftp userinfo and no host", "ftp://user@/x"),
        reject("ftp port 0", "ftp://h:0/"),
        reject("§3.2.2 scheme without //", "http:h/"),
        reject("§3.2.2 empty authority", "http:///x"),
        reject("§3.2.2 scheme only", "http://"),
        reject("§3.2.2 empty port", "http://h:/"),
        reject("§3.2.2 port 0", "http://h:0/"),
        reject("§3.2.2 port 65536", "http://h:65536/"),
        reject("§3.2.2 port with letters", "http://h:8a/"),
        reject("§3.2.2 huge port", "http://h:99999999999999999999999/"),
        reject("§3.2.2 percent-encoded host", "http://h%41/"),
        // RFC 9110 §4.2.5: a fragment is the client's; it is found so that it is never keyed or forwarded.
        absolute("fragment right after the authority", "http://h#x", .http, host: "h", port: 80, explicit: false,
                 path: 8, fragment: 8),
        absolute("fragment after a query", "http://h/p?q#x#y", .http, host: "h", port: 80, explicit: false,
                 path: 8, fragment: 12),
        TargetRow(name: "origin-form fragment", target: "/a#b", method: .get,
                  expected: .success(RequestTarget(form: .origin, scheme: .http, host: [], port: 0,
                                                   hasExplicitPort: false, pathOffset: 0, fragmentStart: 2))),
        // One trailing dot names the same host: removed once, so every rule sees one spelling.
        absolute("trailing dot removed", "http://Intranet.Test./x", .http, host: "intranet.test", port: 80,
                 explicit: false, path: 21),
        absolute("trailing dot before a port", "http://a.test.:81", .http, host: "a.test", port: 81, explicit: true,
                 path: nil),
        authority("CONNECT trailing dot removed", "blocked.test.:443", host: "blocked.test", port: 443),
        reject("two trailing dots", "http://a.test../"),
        reject("an empty label", "http://a..test/"),
        reject("a leading dot", "http://.a.test/"),
        reject("only a dot", "http://./"),
        reject("CONNECT empty label", "a..b:443", method: .connect),
        reject("§3.2.2 unclosed IPv6 literal", "http://[::1/"),
        reject("§3.2.2 IPv6 with non-hex", "http://[zz::1]/"),
        reject("§3.2.2 IPv6 with two ::", "http://[1::2::3]/"),
        reject("§3.2.2 IPv6 with nine groups", "http://[1:2:3:4:5:6:7:8:9]/"),
        reject("§3.2.2 IPv6 with seven groups, no ::", "http://[1:2:3:4:5:6:7]/"),
        reject("§3.2.2 IPv6 with short IPv4 tail", "http://[::1.2.3]/"),
        reject("§3.2.2 IPv6 zone id", "http://[fe80::1%25eth0]/"),
        reject("§3.2.2 empty IPv6 literal", "http://[]/"),
        reject("§3.2.2 text after IPv6 literal", "http://[::1]x/"),
        // IPv4 as browsers, inet_aton and parent proxies read it (WHATWG URL host parser): one
        // address, one spelling, so no rule written for 127.0.0.5 can be walked around.
        absolute("IPv4 one decimal number", "http://2130706437:81/", .http, host: "127.0.0.5", port: 81,
                 explicit: true, path: 20),
        absolute("IPv4 two parts", "http://127.5/", .http, host: "127.0.0.5", port: 80, explicit: false, path: 12),
        absolute("IPv4 three parts", "http://127.0.5/", .http, host: "127.0.0.5", port: 80, explicit: false, path: 14),
        absolute("IPv4 hex part", "http://0x7f.0.0.5/", .http, host: "127.0.0.5", port: 80, explicit: false, path: 17),
        absolute("IPv4 hex upper case", "http://0X7F.0.0.5/", .http, host: "127.0.0.5", port: 80, explicit: false,
                 path: 17),
        absolute("IPv4 one hex number", "http://0x7f000005/", .http, host: "127.0.0.5", port: 80, explicit: false,
                 path: 17),
        absolute("IPv4 octal part", "http://0177.0.0.5/", .http, host: "127.0.0.5", port: 80, explicit: false,
                 path: 17),
        absolute("IPv4 leading zero is octal", "http://010.0.0.1/", .http, host: "8.0.0.1", port: 80,
                 explicit: false, path: 16),
        absolute("IPv4 trailing dot", "http://127.0.0.5./", .http, host: "127.0.0.5", port: 80, explicit: false,
                 path: 17),
        absolute("IPv4 bare 0x is zero", "http://0x.0.0.5/", .http, host: "0.0.0.5", port: 80, explicit: false,
                 path: 15),
        absolute("IPv4 largest", "http://4294967295/", .http, host: "255.255.255.255", port: 80, explicit: false,
                 path: 17),
        absolute("IPv4 zero", "http://0/", .http, host: "0.0.0.0", port: 80, explicit: false, path: 8),
        absolute("name ending in letters keeps its digits", "http://127.0.0.5.nip.example/", .http,
                 host: "127.0.0.5.nip.example", port: 80, explicit: false, path: 28),
        absolute("name with a digit-led last label of letters", "http://a.1x/", .http, host: "a.1x", port: 80,
                 explicit: false, path: 11),
        authority("CONNECT to a decimal address", "2130706437:443", host: "127.0.0.5", port: 443),
        reject("IPv4 part over 255", "http://256.0.0.1/"),
        reject("IPv4 last part too large", "http://127.0.0.256/"),
        reject("IPv4 number past 32 bits", "http://4294967296/"),
        reject("IPv4 two parts, second too large", "http://1.16777216/"),
        reject("IPv4 five parts", "http://1.2.3.4.5/"),
        reject("IPv4 bad octal digit", "http://09.0.0.1/"),
        reject("IPv4 bad hex digit", "http://0x7g.0.0.1/"),
        reject("name whose last label is a number", "http://example.1/"),
        reject("name whose last label is hex", "http://example.0x1/"),
        reject("§3.2 relative reference", "a/b"),
        reject("§3.2 empty target", ""),
        reject("§3.2 space in target", "/a b"),
        reject("§3.2 DEL in target", "/\u{7F}"),
        reject("§3.2 non-ASCII in target", "/é"),
        reject("§3.2 control in host", "http://h\u{01}/"),
    ]
}

@Suite("RequestTarget")
struct RequestTargetTests {
    @Test("request target", arguments: TargetTable.rows)
    func target(_ row: TargetRow) {
        let result = parseTarget(row.target, method: row.method)
        #expect(result == row.expected)
        if case .success(let target) = result, let offset = target.pathOffset {
            #expect(offset < row.target.utf8.count)
        }
    }

    @Test("an ftp URL's credentials are left out of what is logged", arguments: [
        ("ftp://u:secret@h/a", "ftp://h/a"), ("ftp://h/a@b", "ftp://h/a@b"), ("FTP://u@h", "FTP://h"),
        ("http://h/a@b", "http://h/a@b"), ("ftp://h/?q=@x", "ftp://h/?q=@x"),
    ])
    func withoutUserinfo(_ target: String, _ logged: String) {
        let out = Array(target.utf8).withUnsafeBytes { RequestTarget.withoutUserinfo($0) }
        #expect(String(decoding: out, as: UTF8.self) == logged)
    }

    @Test("hostString")
    func hostString() throws {
        let target = try parseTarget("http://[::1]:80/", method: .get).get()
        #expect(target.hostString == "::1")
    }
}
