import Testing
@testable import Warming

/// The URL list `larder warm` and `POST /warm` read: one URL a line, comments and blanks skipped,
/// anything else reported by line, never fatal.
@Suite struct WarmListTests {
    @Test func readsURLsSkippingCommentsAndBlankLines() {
        let list = WarmList.parse("# a comment\n\nhttp://a.example/x\r\n  https://b.example:8443/y?q=1  \n\t\n#http://c/\n")
        #expect(list.urls.map(\.text) == ["http://a.example/x", "https://b.example:8443/y?q=1"])
        #expect(list.urls.map(\.host) == ["a.example", "b.example:8443"])
        #expect(list.urls.map(\.line) == [3, 4])
        #expect(list.rejected.isEmpty)
        #expect(list.count == 2)
    }

    @Test func hostIsTheAuthorityAsWritten() {
        let list = WarmList.parse("http://[::1]:8080/p\nhttp://h\nhttp://h?q\nhttp://h#frag\n")
        #expect(list.urls.map(\.host) == ["[::1]:8080", "h", "h", "h"])
    }

    @Test(arguments: [
        ("ftp://example.com/file", "not an http:// or https:// URL"),
        ("/relative/path", "not an http:// or https:// URL"),
        ("example.com/x", "not an http:// or https:// URL"),
        ("javascript:alert(1)", "not an http:// or https:// URL"),
        ("http://exa mple.com/", "spaces, control characters or non-ASCII bytes (percent-encode them)"),
        ("http://h/\u{01}", "spaces, control characters or non-ASCII bytes (percent-encode them)"),
        ("http://h/é", "spaces, control characters or non-ASCII bytes (percent-encode them)"),
        ("http:///nohost", "not a valid URL"),
        ("http://user:pw@h/", "not a valid URL"),
        ("http://h:99999/", "not a valid URL"),
        ("http://h:x/", "not a valid URL"),
        ("http://", "not a valid URL"),
    ])
    func refusesWhatIsNotAWarmableURL(line: String, reason: String) {
        let list = WarmList.parse("http://ok/\n" + line + "\n")
        #expect(list.urls.count == 1)
        #expect(list.rejected.count == 1)
        #expect(list.rejected.first?.line == 2)
        #expect(list.rejected.first?.reason.hasPrefix(reason) == true, "\(list.rejected)")
    }

    @Test func hugeLinesAndGarbageBytesAreReportedCutShort() {
        var bytes = Array("http://h/".utf8) + Array(repeating: UInt8(ascii: "a"), count: 20_000) + [0x0A]
        bytes += [0xFF, 0xFE, 0x00, 0x1B, 0x0A]
        bytes += Array("http://fine/\n".utf8)
        let list = WarmList.parse(bytes)
        #expect(list.urls.map(\.text) == ["http://fine/"])
        #expect(list.rejected.map(\.line) == [1, 2])
        #expect(list.rejected[0].reason == "longer than 8192 bytes")
        #expect(list.rejected[0].text.count <= 201)
        #expect(list.rejected[1].text.allSatisfy { $0.isASCII && !$0.isNewline })
    }

    @Test func aLineAtTheLimitIsAccepted() {
        let url = "http://h/" + String(repeating: "a", count: WarmList.maxLineBytes - 9)
        #expect(url.utf8.count == WarmList.maxLineBytes)
        #expect(WarmList.parse(url).urls.count == 1)
    }

    @Test func anEmptyListIsEmpty() {
        #expect(WarmList.parse("").count == 0)
        #expect(WarmList.parse("\n\n# only comments\n").count == 0)
        #expect(WarmList.parse("http://no-newline-at-end").urls.count == 1)
    }
}

@Suite struct WarmProxyAddressTests {
    @Test(arguments: [
        ("http://127.0.0.1:3128", "127.0.0.1", 3128, nil),
        ("127.0.0.1:3128", "127.0.0.1", 3128, nil),
        ("http://127.0.0.1:3128/", "127.0.0.1", 3128, nil),
        ("HTTP://localhost:8080", "localhost", 8080, nil),
        ("[::1]:3128", "::1", 3128, nil),
        ("0.0.0.0:3128", "127.0.0.1", 3128, nil),
        ("[::]:3128", "::1", 3128, nil),
        ("http://alice:s%3Acret@127.0.0.1:3128", "127.0.0.1", 3128, "Basic YWxpY2U6czpjcmV0"),
    ] as [(String, String, Int, String?)])
    func reads(text: String, host: String, port: Int, authorization: String?) {
        let p = WarmProxyAddress.parse(text)
        #expect(p == WarmProxy(host: host, port: UInt16(port), authorization: authorization))
    }

    @Test(arguments: ["https://127.0.0.1:3128", "127.0.0.1", "socks5://h:1", "h:0x10", "h:70000", "http://h:1/path",
                      "[::1", "::1:3128", "http://nocolon@h:1", "h o:1", ""])
    func refuses(text: String) {
        #expect(WarmProxyAddress.parse(text) == nil)
    }

    @Test func base64() {
        #expect(WarmProxyAddress.base64(Array("".utf8)) == "")
        #expect(WarmProxyAddress.base64(Array("f".utf8)) == "Zg==")
        #expect(WarmProxyAddress.base64(Array("fo".utf8)) == "Zm8=")
        #expect(WarmProxyAddress.base64(Array("foo".utf8)) == "Zm9v")
        #expect(WarmProxyAddress.base64(Array("Aladdin:open sesame".utf8)) == "QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    }
}
