import EventLoop
import HTTPWire
import Testing
@testable import SessionClient

/// The CONNECT exchange with a parent proxy and its credentials, without sockets.
@Suite struct ParentConnectTests {
    private static let target = "origin.test:443"
    private static let parent = "127.0.0.1:3128"

    private func judge(_ text: String, tlsFollows: Bool = true) -> ParentConnect.Step {
        Array(text.utf8).withUnsafeBytes {
            ParentConnect.judge($0, target: Self.target, parent: Self.parent, tlsFollows: tlsFollows)
        }
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var answer: String
        var tlsFollows = true
        var expected: ParentConnect.Step
        var testDescription: String { name }
    }

    static let established = "HTTP/1.1 200 Connection established\r\n\r\n"

    static let rows: [Row] = [
        Row(name: "200: the tunnel is open", answer: established, expected: .open(established.utf8.count)),
        Row(name: "any 2xx opens it", answer: "HTTP/1.0 204 OK\r\nX: y\r\n\r\n", expected: .open(25)),
        Row(name: "a 2xx with Content-Length has no body all the same (RFC 9112 §6.3)",
            answer: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", expected: .open(38)),
        Row(name: "half a head", answer: "HTTP/1.1 200 Conn", expected: .needMore),
        Row(name: "nothing yet", answer: "", expected: .needMore),
        Row(name: "100 first: read on", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", expected: .interim(25)),
        Row(name: "101 is no answer to CONNECT", answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
            expected: .failed(.parentRefused(parent: parent, request: "CONNECT \(target)", status: 101))),
        Row(name: "407: credentials wanted", answer: "HTTP/1.1 407 Proxy Authentication Required\r\n"
                + "Proxy-Authenticate: Basic realm=\"parent\"\r\nContent-Length: 0\r\n\r\n",
            expected: .failed(.parentRefused(parent: parent, request: "CONNECT \(target)", status: 407))),
        Row(name: "403", answer: "HTTP/1.1 403 Forbidden\r\n\r\n",
            expected: .failed(.parentRefused(parent: parent, request: "CONNECT \(target)", status: 403))),
        Row(name: "500", answer: "HTTP/1.1 500 Oops\r\nContent-Length: 3\r\n\r\nbad",
            expected: .failed(.parentRefused(parent: parent, request: "CONNECT \(target)", status: 500))),
        Row(name: "302 is not a tunnel either", answer: "HTTP/1.1 302 Found\r\nLocation: /\r\n\r\n",
            expected: .failed(.parentRefused(parent: parent, request: "CONNECT \(target)", status: 302))),
        Row(name: "bytes behind the 2xx before TLS: the parent speaking for the origin",
            answer: established + "\u{16}\u{03}\u{03}fake server hello",
            expected: .failed(.parentSentEarlyBytes(parent: parent, target: target))),
        Row(name: "bytes behind the 2xx of a raw tunnel are the destination's, relayed",
            answer: established + "220 smtp ready\r\n", tlsFollows: false, expected: .open(established.utf8.count)),
    ]

    @Test(arguments: rows) func judgesTheAnswer(_ row: Row) {
        #expect(judge(row.answer, tlsFollows: row.tlsFollows) == row.expected)
    }

    @Test(arguments: ["\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\r\n\r\n", "HTTP/2 200\r\n\r\n",
                      "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "HTTP/1.1 200 OK\r\nX\u{0}: a\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "SSH-2.0-OpenSSH\r\n\r\n",
                      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"])
    func garbageIsAnInvalidAnswer(_ answer: String) {
        guard case .failed(.invalidResponse(upstream: Self.parent, _)) = judge(answer) else {
            Issue.record("\(answer.debugDescription) judged \(judge(answer))")
            return
        }
    }

    @Test func aHugeHeadIsRefusedOnceItPassesTheLimit() {
        let big = "HTTP/1.1 200 OK\r\n" + String(repeating: "X-Pad: " + String(repeating: "a", count: 100) + "\r\n", count: 200)
        #expect(judge(big) == .failed(.responseHeadTooLarge(upstream: Self.parent)))
        // Below the limit and unfinished: more is awaited.
        #expect(judge(String(big.prefix(1_000))) == .needMore)
    }

    @Test func theRequestCarriesTheParentsCredentialsOnly() {
        let plain = String(decoding: ParentConnect.request(authority: "[::1]:8443", credentials: nil), as: UTF8.self)
        #expect(plain == "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n")
        let credentials = ProxyCredentials(user: "Aladdin", password: "open sesame")
        let authorised = String(decoding: ParentConnect.request(authority: "a.test:443", credentials: credentials),
                                as: UTF8.self)
        #expect(authorised == "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n"
                + "Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n\r\n")
    }

    @Test func messagesNameTheParentAndTheStatus() {
        let refused = SessionError.parentRefused(parent: Self.parent, request: "CONNECT \(Self.target)", status: 407)
        #expect(refused.status == 502)
        #expect(refused.message.contains("407") && refused.message.contains(Self.parent))
        #expect(SessionError.parentRefused(parent: Self.parent, request: "CONNECT \(Self.target)", status: 500).status == 502)
        #expect(SessionError.parentSentEarlyBytes(parent: Self.parent, target: Self.target).status == 502)
    }
}

@Suite struct ProxyCredentialsTests {
    @Test(arguments: [
        ("", "\u{0}"),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ])
    func base64MatchesRFC4648(_ input: String, _ expected: String) {
        if expected == "\u{0}" {
            #expect(ProxyCredentials.base64([]) == "")
        } else {
            #expect(ProxyCredentials.base64(Array(input.utf8)) == expected)
        }
    }

    @Test func aFileLineIsParsed() throws {
        let c = try ProxyCredentials.parse("# the parent's account\n\nalice:pa:ss word\r\nignored:line\n")
        #expect(c.user == "alice")
        #expect(c.authorization == "Basic " + ProxyCredentials.base64(Array("alice:pa:ss word".utf8)))
        let utf8 = try ProxyCredentials.parse("jörg:grüße")
        #expect(utf8.authorization == "Basic " + ProxyCredentials.base64(Array("jörg:grüße".utf8)))
        // An empty password is a password.
        #expect(try ProxyCredentials.parse("bob:\n").user == "bob")
    }

    @Test(arguments: ["", "\n# only a comment\n", "nocolon", ":password", "al\u{1}ice:pw", "alice:p\u{7f}w",
                      "alice:p\u{0}w", "alice:pw\u{1b}[31m"])
    func badFilesAreRefusedWithoutQuotingThem(_ text: String) {
        do {
            _ = try ProxyCredentials.parse(text)
            Issue.record("accepted \(text.debugDescription)")
        } catch {
            #expect(!text.isEmpty ? !error.description.contains("pw") : true)
        }
    }

    @Test func printingShowsTheUserNeverThePassword() {
        let c = ProxyCredentials(user: "alice", password: "s3cret")
        #expect(!"\(c)".contains("s3cret"))
        #expect(!String(reflecting: c).contains("s3cret"))
        #expect("\(c)".contains("alice"))
        let address = ProxyAddress(host: "parent.test", port: 3128, credentials: c)
        #expect(!"\(address)".contains("s3cret"))
        #expect(!"\(address)".contains(c.authorization.dropFirst(6)))
    }
}

/// Which pool a request's connection comes from through a parent proxy.
@Suite struct ParentPoolTests {
    @Test func httpsOriginsKeepAPoolEachWhilePlainHTTPSharesTheParents() throws {
        let loop = EventLoop()
        var c = SessionConfiguration.forTests
        c.parentProxy = ProxyAddress(host: "127.0.0.1", port: 3128)
        let session = try Session(loop: loop, configuration: c)
        let a = OriginKey(scheme: .https, host: "a.test", port: 443)
        let b = OriginKey(scheme: .https, host: "b.test", port: 443)
        // A tunnel reaches one origin, with TLS for that origin inside: never to be shared.
        #expect(session.pool(for: a) !== session.pool(for: b))
        #expect(session.pool(for: a).key == a)
        #expect(session.pool(for: a) === session.pool(for: a))
        // Plain requests name their origin in absolute form: one pool, the parent's.
        let x = OriginKey(scheme: .http, host: "a.test", port: 80)
        let y = OriginKey(scheme: .http, host: "b.test", port: 80)
        #expect(session.pool(for: x) === session.pool(for: y))
        #expect(session.pool(for: x).key == OriginKey(scheme: .http, host: "127.0.0.1", port: 3128))
        // The parent's own address as an https origin is still an origin, reached through the parent.
        let parentAsOrigin = OriginKey(scheme: .https, host: "127.0.0.1", port: 3128)
        #expect(session.pool(for: parentAsOrigin) !== session.pool(for: x))
    }

    /// The session remembers the last pool it handed out: keys that differ in scheme, host or port
    /// alone, asked one right after the other, still get their own.
    @Test func consecutiveOriginsDifferingInOnePartGetTheirOwnPools() throws {
        let session = try Session(loop: EventLoop(), configuration: .forTests)
        let keys = [OriginKey(scheme: .http, host: "a.test", port: 80), OriginKey(scheme: .http, host: "a.test", port: 81),
                    OriginKey(scheme: .https, host: "a.test", port: 81), OriginKey(scheme: .https, host: "b.test", port: 81)]
        let first = keys.map { session.pool(for: $0) }
        for (i, key) in keys.enumerated() {
            #expect(first[i].key == key)
            #expect(session.pool(for: key) === first[i])
            #expect(session.pool(for: keys[(i + 1) % keys.count]) === first[(i + 1) % keys.count])
        }
        #expect(Set(first.map { ObjectIdentifier($0) }).count == keys.count)
    }
}
