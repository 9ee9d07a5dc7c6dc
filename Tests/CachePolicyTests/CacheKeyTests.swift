import Testing
import HTTPWire
import CachePolicy

struct PrimaryKeyRow: Sendable, CustomTestStringConvertible {
    var name: String
    var scheme: URIScheme
    var host: String
    var port: Int
    var pathAndQuery: String
    var expected: String
    var testDescription: String { name }
}

struct SecondaryKeyRow: Sendable, CustomTestStringConvertible {
    var name: String
    var vary: [String]
    var fields: [String]
    /// The key with 0x00 written as `|` and 0x01 as `^`.
    var expected: String
    var testDescription: String { name }
}

struct VariantRow: Sendable, CustomTestStringConvertible {
    var name: String
    var vary: [String]
    var first: [String]
    var second: [String]
    var sameVariant: Bool
    var testDescription: String { name }
}

struct InvalidationRow: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var status: Int
    var target: String
    var fields: [String]
    var expected: [String]
    var testDescription: String { name }
}

enum PrimaryKeyTable {
    static func row(_ name: String, _ scheme: URIScheme = .http, _ host: String = "example.com", _ port: Int = 80,
                    _ path: String, _ expected: String) -> PrimaryKeyRow {
        PrimaryKeyRow(name: name, scheme: scheme, host: host, port: port, pathAndQuery: path, expected: expected)
    }

    static let rows: [PrimaryKeyRow] = [
        row("RFC9111 4 http default port elided", .http, "example.com", 80, "/a?b=1", "http://example.com/a?b=1"),
        row("RFC9111 4 https default port elided", .https, "example.com", 443, "/a", "https://example.com/a"),
        row("RFC9111 4 http explicit port kept", .http, "example.com", 8080, "/", "http://example.com:8080/"),
        row("RFC9111 4 https on port 80 keeps it", .https, "example.com", 80, "/", "https://example.com:80/"),
        row("RFC9111 4 http on port 443 keeps it", .http, "example.com", 443, "/", "http://example.com:443/"),
        row("RFC3986 6.2.2.1 host lowercased", .http, "ExAmple.COM", 80, "/", "http://example.com/"),
        row("RFC3986 6.2.3 empty path is /", .http, "example.com", 80, "", "http://example.com/"),
        row("RFC3986 6.2.3 query without path gets /", .http, "example.com", 80, "?q=1", "http://example.com/?q=1"),
        row("RFC3986 3.5 fragment never part of the key", .http, "example.com", 80, "/a#top", "http://example.com/a"),
        row("RFC3986 3.5 fragment after a query", .http, "example.com", 80, "/a?x=1#y", "http://example.com/a?x=1"),
        row("RFC9111 4 path case kept", .http, "example.com", 80, "/A/b", "http://example.com/A/b"),
        row("RFC9111 4 percent-encoding kept byte-exact", .http, "example.com", 80, "/a%2fb%2F", "http://example.com/a%2fb%2F"),
        row("RFC9111 4 dot segments kept byte-exact", .http, "example.com", 80, "/a/../b", "http://example.com/a/../b"),
        row("RFC9111 4 query order kept", .http, "example.com", 80, "/?b=2&a=1", "http://example.com/?b=2&a=1"),
        row("RFC3986 3.2.2 IPv6 host in brackets", .http, "::1", 80, "/", "http://[::1]/"),
        row("RFC3986 3.2.2 IPv6 host with a port", .https, "2001:db8::1", 8443, "/x", "https://[2001:db8::1]:8443/x"),
        row("RFC3986 3.2.2 IPv4 host", .http, "127.0.0.1", 8080, "/", "http://127.0.0.1:8080/"),
        row("RFC9111 4 port 0 means the default", .https, "example.com", 0, "/", "https://example.com/"),
        row("RFC3986 3.5 a target that is only a fragment keys /", .http, "example.com", 80, "#top", "http://example.com/"),
        row("RFC3986 3.2.2 IPv6 host already in brackets", .http, "[::1]", 8080, "/", "http://[::1]:8080/"),
        row("RFC3986 3.2.3 one-digit port", .http, "example.com", 8, "/", "http://example.com:8/"),
        row("RFC3986 3.2.3 five-digit port", .http, "example.com", 65535, "/p", "http://example.com:65535/p"),
        row("RFC3986 3.2.3 port 10 keeps its zero", .https, "EXAMPLE.com", 10, "/", "https://example.com:10/"),
        row("RFC3986 6.2.2.1 a long host lowered in every word", .http, "WWW.Example-Host.EXAMPLE.Co", 80, "/A",
            "http://www.example-host.example.co/A"),
        row("RFC3986 3.5 a fragment after a long path", .http, "example.com", 80, "/aaaaaaaaaaaaaaaaaaaa/b?c=d#e#f",
            "http://example.com/aaaaaaaaaaaaaaaaaaaa/b?c=d"),
    ]
}

enum SecondaryKeyTable {
    static func row(_ name: String, _ vary: [String], _ fields: [String], _ expected: String) -> SecondaryKeyRow {
        SecondaryKeyRow(name: name, vary: vary, fields: fields, expected: expected)
    }

    static let rows: [SecondaryKeyRow] = [
        row("RFC9111 4.1 no Vary: empty key", [], ["Accept: */*"], ""),
        row("RFC9111 4.1 one field present", ["accept-encoding"], ["Accept-Encoding: gzip"], "accept-encoding|gzip|"),
        row("RFC9111 4.1 absent field", ["accept-encoding"], [], "accept-encoding|^|"),
        row("RFC9111 4.1 empty field is not absent", ["accept-encoding"], ["Accept-Encoding: "], "accept-encoding||"),
        row("RFC9111 4.1 whitespace around commas removed", ["accept-encoding"], ["Accept-Encoding: gzip ,  br"],
            "accept-encoding|br,gzip|"),
        row("RFC9111 4.1 several fields combined", ["accept-encoding"], ["Accept-Encoding: gzip", "Accept-Encoding: br"],
            "accept-encoding|br,gzip|"),
        row("RFC9111 4.1 request name matched case-insensitively", ["accept-encoding"], ["ACCEPT-ENCODING: gzip"],
            "accept-encoding|gzip|"),
        row("RFC9111 4.1 values of other fields keep their case", ["x-lang"], ["X-Lang: en-GB"], "x-lang|en-GB|"),
        row("RFC4647 2 language ranges lowercased", ["accept-language"], ["Accept-Language: en-GB"],
            "accept-language|en-gb|"),
        row("RFC9110 12.5.3 codings sorted and lowercased", ["accept-encoding"], ["Accept-Encoding:  BR , GZIP"],
            "accept-encoding|br,gzip|"),
        row("RFC9110 12.5.3 codings sorted across fields", ["accept-encoding"],
            ["Accept-Encoding: zstd", "Accept-Encoding: gzip, br"], "accept-encoding|br,gzip,zstd|"),
        row("RFC9110 12.4.2 whitespace around ; and = dropped, q kept with its member", ["accept-encoding"],
            ["Accept-Encoding: gzip ; Q = 0.5, br;q=1"], "accept-encoding|br;q=1,gzip;q=0.5|"),
        row("RFC9110 12.5.4 language ranges sorted", ["accept-language"], ["Accept-Language: fr-CH, fr;q=0.9, EN;q=0.8"],
            "accept-language|en;q=0.8,fr-ch,fr;q=0.9|"),
        row("RFC9110 12.5.2 charsets lowercased, order kept", ["accept-charset"], ["Accept-Charset: UTF-8, ISO-8859-1"],
            "accept-charset|utf-8,iso-8859-1|"),
        row("RFC9110 5.6.4 quoted strings in a caseless field kept", ["accept-charset"], ["Accept-Charset: x;p=\"A B\""],
            "accept-charset|x;p=\"A B\"|"),
        row("RFC9111 4.1 unknown fields keep their order", ["x-v"], ["X-V: b, a"], "x-v|b,a|"),
        row("RFC9111 4.1 Accept keeps case and order (parameters may be case-sensitive)", ["accept"],
            ["Accept: text/html;Level=1 , */*"], "accept|text/html;Level=1,*/*|"),
        row("RFC9111 4.1 empty sorted field is not absent", ["accept-encoding"], ["Accept-Encoding: "],
            "accept-encoding||"),
        row("RFC9111 4.1 names in the given order", ["accept-language", "accept-encoding"],
            ["Accept-Encoding: gzip", "Accept-Language: fr"], "accept-language|fr|accept-encoding|gzip|"),
        row("RFC9111 4.1 one present, one absent", ["accept-language", "origin"], ["Accept-Language: fr"],
            "accept-language|fr|origin|^|"),
        row("RFC9110 5.6.1 empty list elements dropped", ["accept-encoding"], ["Accept-Encoding: gzip,, br,"],
            "accept-encoding|br,gzip|"),
        row("RFC9110 5.6.4 whitespace inside quoted strings kept", ["x-v"], ["X-V: \"a , b\", c"], "x-v|\"a , b\",c|"),
    ]
}

enum VariantTable {
    static let rows: [VariantRow] = [
        VariantRow(name: "RFC9111 4.1 same value, different spacing: same variant", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip,br"], second: ["Accept-Encoding: gzip, br"], sameVariant: true),
        VariantRow(name: "RFC9111 4.1 one field or two: same variant", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip, br"], second: ["Accept-Encoding: gzip", "Accept-Encoding: br"],
                   sameVariant: true),
        VariantRow(name: "RFC9111 4.1 different values: different variants", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip"], second: ["Accept-Encoding: br"], sameVariant: false),
        VariantRow(name: "RFC9111 4.1 absent and empty differ", vary: ["accept-encoding"],
                   first: [], second: ["Accept-Encoding: "], sameVariant: false),
        VariantRow(name: "RFC9111 4.1 both absent: same variant", vary: ["accept-encoding"],
                   first: ["Accept: a"], second: ["Accept: b"], sameVariant: true),
        VariantRow(name: "RFC9110 12.5.3 order of codings does not matter", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip, br"], second: ["Accept-Encoding: br,gzip"], sameVariant: true),
        VariantRow(name: "RFC9110 12.5.3 case and spacing of codings do not matter", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip, br"], second: ["Accept-Encoding:  BR , GZIP"], sameVariant: true),
        VariantRow(name: "RFC9110 12.5.4 order and case of language ranges do not matter", vary: ["accept-language"],
                   first: ["Accept-Language: en-GB, fr;q=0.5"], second: ["Accept-Language: fr;q=0.5,EN-gb"],
                   sameVariant: true),
        VariantRow(name: "RFC9110 12.5.3 different q: different variants", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip;q=0.5, br"], second: ["Accept-Encoding: gzip, br;q=0.5"],
                   sameVariant: false),
        VariantRow(name: "RFC9110 12.5.3 a coding more: different variants", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip, br"], second: ["Accept-Encoding: gzip, br, zstd"],
                   sameVariant: false),
        VariantRow(name: "RFC9111 4.1 order of an unknown field's values matters", vary: ["x-v"],
                   first: ["X-V: a, b"], second: ["X-V: b, a"], sameVariant: false),
        VariantRow(name: "RFC9111 4.1 case of an unknown field's values matters", vary: ["x-v"],
                   first: ["X-V: a"], second: ["X-V: A"], sameVariant: false),
        VariantRow(name: "RFC9111 4.1 order of Accept-Charset values matters", vary: ["accept-charset"],
                   first: ["Accept-Charset: utf-8, latin1"], second: ["Accept-Charset: latin1, utf-8"],
                   sameVariant: false),
        VariantRow(name: "RFC9111 4.1 fields not named by Vary do not matter", vary: ["accept-encoding"],
                   first: ["Accept-Encoding: gzip", "User-Agent: a"], second: ["Accept-Encoding: gzip", "User-Agent: b"],
                   sameVariant: true),
        VariantRow(name: "RFC9111 4.1 value moved between fields does not collide", vary: ["a", "b"],
                   first: ["A: x", "B: y"], second: ["A: x,y"], sameVariant: false),
    ]
}

enum InvalidationTable {
    static let target = "http://example.com/a/b?q=1"

    static func row(_ name: String, method: String = "POST", status: Int = 200, target: String = target,
                    _ fields: [String], _ expected: [String]) -> InvalidationRow {
        InvalidationRow(name: name, method: method, status: status, target: target, fields: fields, expected: expected)
    }

    static let rows: [InvalidationRow] = [
        row("RFC9111 4.4 POST 200 invalidates the target", [], [target]),
        row("RFC9111 4.4 PUT invalidates", method: "PUT", [], [target]),
        row("RFC9111 4.4 DELETE invalidates", method: "DELETE", status: 204, [], [target]),
        row("RFC9111 4.4 PATCH invalidates", method: "PATCH", [], [target]),
        row("RFC9111 4.4 unknown methods are unsafe", method: "PURGE", [], [target]),
        row("RFC9111 4.4 GET is safe", method: "GET", ["Location: /x"], []),
        row("RFC9111 4.4 HEAD is safe", method: "HEAD", [], []),
        row("RFC9111 4.4 OPTIONS is safe", method: "OPTIONS", [], []),
        row("RFC9111 4.4 TRACE is safe", method: "TRACE", [], []),
        row("RFC9111 4.4 3xx invalidates", status: 303, ["Location: /done"], [target, "http://example.com/done"]),
        row("RFC9111 4.4 4xx does not", status: 404, ["Location: /x"], []),
        row("RFC9111 4.4 5xx does not", status: 500, [], []),
        row("RFC9111 4.4 1xx does not", status: 199, [], []),
        row("RFC9111 4.4 Location absolute, same origin", ["Location: http://example.com/new"],
            [target, "http://example.com/new"]),
        row("RFC9111 4.4 Location absolute, scheme and host case-normalised", ["Location: HTTP://EXAMPLE.com/New"],
            [target, "http://example.com/New"]),
        row("RFC9111 4.4 Location with the default port written", ["Location: http://example.com:80/p"],
            [target, "http://example.com/p"]),
        row("RFC9111 4.4 Location on another host ignored", ["Location: http://other.example/new"], [target]),
        row("RFC9111 4.4 Location on a subdomain ignored", ["Location: http://www.example.com/new"], [target]),
        row("RFC9111 4.4 Location with another scheme ignored", ["Location: https://example.com/new"], [target]),
        row("RFC9111 4.4 Location with another port ignored", ["Location: http://example.com:8080/new"], [target]),
        row("RFC9111 4.4 Location not http(s) ignored", ["Location: ftp://example.com/new"], [target]),
        row("RFC9111 4.4 Location mailto ignored", ["Location: mailto:a@example.com"], [target]),
        row("RFC9111 4.4 Location with userinfo ignored", ["Location: http://u@example.com/x"], [target]),
        row("RFC3986 5.2 Location absolute path", ["Location: /new?x=2"], [target, "http://example.com/new?x=2"]),
        row("RFC3986 5.2.3 Location relative path merged with the target's directory", ["Location: c"],
            [target, "http://example.com/a/c"]),
        row("RFC3986 5.2.4 Location with dot segments", ["Location: ../c/./d"], [target, "http://example.com/c/d"]),
        row("RFC3986 5.2.4 Location absolute path with dot segments", ["Location: /x/y/../z"],
            [target, "http://example.com/x/z"]),
        row("RFC3986 5.2.2 Location query only", ["Location: ?q=2"], [target, "http://example.com/a/b?q=2"]),
        row("RFC3986 5.2.2 Location network-path reference, same host", ["Location: //example.com/n"],
            [target, "http://example.com/n"]),
        row("RFC3986 5.2.2 Location network-path reference, other host", ["Location: //evil.example/n"], [target]),
        row("RFC3986 3.5 Location fragment dropped", ["Location: /f#frag"], [target, "http://example.com/f"]),
        row("RFC9111 4.4 Location equal to the target not repeated", ["Location: /a/b?q=1"], [target]),
        row("RFC9111 4.4 Content-Location", ["Content-Location: /cl"], [target, "http://example.com/cl"]),
        row("RFC9111 4.4 Location and Content-Location", ["Location: /l", "Content-Location: /cl"],
            [target, "http://example.com/l", "http://example.com/cl"]),
        row("RFC9111 4.4 Location and Content-Location equal: once", ["Location: /same", "Content-Location: /same"],
            [target, "http://example.com/same"]),
        row("RFC9111 4.4 https target with a port, relative Location", target: "https://example.com:8443/a",
            ["Location: /b"], ["https://example.com:8443/a", "https://example.com:8443/b"]),
        row("RFC9111 4.4 https target, absolute Location with the default port", target: "https://example.com/a",
            ["Location: https://example.com:443/b"], ["https://example.com/a", "https://example.com/b"]),
        row("RFC9111 4.4 IPv6 origin", target: "http://[::1]:8080/a", ["Location: http://[::1]:8080/b"],
            ["http://[::1]:8080/a", "http://[::1]:8080/b"]),
        row("RFC9111 4.4 invalid Location ignored", ["Location: http://exa mple.com/"], [target]),
    ]
}

func decodeMarkers(_ text: String) -> [UInt8] {
    wire(text).map { $0 == 0x7C ? 0x00 : $0 == 0x5E ? 0x01 : $0 }
}

@Suite("CacheKey")
struct CacheKeyTests {
    @Test("primary", arguments: PrimaryKeyTable.rows)
    func primary(_ row: PrimaryKeyRow) {
        let key = withBytes(row.pathAndQuery) {
            CacheKey.primary(scheme: row.scheme, host: wire(row.host), port: row.port, pathAndQuery: $0)
        }
        #expect(text(key) == row.expected)
    }

    @Test("secondary", arguments: SecondaryKeyTable.rows)
    func secondary(_ row: SecondaryKeyRow) {
        let key = CacheKey.secondary(varyFields: row.vary.map(wire), request: request(row.fields).headers)
        #expect(escaped(key) == escaped(decodeMarkers(row.expected)))
    }

    @Test("variants", arguments: VariantTable.rows)
    func variants(_ row: VariantRow) {
        let vary = row.vary.map(wire)
        let first = CacheKey.secondary(varyFields: vary, request: request(row.first).headers)
        let second = CacheKey.secondary(varyFields: vary, request: request(row.second).headers)
        #expect((first == second) == row.sameVariant)
    }

    @Test("invalidation", arguments: InvalidationTable.rows)
    func invalidation(_ row: InvalidationRow) {
        let method = request(row.method == "PUT" || row.method == "POST" || row.method == "PATCH" ? ["Content-Length: 0"] : [],
                             method: row.method).method
        let res = response(row.fields, status: row.status)
        let keys = Invalidation.targets(method: method, status: row.status, targetKey: wire(row.target), response: res)
        #expect(keys.map(text) == row.expected)
    }
}
