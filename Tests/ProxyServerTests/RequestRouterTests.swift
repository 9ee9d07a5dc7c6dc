import HTTPWire
import LarderConfig
import SessionClient
import Testing
@testable import ProxyServer

/// Where requests go, from their heads and the settings alone.
@Suite struct RequestRouterTests {
    static func head(_ text: String) -> RequestHead {
        var head = RequestHead()
        let bytes = Array((text + "\r\n\r\n").utf8)
        _ = try? bytes.withUnsafeBytes { raw throws(HTTPWireError) in
            try RequestParser.parse(raw, into: &head, limits: HeadLimits())
        }
        return head
    }

    static let forward = RequestRouter(reverseOrigin: nil, reverseHost: .client, reverseAllowedHosts: [],
                                       usesParentProxy: false)
    static let reverse = RequestRouter(reverseOrigin: OriginKey(scheme: .http, host: "10.0.0.9", port: 8080),
                                       reverseHost: .client, reverseAllowedHosts: ["site.example", "*.site.example"],
                                       usesParentProxy: false)

    /// A route, in a word (and the status, or the cache's name for the origin).
    static func summary(_ route: RequestRouter.Route) -> String {
        switch route {
        case .reject(let s, _): "reject \(s)"
        case .respond(let s, _, _): "respond \(s)"
        case .unservedHost: "unserved host"
        case .answerLocally: "local"
        case .purge: "purge"
        case .connect(let t): "connect \(t.hostString):\(t.port)"
        case .forward(let d, _): "forward \(d.origin) as \(d.keyedAs)\(d.checkAccess ? " checked" : "")"
        }
    }

    struct Row: CustomTestStringConvertible, Sendable {
        var name: String
        var reverse = false
        var head: String
        var purge = false
        var expected: String
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "absolute URI: forwarded, access checked", head: "GET http://a.example/x HTTP/1.1\r\nHost: a.example",
            expected: "forward a.example:80 as a.example:80 checked"),
        Row(name: "CONNECT", head: "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443", expected: "connect a.example:443"),
        Row(name: "CONNECT to a reverse proxy", reverse: true, head: "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443",
            expected: "respond 405"),
        Row(name: "origin form to a forward proxy", head: "GET /x HTTP/1.1\r\nHost: a.example", expected: "reject 400"),
        Row(name: "authority form without CONNECT", head: "GET a.example:80 HTTP/1.1\r\nHost: a.example", expected: "reject 400"),
        Row(name: "OPTIONS *", head: "OPTIONS * HTTP/1.1\r\nHost: a.example", expected: "local"),
        Row(name: "TRACE with Max-Forwards: 0", head: "TRACE http://a.example/ HTTP/1.1\r\nHost: a.example\r\nMax-Forwards: 0",
            expected: "local"),
        Row(name: "TRACE with Max-Forwards: 1", head: "TRACE http://a.example/ HTTP/1.1\r\nHost: a.example\r\nMax-Forwards: 1",
            expected: "forward a.example:80 as a.example:80 checked"),
        Row(name: "PURGE", head: "PURGE http://a.example/x HTTP/1.1\r\nHost: a.example", purge: true, expected: "purge"),
        Row(name: "ftp: to the gateway, access checked", head: "GET ftp://files.example/pub/a HTTP/1.1\r\nHost: files.example",
            expected: "forward files.example:21 as files.example:21 checked"),
        Row(name: "ftp: HEAD", head: "HEAD ftp://u:pw@files.example:2121/a HTTP/1.1\r\nHost: files.example",
            expected: "forward files.example:2121 as files.example:2121 checked"),
        Row(name: "ftp: no uploads", head: "PUT ftp://files.example/a HTTP/1.1\r\nHost: files.example\r\nContent-Length: 0",
            expected: "respond 405"),
        Row(name: "ftp: no deletes", head: "DELETE ftp://files.example/a HTTP/1.1\r\nHost: files.example", expected: "respond 405"),
        Row(name: "reverse: origin form keyed on the client's Host", reverse: true,
            head: "GET /x HTTP/1.1\r\nHost: site.example", expected: "forward 10.0.0.9:8080 as site.example:80"),
        Row(name: "reverse: the default port is elided", reverse: true,
            head: "GET /x HTTP/1.1\r\nHost: site.example:80", expected: "forward 10.0.0.9:8080 as site.example:80"),
        Row(name: "reverse: a listed subdomain", reverse: true,
            head: "GET /x HTTP/1.1\r\nHost: www.site.example", expected: "forward 10.0.0.9:8080 as www.site.example:80"),
        Row(name: "reverse: an unlisted Host", reverse: true, head: "GET /x HTTP/1.1\r\nHost: evil.example",
            expected: "unserved host"),
        Row(name: "reverse: an absolute URI names a Host, not a destination", reverse: true,
            head: "GET http://evil.example/x HTTP/1.1\r\nHost: site.example", expected: "unserved host"),
        Row(name: "reverse: a Host that is not a host", reverse: true, head: "GET /x HTTP/1.1\r\nHost: a b",
            expected: "reject 400"),
    ]

    @Test(arguments: rows) func routes(_ row: Row) {
        let router = row.reverse ? Self.reverse : Self.forward
        #expect(Self.summary(router.route(Self.head(row.head), interceptedOrigin: nil, isPurge: row.purge)) == row.expected)
    }

    /// A destination in full: what the summary leaves out is where a remembered Host could differ.
    static func detail(_ route: RequestRouter.Route) -> String {
        guard case .forward(let d, let path) = route else { return summary(route) }
        let bytes = { (b: [UInt8]?) in b.map { String(decoding: $0, as: UTF8.self) } ?? "-" }
        return "\(summary(route)) host \(bytes(d.route.host)) origin \(bytes(d.route.originHost)):\(d.route.originPort) "
            + "absolute \(d.route.absoluteForm) keyed \(bytes(d.keyedHost)) access \(bytes(d.accessHost)) path \(path)"
    }

    /// A worker's routes remember the last Host and origin: whatever order requests come in, each
    /// is routed as it would be on its own, whichever Host, origin, router or target form came
    /// before it.
    @Test func aRememberedHostRoutesAsReadingItAgainWould() {
        let base = Self.reverse
        let other = RequestRouter(reverseOrigin: OriginKey(scheme: .https, host: "10.0.0.10", port: 8443),
                                  reverseHost: base.reverseHost, reverseAllowedHosts: base.reverseAllowedHosts,
                                  usesParentProxy: false)
        let byOrigin = RequestRouter(reverseOrigin: base.reverseOrigin, reverseHost: .origin,
                                     reverseAllowedHosts: base.reverseAllowedHosts, usesParentProxy: false)
        let open = RequestRouter(reverseOrigin: base.reverseOrigin, reverseHost: base.reverseHost,
                                 reverseAllowedHosts: [], usesParentProxy: false)
        let parent = RequestRouter(reverseOrigin: base.reverseOrigin, reverseHost: base.reverseHost,
                                   reverseAllowedHosts: base.reverseAllowedHosts, usesParentProxy: true)
        let forwardToParent = RequestRouter(reverseOrigin: nil, reverseHost: .client, reverseAllowedHosts: [],
                                            usesParentProxy: true)
        let routers = [Self.reverse, other, byOrigin, open, parent, Self.forward, forwardToParent]
        let heads = ["GET /x HTTP/1.1\r\nHost: site.example", "GET /y?q HTTP/1.1\r\nHost: site.example",
                     "GET /x HTTP/1.1\r\nHost: SITE.example:80", "GET /x HTTP/1.1\r\nHost: site.example:8080",
                     "GET /x HTTP/1.1\r\nHost: www.site.example", "GET /x HTTP/1.1\r\nHost: evil.example",
                     "GET /x HTTP/1.1\r\nHost: a b", "GET /x HTTP/1.1\r\nHost: site.example.",
                     "GET http://evil.example/x HTTP/1.1\r\nHost: site.example",
                     "GET http://site.example:81/x HTTP/1.1\r\nHost: site.example", "GET /x HTTP/1.0",
                     "GET http://site.example/y?q HTTP/1.1\r\nHost: site.example",
                     "GET https://site.example/x HTTP/1.1\r\nHost: site.example",
                     "GET http://site.exampla/x HTTP/1.1\r\nHost: site.exampla",
                     "GET http://SITE.example/x HTTP/1.1\r\nHost: site.example",
                     "GET http://[::1]:81/x HTTP/1.1\r\nHost: [::1]:81"]
        let hosts = RouteMemo()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let router = routers.randomElement(using: &generator)!
            let head = Self.head(heads.randomElement(using: &generator)!)
            let alone = router.route(head, interceptedOrigin: nil, isPurge: false)
            let remembered = router.route(head, interceptedOrigin: nil, isPurge: false, memo: hosts)
            #expect(Self.detail(remembered) == Self.detail(alone))
        }
    }

    /// A forward proxy's requests to the origin remembered share its destination; another port or
    /// host makes another.
    @Test func requestsToTheRememberedOriginShareItsDestination() {
        let hosts = RouteMemo()
        func destination(_ text: String) -> RequestRouter.Destination? {
            guard case .forward(let d, _) = Self.forward.route(Self.head(text), interceptedOrigin: nil, isPurge: false,
                                                               memo: hosts) else { return nil }
            return d
        }
        let first = destination("GET http://site.example/x HTTP/1.1\r\nHost: site.example")
        let second = destination("GET http://site.example/y?z HTTP/1.1\r\nHost: site.example")
        let otherPort = destination("GET http://site.example:81/x HTTP/1.1\r\nHost: site.example:81")
        let otherHost = destination("GET http://site.exampla:81/x HTTP/1.1\r\nHost: site.exampla:81")
        #expect(first != nil && first === second)
        #expect(otherPort != nil && otherPort !== first && otherHost !== otherPort)
    }

    /// Requests naming the Host remembered share its destination, each with its own path; another
    /// Host, or a router made anew (a reload), makes another.
    @Test func requestsNamingTheRememberedHostShareItsDestination() {
        let hosts = RouteMemo()
        func destination(_ router: RequestRouter, _ text: String) -> (RequestRouter.Destination, Range<Int>)? {
            guard case .forward(let d, let path) = router.route(Self.head(text), interceptedOrigin: nil, isPurge: false,
                                                                memo: hosts) else { return nil }
            return (d, path)
        }
        let router = Self.reverse
        guard let (first, firstPath) = destination(router, "GET /x HTTP/1.1\r\nHost: site.example"),
              let (second, secondPath) = destination(router, "GET /longer/y?q HTTP/1.1\r\nHost: site.example"),
              let (third, _) = destination(router, "GET /x HTTP/1.1\r\nHost: www.site.example"),
              let (fourth, _) = destination(router, "GET /x HTTP/1.1\r\nHost: www.site.example") else {
            Issue.record("not forwarded")
            return
        }
        #expect(first === second)
        #expect(firstPath != secondPath)
        #expect(third !== first && fourth === third)
        let reloaded = RequestRouter(reverseOrigin: router.reverseOrigin, reverseHost: router.reverseHost,
                                     reverseAllowedHosts: router.reverseAllowedHosts, usesParentProxy: true)
        guard let (fifth, _) = destination(reloaded, "GET /x HTTP/1.1\r\nHost: www.site.example") else {
            Issue.record("not forwarded")
            return
        }
        #expect(fifth !== third && fifth.route.absoluteForm && !third.route.absoluteForm)
    }

    /// A login of its own keeps an ftp:// request away from the cache; the public one does not.
    @Test(arguments: [("ftp://h/a", "", false), ("ftp://anonymous@h/a", "", false), ("ftp://FTP:@h/a", "", false), ("ftp://ftp:s3cret@h/a", "", true), ("ftp://anonymous:me%40x@h/a", "", true),
                      ("ftp://@h/a", "", false), ("ftp://alice:pw@h/a", "", true), ("ftp://alice@h/a", "", true),
                      ("ftp://h/a", "\r\nAuthorization: Basic YTpi", true)])
    func ftpLogins(_ url: String, _ fields: String, _ credentials: Bool) {
        guard case .forward(let d, _) = Self.forward.route(Self.head("GET \(url) HTTP/1.1\r\nHost: h" + fields),
                                                        interceptedOrigin: nil, isPurge: false) else {
            Issue.record("not forwarded")
            return
        }
        #expect(d.carriesCredentials == credentials)
        #expect(d.route.absoluteForm && d.route.scheme == .ftp)
        #expect(d.route.userinfo.map { String(decoding: $0, as: UTF8.self) } == url.split(separator: "@").dropLast().last.map {
            String($0.dropFirst(6)) })
    }

    /// Through a parent proxy http:// goes in absolute form; https:// in origin form, inside TLS
    /// with the origin through the parent's tunnel (the parent must not see it in the clear).
    @Test(arguments: [("GET http://a.example/x HTTP/1.1\r\nHost: a.example", true),
                      ("GET https://a.example/x HTTP/1.1\r\nHost: a.example", false)])
    func throughAParentProxy(_ text: String, absolute: Bool) {
        let router = RequestRouter(reverseOrigin: nil, reverseHost: .client, reverseAllowedHosts: [], usesParentProxy: true)
        guard case .forward(let d, _) = router.route(Self.head(text), interceptedOrigin: nil, isPurge: false) else {
            Issue.record("not forwarded")
            return
        }
        #expect(d.route.absoluteForm == absolute)
        #expect(d.checkAccess)
    }

    @Test func anHTTPSReverseOriginThroughAParentProxyIsAskedInOriginForm() {
        let router = RequestRouter(reverseOrigin: OriginKey(scheme: .https, host: "10.0.0.9", port: 8443),
                                   reverseHost: .client, reverseAllowedHosts: Self.reverse.reverseAllowedHosts,
                                   usesParentProxy: true)
        guard case .forward(let d, _) = router.route(Self.head("GET /x HTTP/1.1\r\nHost: site.example"),
                                                  interceptedOrigin: nil, isPurge: false) else {
            Issue.record("not forwarded")
            return
        }
        #expect(!d.route.absoluteForm)
    }

    @Test func originFormInsideAnInterceptedConnectGoesToItsDestination() {
        let intercepted = OriginKey(scheme: .https, host: "b.example", port: 443)
        #expect(Self.summary(Self.forward.route(Self.head("GET /y HTTP/1.1\r\nHost: b.example"),
                                                interceptedOrigin: intercepted, isPurge: false))
                == "forward b.example:443 as b.example:443")
    }

    @Test func purgeIsRecognisedByItsMethodName() {
        #expect(Purge.isPurge(Self.head("PURGE http://a.example/ HTTP/1.1\r\nHost: a.example")))
        #expect(!Purge.isPurge(Self.head("GET http://a.example/ HTTP/1.1\r\nHost: a.example")))
    }
}
