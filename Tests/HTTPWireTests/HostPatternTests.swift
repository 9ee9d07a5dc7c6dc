import Testing
import HTTPWire

struct HostMatchRow: Sendable, CustomTestStringConvertible {
    var pattern: String
    var host: String
    var matches: Bool

    var testDescription: String { "\(pattern) \(matches ? "matches" : "does not match") \"\(host)\"" }
}

struct HostPatternTextRow: Sendable, CustomTestStringConvertible {
    var text: String
    /// The description when parsed, or nil when refused.
    var parsed: String?
    /// Part of the refusal's message.
    var problem: String = ""

    var testDescription: String { parsed == nil ? "refuses \"\(text)\"" : "parses \"\(text)\"" }
}

enum HostPatternTable {
    static func yes(_ pattern: String, _ host: String) -> HostMatchRow { HostMatchRow(pattern: pattern, host: host, matches: true) }
    static func no(_ pattern: String, _ host: String) -> HostMatchRow { HostMatchRow(pattern: pattern, host: host, matches: false) }

    static let matches: [HostMatchRow] = [
        // Exact names.
        yes("example.com", "example.com"),
        no("example.com", "www.example.com"),
        no("example.com", "example.co"),
        no("example.com", "example.com.evil"),
        no("example.com", "badexample.com"),
        no("example.com", ""),
        // `*.suffix`: subdomains at any depth, never the bare domain.
        yes("*.example.com", "a.example.com"),
        yes("*.example.com", "a.b.example.com"),
        no("*.example.com", "example.com"),
        no("*.example.com", "badexample.com"),
        no("*.example.com", ".example.com"),
        no("*.example.com", "example.com.evil"),
        // `*`: any host.
        yes("*", "anything.test"),
        yes("*", "10.0.0.1"),
        yes("*", "fd00::1"),
        // Case, on either side.
        yes("Example.COM", "example.com"),
        yes("example.com", "EXAMPLE.com"),
        yes("*.Example.com", "WWW.example.COM"),
        // One trailing dot, on either side.
        yes("example.com.", "example.com"),
        yes("example.com", "example.com."),
        yes("*.example.com.", "a.example.com"),
        yes("*.example.com", "a.example.com."),
        no("*.example.com", "example.com."),
        no("example.com", "example.com.."),
        // IPv4: compared as written, like a name.
        yes("10.0.0.1", "10.0.0.1"),
        no("10.0.0.1", "10.0.0.10"),
        no("10.0.0.1", "110.0.0.1"),
        // IPv6: by value, bracketed or not, whatever the spelling.
        yes("fd00::1", "fd00::1"),
        yes("[fd00::1]", "fd00::1"),
        yes("fd00::1", "fd00:0:0:0:0:0:0:1"),
        yes("FD00::1", "fd00:0::0001"),
        yes("[::1]", "::1"),
        yes("::", "0:0:0:0:0:0:0:0"),
        yes("1::", "1:0:0:0:0:0:0:0"),
        yes("::ffff:10.0.0.1", "::ffff:a00:1"),
        yes("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"),
        no("fd00::1", "fd00::2"),
        no("fd00::1", "fd00::1:0"),
        no("::1", "1::"),
        no("::1", "localhost"),
        no("::1", ""),
        no("::ffff:10.0.0.1", "10.0.0.1"),
        no("::1", "::1::"),
        no("::1", "[::1]"),
    ]

    static func parses(_ text: String, as description: String) -> HostPatternTextRow {
        HostPatternTextRow(text: text, parsed: description)
    }

    static func refuses(_ text: String, _ problem: String) -> HostPatternTextRow {
        HostPatternTextRow(text: text, parsed: nil, problem: problem)
    }

    static let texts: [HostPatternTextRow] = [
        parses("example.com", as: "example.com"),
        parses("Example.COM.", as: "example.com"),
        parses("*.Example.com.", as: "*.example.com"),
        parses("*", as: "*"),
        parses("xn--bcher-kva.example", as: "xn--bcher-kva.example"),
        parses("_service.example", as: "_service.example"),
        parses("localhost", as: "localhost"),
        parses("10.0.0.1", as: "10.0.0.1"),
        parses("[FD00::1]", as: "fd00::1"),
        parses("fd00::1", as: "fd00::1"),
        parses("::ffff:10.0.0.1", as: "::ffff:10.0.0.1"),
        refuses("", "no name"),
        refuses(".", "no name"),
        refuses("*.", "no name"),
        refuses(".example.com", "empty label"),
        refuses("a..example.com", "empty label"),
        refuses("example.com..", "empty label"),
        refuses("**", "* stands alone"),
        refuses("*example.com", "* stands alone"),
        refuses("www.*.example.com", "* stands alone"),
        refuses("*.*.example.com", "* stands alone"),
        refuses("example.*", "* stands alone"),
        refuses("example.com:8080", "no port"),
        refuses("[::1]:443", "unclosed"),
        refuses("[::1", "unclosed"),
        refuses("[]", "unclosed or empty"),
        refuses("[example.com]", "not an IPv6 address"),
        refuses("1::2::3", "not an IPv6 address"),
        refuses("1:2:3:4:5:6:7:8:9", "not an IPv6 address"),
        refuses("1:2:3:4:5:6:7", "not an IPv6 address"),
        refuses("12345::1", "not an IPv6 address"),
        refuses("::1.2.3", "not an IPv6 address"),
        refuses("fe80::1%eth0", "not an IPv6 address"),
        refuses("*.::1", "not an IPv6 address"),
        refuses(" example.com", "\" \" is not allowed"),
        refuses("exa mple.com", "\" \" is not allowed"),
        refuses("http://example.com", "not an IPv6 address"),
        refuses("example.com/path", "\"/\" is not allowed"),
        refuses("bücher.example", "\"ü\" is not allowed"),
        refuses("user@example.com", "\"@\" is not allowed"),
    ]
}

@Suite("HostPattern")
struct HostPatternTests {
    @Test("matching", arguments: HostPatternTable.matches)
    func matching(_ row: HostMatchRow) throws {
        let pattern = try HostPattern(parsing: row.pattern)
        #expect(pattern.matches(Array(row.host.utf8)) == row.matches)
        #expect(pattern.matches(row.host) == row.matches)
    }

    @Test("parsing", arguments: HostPatternTable.texts)
    func parsing(_ row: HostPatternTextRow) {
        do {
            let pattern = try HostPattern(parsing: row.text)
            #expect(pattern.description == row.parsed)
        } catch {
            #expect(row.parsed == nil, "refused: \(error)")
            #expect(error.description.hasPrefix("expected a host name, *.domain or *, got \"\(row.text)\""))
            #expect(error.description.contains(row.problem), "\(error)")
        }
    }

    @Test("equal when they match the same hosts")
    func equality() throws {
        #expect(try HostPattern(parsing: "fd00::1") == HostPattern(parsing: "[FD00:0::1]"))
        #expect(try HostPattern(parsing: "Example.com.") == HostPattern(parsing: "example.com"))
        #expect(try HostPattern(parsing: "*") == HostPattern.any)
        #expect(try HostPattern(parsing: "*.example.com") != HostPattern(parsing: "example.com"))
        let literal: HostPattern = "*.example.com"
        #expect(literal.description == "*.example.com")
        #expect(Set([HostPattern("a.test"), "A.test.", "b.test"]).count == 2)
    }
}
