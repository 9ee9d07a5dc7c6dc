import HTTP2
@testable import HTTPWire
import Testing
@testable import ProxyServer

private func head(_ method: String = "GET", scheme: String = "http", authority: String = "origin.test:8080",
                  path: String = "/a?b", fields: [(String, String)] = []) -> H2RequestHead {
    var h = H2RequestHead()
    h.method = Array(method.utf8)
    h.scheme = Array(scheme.utf8)
    h.authority = Array(authority.utf8)
    h.path = Array(path.utf8)
    for (name, value) in fields { h.appendField(name: Array(name.utf8), value: Array(value.utf8)) }
    return h
}

/// A translation with its head copied out of the writer it was appended to.
@dynamicMemberLookup
struct Translated {
    let request: H2Translation.Request
    let head: [UInt8]
    subscript<T>(dynamicMember path: KeyPath<H2Translation.Request, T>) -> T { request[keyPath: path] }
}

/// The bytes a writer holds before a translation appends to it (the connection's holds the heads
/// of the streams that arrived before).
private let earlierHeads: StaticString = "GET /earlier HTTP/1.1\r\nHost: a\r\n\r\n"

extension H2Translation {
    /// The translation appended to a writer that holds `earlierHeads`, which stay as they were.
    static func request(_ h: H2RequestHead, form: TargetForm, endStream: Bool,
                        webSocketKey: [UInt8] = []) -> Result<Translated, Refusal> {
        var out = MessageWriter()
        out.append(earlierHeads)
        var fields = [HeaderField(name: .empty, value: .empty)]  // an earlier head's
        let result = request(h, form: form, endStream: endStream, webSocketKey: webSocketKey, into: &out,
                             fields: &fields)
        let kept = out.withBytes { Array($0.prefix(earlierHeads.utf8CodeUnitCount)) }
        #expect(kept == Array(UnsafeBufferPointer(start: earlierHeads.utf8Start, count: earlierHeads.utf8CodeUnitCount)))
        switch result {
        case .success(let r):
            #expect(r.head.lowerBound == earlierHeads.utf8CodeUnitCount && r.head.upperBound == out.count)
            #expect(r.fields.lowerBound == 1 && r.fields.upperBound == fields.count)
            let head = out.withBytes { Array($0[r.head]) }
            expectAdoptedAsParsed(head, r, Array(fields[r.fields]))
            return .success(Translated(request: r, head: head))
        case .failure(let refusal):
            #expect(out.count == earlierHeads.utf8CodeUnitCount, "a refused request wrote nothing")
            #expect(fields.count == 1, "a refused request recorded no field")
            return .failure(refusal)
        }
    }
}

/// The head read from where the translation says its parts are is the head the parser reads, or
/// both refuse it alike, under the default limits and under limits it is near.
private func expectAdoptedAsParsed(_ head: [UInt8], _ r: H2Translation.Request, _ fields: [HeaderField]) {
    let lineBytes = r.targetEnd + 11
    for limits in [HeadLimits(), HeadLimits(maxHeadBytes: head.count, maxHeaderCount: fields.count, maxRequestLineBytes: lineBytes),
                   HeadLimits(maxHeadBytes: head.count - 1), HeadLimits(maxHeaderCount: max(fields.count - 1, 0)),
                   HeadLimits(maxRequestLineBytes: lineBytes - 1)] {
        head.withUnsafeBytes { bytes in
            var parsed = RequestHead()
            var adopted = RequestHead()
            let parseError: HTTPWireError?
            do throws(HTTPWireError) {
                let length = try RequestParser.parse(bytes, into: &parsed, limits: limits)
                #expect(length == head.count, "the parser reads one whole head")
                parseError = nil
            } catch {
                parseError = error
            }
            let adoptError: HTTPWireError?
            do throws(HTTPWireError) {
                try fields.withUnsafeBufferPointer { (lines) throws(HTTPWireError) in
                    try RequestParser.adopt(bytes, methodEnd: r.methodEnd, targetEnd: r.targetEnd, fields: lines,
                                            into: &adopted, limits: limits)
                }
                adoptError = nil
            } catch {
                adoptError = error
            }
            #expect(adoptError == parseError, "\(limits)")
            #expect(RequestParser.sameAsParsed(bytes, head: adopted, limits: limits) == (parseError == nil), "\(limits)")
        }
    }
}

private func text(_ r: Result<Translated, H2Translation.Refusal>) -> String? {
    guard case .success(let request) = r else { return nil }
    return String(decoding: request.head, as: UTF8.self)
}

private func status(_ r: Result<Translated, H2Translation.Refusal>) -> Int? {
    guard case .failure(let refusal) = r else { return nil }
    return refusal.status
}

@Suite struct H2TranslationTests {
    @Test func aForwardRequestBecomesAnAbsoluteFormRequest() {
        let r = H2Translation.request(head(fields: [("accept", "*/*")]), form: .absolute, endStream: true)
        #expect(text(r) == "GET http://origin.test:8080/a?b HTTP/1.1\r\nHost: origin.test:8080\r\naccept: */*\r\n\r\n")
    }

    @Test func anOriginFormRequestKeepsThePathAndNamesTheHost() {
        let r = H2Translation.request(head(scheme: "https"), form: .origin, endStream: true)
        #expect(text(r) == "GET /a?b HTTP/1.1\r\nHost: origin.test:8080\r\n\r\n")
    }

    @Test func cookiesSplitByHTTP2AreOneFieldAgain() {
        let r = H2Translation.request(head(fields: [("cookie", "a=1"), ("x", "y"), ("cookie", "b=2")]), form: .origin,
                                      endStream: true)
        #expect(text(r) == "GET /a?b HTTP/1.1\r\nHost: origin.test:8080\r\nx: y\r\nCookie: a=1; b=2\r\n\r\n")
    }

    @Test func aBodyWithALengthKeepsItAndOneWithoutIsChunked() throws {
        let with = H2Translation.request(head("POST", fields: [("content-length", "12")]), form: .origin, endStream: false)
        #expect(text(with)?.contains("Content-Length: 12\r\n") == true)
        guard case .success(let without) = H2Translation.request(head("POST"), form: .origin, endStream: false) else {
            Issue.record("refused")
            return
        }
        #expect(without.chunkedBody)
        #expect(String(decoding: without.head, as: UTF8.self).contains("Transfer-Encoding: chunked\r\n"))
        let empty = H2Translation.request(head("POST"), form: .origin, endStream: true)
        #expect(text(empty)?.contains("Content-Length: 0\r\n") == true)
    }

    /// Without `:authority`, the first Host field names the authority, even an empty one: a second
    /// that names another is refused (RFC 9112 §3.2: several Host fields are a 400).
    @Test func aSecondHostFieldNamingAnotherAuthorityIsRefused() {
        let twice = H2Translation.request(head(authority: "", fields: [("host", ""), ("host", "other.test")]),
                                          form: .origin, endStream: true)
        #expect(text(twice) == nil)
        let same = H2Translation.request(head(authority: "", fields: [("host", "a.test"), ("host", "A.test")]),
                                         form: .origin, endStream: true)
        #expect(text(same)?.contains("Host: a.test\r\n") == true)
    }

    /// Whatever mix of fields, cookies, forms and framings a client sends, a request that is not
    /// refused becomes one whole HTTP/1.1 head, exactly as long as its bytes, that the exchange's
    /// parser reads as one request for the same method, with the client's fields and cookies.
    @Test func everyTranslatedRequestIsOneWholeHead() throws {
        var generator = SystemRandomNumberGenerator()
        func pick<T>(_ xs: [T]) -> T { xs.randomElement(using: &generator)! }
        let names = ["accept", "cookie", "cookie", "host", "content-length", "te", "expect", "x-a", "user-agent",
                     "accept-encoding", "x-long-name-of-a-field", "upgrade", "connection"]
        var translated = 0
        for _ in 0..<3_000 {
            let method = pick(["GET", "POST", "HEAD", "CONNECT", "OPTIONS", "PUT"])
            let authority = pick(["origin.test:8080", "origin.test", "", "[::1]:443", "a%41.test", "a%zz.test", "a_b!:81"])
            let path = method == "CONNECT" ? "" : pick(["/", "/a?b", "*", "/" + String(repeating: "p", count: Int.random(in: 0...300, using: &generator))])
            var fields: [(String, String)] = []
            for _ in 0..<Int.random(in: 0...12, using: &generator) {
                let name = pick(names)
                let value: String
                switch name {
                case "host": value = authority.isEmpty ? "origin.test" : authority
                case "content-length": value = pick(["0", "12"])
                case "te": value = "trailers"
                default: value = String(repeating: pick(["v", "a=b", " x ", "\tt\t", "é", "", "c=\u{7F}", "\u{1}"]),
                                        count: Int.random(in: 1...40, using: &generator))
                }
                fields.append((name, value))
            }
            let h = head(method, authority: authority, path: path, fields: fields)
            let form: H2Translation.TargetForm = pick([.absolute, .origin])
            guard case .success(let r) = H2Translation.request(h, form: form, endStream: Bool.random(using: &generator)) else {
                continue
            }
            translated += 1
            var parsed = RequestHead()
            let outcome: Result<Int?, HTTPWireError> = r.head.withUnsafeBytes { b in
                do throws(HTTPWireError) {
                    return .success(try RequestParser.parse(b, into: &parsed, limits: HeadLimits()))
                } catch {
                    return .failure(error)
                }
            }
            guard case .success(let length) = outcome else {
                // Bytes a host may have, but not as a host: the exchange refuses it (400), and
                // adopting it refuses it alike (the translation's helper checks).
                #expect(outcome == .failure(.invalidHost) && authority == "a%zz.test", "\(outcome)")
                continue
            }
            #expect(length == r.head.count, "\(String(decoding: r.head, as: UTF8.self))")
            #expect(parsed.method == r.method)
            let text = String(decoding: r.head, as: UTF8.self)
            for (name, value) in fields where ["accept", "x-a", "user-agent", "x-long-name-of-a-field"].contains(name) {
                #expect(text.contains("\r\n\(name): \(value.trimmingCharacters(in: .whitespaces))\r\n")
                        || text.contains("\r\n\(name): \(value)\r\n"))
            }
            let cookies = fields.filter { $0.0 == "cookie" }.map(\.1)
            if !cookies.isEmpty { #expect(text.contains("\r\nCookie: \(cookies.joined(separator: "; "))\r\n")) }
        }
        #expect(translated > 500)
    }

    /// Only a request with nothing after its head leaves its exchange free for another stream's
    /// request; a body's exchange ends with its answer, so no framing can run into a later request.
    @Test func onlyARequestWithNothingAfterItsHeadLeavesItsExchangeReusable() throws {
        let cases: [(H2RequestHead, Bool, Bool)] = [
            (head(), true, true), (head("HEAD"), true, true), (head("POST"), true, true),
            (head("POST", fields: [("content-length", "12")]), false, false), (head("POST"), false, false),
            // A length owed with the stream already ended (nghttp2 refuses it first): never left open.
            (head(fields: [("content-length", "40")]), true, false),
            (head(fields: [("content-length", "0")]), true, true),
        ]
        for (h, endStream, reusable) in cases {
            guard case .success(let r) = H2Translation.request(h, form: .origin, endStream: endStream) else {
                Issue.record("refused")
                continue
            }
            let text = String(decoding: r.head, as: UTF8.self)
            #expect(r.leavesExchangeReusable == reusable, "\(text)")
            #expect(text.contains("Connection: close\r\n") == !reusable, "\(text)")
        }
    }

    @Test func connectNamesTheAuthority() throws {
        var h = head("CONNECT", scheme: "", authority: "example.test:443", path: "")
        h.scheme = []
        h.path = []
        guard case .success(let r) = H2Translation.request(h, form: .absolute, endStream: false) else {
            Issue.record("refused")
            return
        }
        #expect(r.isConnect && !r.chunkedBody && !r.leavesExchangeReusable)
        #expect(String(decoding: r.head, as: UTF8.self) == "CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\nConnection: close\r\n\r\n")
    }

    /// Anything that would become another request, field or target when written as HTTP/1.1.
    @Test(arguments: [
        (head(path: "/a b"), 400), (head(path: "/a\r\nX: y"), 400), (head(path: "a"), 400), (head(path: "*"), 400),
        (head(authority: "user@origin.test"), 400), (head(authority: "origin.test/x"), 400),
        (head(authority: "a b"), 400), (head(authority: ""), 400), (head(scheme: "ftp"), 400),
        (head("G T"), 400), (head(fields: [("host", "other.test")]), 400),
        (head(fields: [("X-Upper", "v")]), 400), (head(fields: [("x", "a\r\nb: c")]), 400),
        (head(fields: [("x", "nul\u{0}")]), 400),
        (head(fields: [("content-length", "1"), ("content-length", "2")]), 400),
    ])
    func whatHTTP11CannotCarryIsRefused(_ h: H2RequestHead, _ expected: Int) {
        #expect(status(H2Translation.request(h, form: .absolute, endStream: true)) == expected)
    }

    /// The byte classes the translation checks with are the classes they are named after, byte
    /// for byte (the authority's written as masks).
    @Test func theByteClassesHoldWhatTheirNamesSay() {
        let notInAuthority = Array("@/?#\\\"<>^`{|}".utf8)
        for b in UInt8.min...UInt8.max {
            let visible = b > 0x20 && b < 0x7F
            #expect(H2Translation.isFieldNameByte(b) == (isTchar(b) && !(0x41...0x5A).contains(b)), "\(b)")
            #expect([b].withUnsafeBytes { visibleBytesEnd($0, from: 0, to: 1) } == (visible ? 1 : 0), "\(b)")
            #expect(H2Translation.isAuthorityByte(b) == (visible && !notInAuthority.contains(b)), "\(b)")
        }
    }

    /// A value HTTP/1.1 cannot carry is refused wherever its control byte lies; a tab, obs-text
    /// and whitespace around a value are carried, the whitespace left out of the field's range.
    @Test func valuesAreHeldToHTTP11sGrammar() {
        for length in 1...12 {
            for position in 0..<length {
                for bad: UInt8 in [0, 0x01, 0x0A, 0x0B, 0x0D, 0x1F, 0x7F] {
                    var value = [UInt8](repeating: UInt8(ascii: "v"), count: length)
                    value[position] = bad
                    var h = head()
                    h.appendField(name: Array("x".utf8), value: value)
                    #expect(status(H2Translation.request(h, form: .origin, endStream: true)) == 400,
                            "\(bad) at \(position) of \(length)")
                }
            }
        }
        var h = head(fields: [("x", "a\tb"), ("y", " c "), ("cookie", ""), ("cookie", " d\t"), ("cookie", "")])
        h.appendField(name: Array("z".utf8), value: [0x80, 0xFF, 0x09])
        guard case .success(let r) = H2Translation.request(h, form: .origin, endStream: true) else {
            Issue.record("refused")
            return
        }
        #expect(r.head.contains(0xFF))
    }

    @Test func hopByHopFieldsAreDropped() {
        let r = H2Translation.request(head(fields: [("te", "trailers"), ("connection", "x"), ("upgrade", "h2c"),
                                                    ("keep-alive", "1"), ("transfer-encoding", "chunked")]),
                                      form: .origin, endStream: true)
        #expect(text(r) == "GET /a?b HTTP/1.1\r\nHost: origin.test:8080\r\n\r\n")
    }

    @Test func aHostFieldThatAgreesWithTheAuthorityIsAccepted() {
        let r = H2Translation.request(head(fields: [("host", "ORIGIN.test:8080")]), form: .origin, endStream: true)
        #expect(text(r) != nil)
    }

    @Test func anExtendedConnectForAWebSocketBecomesAnUpgrade() throws {
        var h = head("CONNECT", scheme: "https", path: "/chat", fields: [("sec-websocket-version", "13"),
                                                                        ("sec-websocket-key", "client-sent")])
        h.protocol = Array("websocket".utf8)
        let key = Array("dGhlIHNhbXBsZSBub25jZQ==".utf8)
        guard case .success(let r) = H2Translation.request(h, form: .origin, endStream: false, webSocketKey: key) else {
            Issue.record("refused")
            return
        }
        #expect(r.isWebSocket && !r.isConnect && r.method == .get && !r.chunkedBody)
        #expect(String(decoding: r.head, as: UTF8.self) == "GET /chat HTTP/1.1\r\nHost: origin.test:8080\r\n"
            + "sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
    }

    @Test func anExtendedConnectForAnotherProtocolIsRefused() {
        var h = head("CONNECT")
        h.protocol = Array("h2c".utf8)
        #expect(status(H2Translation.request(h, form: .origin, endStream: false)) == 501)
        var notConnect = head("GET")
        notConnect.protocol = Array("websocket".utf8)
        #expect(status(H2Translation.request(notConnect, form: .origin, endStream: false)) == 501)
    }

    @Test(arguments: [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
                      ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")])
    func base64IsRFC4648s(_ plain: String, _ encoded: String) {
        #expect(H2Translation.base64(Array(plain.utf8)) == Array(encoded.utf8))
    }

    @Test func webSocketKeysAreSixteenRandomBytes() {
        let a = H2Translation.randomWebSocketKey(), b = H2Translation.randomWebSocketKey()
        #expect(a.count == 24 && a != b)
    }
}

@Suite struct H2PrefaceTests {
    @Test(arguments: [
        ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", H2Preface.Verdict.h2), ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nmore", .h2),
        ("PRI * HT", .incomplete), ("P", .incomplete), ("POST / HTTP/1.1\r\n", .other),
        ("GET / HTTP/1.1\r\n", .other), ("PRI * HTTP/1.1\r\n", .other),
    ])
    func theConnectionPrefaceIsRecognised(_ input: String, _ verdict: H2Preface.Verdict) {
        let bytes = Array(input.utf8)
        #expect(bytes.withUnsafeBytes { H2Preface.check($0) } == verdict)
    }
}

@Suite struct H2AuthorityPortTests {
    @Test(arguments: [("larder.test:3128", "http", 3128), ("larder.test", "http", 80), ("larder.test", "https", 443),
                      ("[::1]:8080", "http", 8080), ("[::1]", "https", 443), ("a:", "http", nil), ("a:99999x", "http", nil)])
    func thePortAnAuthorityNames(_ authority: String, _ scheme: String, _ port: Int?) {
        #expect(H2Connection.port(of: Array(authority.utf8), scheme: Array(scheme.utf8)) == port)
    }
}
