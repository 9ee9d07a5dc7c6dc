import HTTPWire
import SessionClient
import Testing
@testable import ProxyServer

/// What the proxy sends upstream and downstream, from raw client and origin heads.
@Suite struct OutboundHeadTests {
    private func request(_ text: String) throws -> RequestHead {
        var head = RequestHead()
        let bytes = Array(text.utf8)
        let n = try bytes.withUnsafeBytes { raw throws(HTTPWireError) in
            try RequestParser.parse(raw, into: &head, limits: HeadLimits())
        }
        #expect(n == bytes.count)
        return head
    }

    private func response(_ text: String, method: HTTPMethod = .get) throws -> ResponseHead {
        var head = ResponseHead()
        let bytes = Array(text.utf8)
        _ = try bytes.withUnsafeBytes { raw throws(HTTPWireError) in
            try ResponseParser.parse(raw, into: &head, requestMethod: method, limits: HeadLimits())
        }
        return head
    }

    /// `clientHost`: reverse mode passing the client's Host on. The body declared is the one the
    /// request announces, as the connection sends it.
    private func outbound(_ text: String, absolute: Bool = false, clientHost: String? = nil,
                          additional: [AdditionalHeader] = [], parent: ProxyCredentials? = nil, upgrading: Bool = false,
                          revalidation: OutboundHead.Revalidation? = nil) throws -> String {
        var head = try request(text)
        head.removeFieldsNominatedByConnection()
        let target = head.headers.withBytes(head.target) { Array($0) }
        let parsed = try target.withUnsafeBytes { raw throws(HTTPWireError) in
            try RequestTarget.parse(raw, method: head.method)
        }
        var w = MessageWriter()
        let absoluteTarget = parsed.form == .absolute
        let route = OutboundHead.Route(scheme: parsed.scheme,
                                       originHost: absoluteTarget ? parsed.host : Array("origin.test".utf8),
                                       originPort: absoluteTarget ? parsed.port : (parsed.scheme == .https ? 443 : 80),
                                       absoluteForm: absolute, host: clientHost.map { Array($0.utf8) })
        let body: BodyFraming = revalidation == nil ? head.framing : .none
        target.withUnsafeBytes { raw in
            let path = UnsafeRawBufferPointer(rebasing: raw[parsed.pathRange(targetLength: raw.count)])
            OutboundHead.write(head, targetPath: path, route: route, viaName: Array("larder".utf8),
                               additionalHeaders: additional, parentCredentials: parent, upgrading: upgrading,
                               revalidation: revalidation,
                               body: body, into: &w)
        }
        return String(decoding: w.bytes, as: UTF8.self)
    }

    @Test("RFC 9110 §7.2: the Host authority elides the scheme's default port and brackets IPv6",
          arguments: [
              ("a.test", 80, URIScheme.http, "a.test"), ("a.test", 443, .https, "a.test"),
              ("a.test", 443, .http, "a.test:443"), ("a.test", 80, .https, "a.test:80"),
              ("a.test", 8, .http, "a.test:8"), ("a.test", 10, .http, "a.test:10"),
              ("a.test", 65535, .http, "a.test:65535"), ("::1", 80, .http, "[::1]"),
              ("2001:db8::1", 8443, .https, "[2001:db8::1]:8443"),
          ])
    func authority(host: String, port: Int, scheme: URIScheme, expected: String) {
        #expect(String(decoding: authorityBytes(host: Array(host.utf8), port: port, scheme: scheme), as: UTF8.self)
                == expected)
        let route = OutboundHead.Route(scheme: scheme, originHost: Array(host.utf8), originPort: port, absoluteForm: true)
        var w = MessageWriter()
        route.appendAuthority(into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == expected)
    }

    @Test("RFC 9110 §7.6.1: hop-by-hop fields and those named in Connection are dropped")
    func hopByHopDropped() throws {
        let out = try outbound("GET http://a.test/x?y=1 HTTP/1.1\r\nHost: a.test\r\nConnection: keep-alive, X-Secret\r\n"
                               + "X-Secret: 1\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\n"
                               + "Proxy-Authorization: Basic eA==\r\nTE: trailers\r\nTrailer: X\r\nUpgrade: h2c\r\n"
                               + "X-Kept: yes\r\nAccept: */*\r\n\r\n")
        #expect(out == "GET /x?y=1 HTTP/1.1\r\nHost: a.test\r\nX-Kept: yes\r\nAccept: */*\r\nVia: 1.1 larder\r\n\r\n")
    }

    @Test("RFC 9112 §3.2.2: Host is rewritten from the absolute target, default port elided")
    func hostFromTarget() throws {
        let out = try outbound("GET http://A.Test:8080 HTTP/1.1\r\nHost: wrong.test\r\n\r\n")
        #expect(out == "GET / HTTP/1.1\r\nHost: a.test:8080\r\nVia: 1.1 larder\r\n\r\n")
        let v6 = try outbound("GET http://[::1]:80/p HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(v6.hasPrefix("GET /p HTTP/1.1\r\nHost: [::1]\r\n"))
    }

    @Test("Parent proxy: absolute-form target kept")
    func absoluteFormToParent() throws {
        let out = try outbound("GET http://a.test:81/p HTTP/1.1\r\nHost: a.test:81\r\n\r\n", absolute: true)
        #expect(out.hasPrefix("GET http://a.test:81/p HTTP/1.1\r\nHost: a.test:81\r\n"))
    }

    @Test("Parent proxy: its own credentials replace the client's, which were for Larder")
    func parentCredentialsReplaceTheClients() throws {
        let parent = ProxyCredentials(user: "up", password: "stream")
        let text = "GET http://a.test/p HTTP/1.1\r\nHost: a.test\r\nProxy-Authorization: Basic Y2xpZW50OnNlY3JldA==\r\n\r\n"
        let toParent = try outbound(text, absolute: true, parent: parent)
        #expect(toParent == "GET http://a.test/p HTTP/1.1\r\nHost: a.test\r\nProxy-Authorization: Basic dXA6c3RyZWFt\r\n"
                + "Via: 1.1 larder\r\n\r\n")
        // In origin form the request goes to the origin itself (https through the parent's tunnel): no credentials.
        let toOrigin = try outbound(text, parent: parent)
        #expect(!toOrigin.lowercased().contains("proxy-authorization"))
    }

    @Test("Reverse mode sends the Host it was given, whatever the client's field says")
    func reverseSendsRouteHost() throws {
        let out = try outbound("GET /p HTTP/1.1\r\nHost: Public.Test.\r\n\r\n", clientHost: "public.test")
        #expect(out == "GET /p HTTP/1.1\r\nHost: public.test\r\nVia: 1.1 larder\r\n\r\n")
    }

    @Test("RFC 9112 §3.2: an HTTP/1.0 request without Host gets the origin's authority")
    func reverseAddsMissingHost() throws {
        let out = try outbound("GET /p HTTP/1.0\r\nX: 1\r\n\r\n")
        #expect(out == "GET /p HTTP/1.1\r\nHost: origin.test\r\nX: 1\r\nVia: 1.0 larder\r\n\r\n")
    }

    @Test("Smuggling: Connection cannot remove Content-Length or Host; the body is declared from what is sent",
          arguments: ["Content-Length", "content-length, Host", "close, Content-Length"])
    func connectionCannotRemoveFraming(_ listed: String) throws {
        let out = try outbound("POST http://a.test/u HTTP/1.1\r\nHost: a.test\r\nConnection: \(listed)\r\n"
                               + "Content-Length: 42\r\n\r\n")
        #expect(out == "POST /u HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 larder\r\nContent-Length: 42\r\n\r\n")
    }

    @Test("Smuggling: the client's Content-Length fields are never copied, only the length sent")
    func contentLengthWrittenOnce() throws {
        let out = try outbound("PUT http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\nX: 1\r\n\r\n")
        #expect(out == "PUT / HTTP/1.1\r\nHost: a.test\r\nX: 1\r\nVia: 1.1 larder\r\nContent-Length: 3\r\n\r\n")
    }

    @Test("A revalidation carries no body and no framing, whatever the client's request announced")
    func revalidationCarriesNoBody() throws {
        let revalidation = OutboundHead.Revalidation(method: .head, conditionalFields: Array("If-None-Match: \"v\"\r\n".utf8))
        let out = try outbound("GET http://a.test/r HTTP/1.1\r\nHost: a.test\r\nContent-Length: 90\r\n\r\n",
                               revalidation: revalidation)
        #expect(out == "HEAD /r HTTP/1.1\r\nHost: a.test\r\nIf-None-Match: \"v\"\r\nVia: 1.1 larder\r\n\r\n")
    }

    @Test("RFC 9112 §3.2: a fragment is never forwarded; a query without a path gets its slash")
    func fragmentAndBareQuery() throws {
        #expect(try outbound("GET http://a.test/p?x=1#frag HTTP/1.1\r\nHost: a.test\r\n\r\n").hasPrefix("GET /p?x=1 HTTP/1.1\r\n"))
        #expect(try outbound("GET http://a.test?x=1 HTTP/1.1\r\nHost: a.test\r\n\r\n").hasPrefix("GET /?x=1 HTTP/1.1\r\n"))
        #expect(try outbound("GET http://a.test#frag HTTP/1.1\r\nHost: a.test\r\n\r\n").hasPrefix("GET / HTTP/1.1\r\n"))
    }

    @Test("RFC 9110 §7.6.3: Via gets our entry after the existing ones, with the client's version")
    func viaAppended() throws {
        let out = try outbound("GET http://a.test/ HTTP/1.0\r\nVia: 1.1 other\r\n\r\n")
        #expect(out == "GET / HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 other\r\nVia: 1.0 larder\r\n\r\n")
    }

    @Test("RFC 9110 §7.6.2: Max-Forwards decremented for TRACE and OPTIONS only")
    func maxForwards() throws {
        let trace = try outbound("TRACE http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 5\r\n\r\n")
        #expect(trace.contains("Max-Forwards: 4\r\n"))
        #expect(!trace.contains("Max-Forwards: 5"))
        let get = try outbound("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 5\r\n\r\n")
        #expect(get.contains("Max-Forwards: 5\r\n"))
        #expect(OutboundHead.maxForwards(try request("OPTIONS * HTTP/1.1\r\nHost: a\r\nMax-Forwards: 0\r\n\r\n")) == 0)
        #expect(OutboundHead.maxForwards(try request("OPTIONS * HTTP/1.1\r\nHost: a\r\nMax-Forwards: x\r\n\r\n")) == nil)
    }

    @Test("Chunked request bodies are re-declared; Content-Length passes")
    func bodyFraming() throws {
        let chunked = try outbound("POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(chunked.hasSuffix("Via: 1.1 larder\r\nTransfer-Encoding: chunked\r\n\r\n"))
        let sized = try outbound("PUT http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\n\r\n")
        #expect(sized.hasSuffix("Content-Length: 3\r\n\r\n"))
        #expect(!sized.contains("Transfer-Encoding"))
    }

    @Test("httpAdditionalHeaders added only when the client did not send the field")
    func additionalHeaders() throws {
        let extra = [AdditionalHeader(name: "X-Team", value: "cache"), AdditionalHeader(name: "Accept", value: "a/b")]
        let out = try outbound("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\naccept: */*\r\n\r\n", additional: extra)
        #expect(out.contains("X-Team: cache\r\n"))
        #expect(out.contains("accept: */*\r\n"))
        #expect(!out.contains("a/b"))
    }

    @Test("Upgrade requests keep Connection: Upgrade and the Upgrade field")
    func upgrade() throws {
        let out = try outbound("GET http://a.test/ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
                               upgrading: true)
        #expect(out.hasSuffix("Via: 1.1 larder\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"))
    }

    @Test("Response heads: hop-by-hop dropped, Via added, framing chosen per client version")
    func responseHeads() throws {
        let chunked = try response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: X-A\r\nX-A: 1\r\n"
                                   + "Keep-Alive: timeout=3\r\nX-B: 2\r\n\r\n")
        #expect(ResponseHeadWriter.framing(for: chunked, clientVersion: .http11) == .chunked)
        #expect(ResponseHeadWriter.framing(for: chunked, clientVersion: .http10) == .untilClose)
        var w = MessageWriter()
        ResponseHeadWriter.write(chunked, framing: .chunked, keepAlive: true, clientVersion: .http11,
                                 viaName: Array("larder".utf8), upgrade: false, into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self)
                == "HTTP/1.1 200 OK\r\nX-B: 2\r\nVia: 1.1 larder\r\nTransfer-Encoding: chunked\r\n\r\n")

        let closeDelimited = try response("HTTP/1.0 200 OK\r\nX: y\r\n\r\n")
        w.reset()
        ResponseHeadWriter.write(closeDelimited, framing: .untilClose, keepAlive: true, clientVersion: .http10,
                                 viaName: Array("larder".utf8), upgrade: false, into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == "HTTP/1.1 200 OK\r\nX: y\r\nVia: 1.0 larder\r\nConnection: close\r\n\r\n")

        let sized = try response("HTTP/1.1 599 Odd\r\nContent-Length: 2\r\n\r\n")
        w.reset()
        ResponseHeadWriter.write(sized, framing: .contentLength, keepAlive: true, clientVersion: .http10,
                                 viaName: Array("larder".utf8), upgrade: false, into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self)
                == "HTTP/1.1 599 Odd\r\nContent-Length: 2\r\nVia: 1.1 larder\r\nConnection: keep-alive\r\n\r\n")
    }

    @Test("RFC 9110 §8.6: a Content-Length list of one value is forwarded as that one value")
    func contentLengthListNormalised() throws {
        var w = MessageWriter()
        for head in ["HTTP/1.1 200 OK\r\nContent-Length: 5, 05\r\nX: y\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\nContent-Length: 5\r\n\r\n"] {
            w.reset()
            ResponseHeadWriter.write(try response(head), framing: .contentLength, keepAlive: true, clientVersion: .http11,
                                     viaName: Array("larder".utf8), upgrade: false, into: &w)
            #expect(String(decoding: w.bytes, as: UTF8.self) == "HTTP/1.1 200 OK\r\nX: y\r\nContent-Length: 5\r\nVia: 1.1 larder\r\n\r\n")
        }
        // A HEAD answer's Content-Length describes the body it would have had: passed as it came.
        let head = try response("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n")
        w.reset()
        ResponseHeadWriter.write(head, framing: .none, keepAlive: true, clientVersion: .http11,
                                 viaName: Array("larder".utf8), upgrade: false, into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nVia: 1.1 larder\r\n\r\n")
    }

    @Test("Local error responses are plain text with an exact length")
    func localError() {
        var w = MessageWriter()
        LocalResponse.error(502, "connection refused by upstream 127.0.0.1:1", keepAlive: false,
                            cacheStatus: .bytes(Array("larder; fwd=uri-miss; detail=origin-error".utf8)), into: &w)
        let text = String(decoding: w.bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 43\r\n"))
        #expect(text.hasSuffix("Connection: close\r\n\r\nconnection refused by upstream 127.0.0.1:1\n"))
    }

    @Test("TRACE echo leaves credentials out")
    func traceEcho() throws {
        let head = try request("TRACE http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 0\r\nCookie: c=1\r\n"
                               + "Proxy-Authorization: Basic eA==\r\nX-T: 1\r\n\r\n")
        var w = MessageWriter()
        LocalResponse.trace(head, keepAlive: true, cacheStatus: .bytes(Array("larder; detail=local".utf8)), into: &w)
        let text = String(decoding: w.bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: message/http\r\n"))
        #expect(text.hasSuffix("\r\n\r\nTRACE http://a.test/ HTTP/1.1\r\nHost: a.test\r\nMax-Forwards: 0\r\nX-T: 1\r\n\r\n"))
    }
}
