import EventLoop
import HTTPWire
import Testing
@testable import ProxyServer

/// The admin endpoint's defence against browsers: DNS rebinding (`Host`) and cross-site requests
/// (`Origin`, form content types, `Sec-Fetch-Site`).
@Suite struct AdminRequestGuardTests {
    static func guardOn(_ address: String, _ port: Int = 9090, scheme: String = "http",
                        names: [String] = []) -> AdminRequestGuard {
        AdminRequestGuard(local: SocketAddress(ipLiteral: address, port: port)!, scheme: scheme, names: names)
    }

    static let loopbackHosts: [(String, Bool)] = [
        ("127.0.0.1:9090", true), ("127.0.0.1", true), ("127.0.0.1:", true), ("localhost:9090", true),
        ("LOCALHOST", true), (" localhost:9090 ", true),
        ("127.0.0.1:9091", false), ("localhost:80", false), ("127.0.0.2:9090", false), ("evil.example:9090", false),
        ("127.evil.example:9090", false), ("localhost.evil.example", false), ("[::1]:9090", false),
        ("127.0.0.1:99999", false), ("127.0.0.1:+90", false), ("", false), (":9090", false), ("[127.0.0.1]:9090", true),
    ]

    @Test(arguments: loopbackHosts) func hostOnIPv4Loopback(_ host: String, _ accepted: Bool) {
        #expect(Self.guardOn("127.0.0.1").acceptsHost(host) == accepted)
    }

    @Test func hostOnIPv6AndMappedAddresses() {
        let v6 = Self.guardOn("::1")
        #expect(v6.acceptsHost("[::1]:9090") && v6.acceptsHost("[0:0:0:0:0:0:0:1]") && v6.acceptsHost("localhost:9090"))
        #expect(!v6.acceptsHost("::1") && !v6.acceptsHost("127.0.0.1:9090") && !v6.acceptsHost("[::1]9090"))
        // An IPv4 client of a dual-stack listener arrives on ::ffff:127.0.0.1.
        let mapped = Self.guardOn("::ffff:127.0.0.1")
        #expect(mapped.acceptsHost("127.0.0.1:9090") && mapped.acceptsHost("localhost"))
    }

    @Test func localhostOnlyWhenTheAddressIsLoopback() {
        let lan = Self.guardOn("10.0.0.5")
        #expect(lan.acceptsHost("10.0.0.5:9090"))
        #expect(!lan.acceptsHost("localhost:9090"))
    }

    @Test func adminHostsMatchAnyPort() {
        let named = Self.guardOn("10.0.0.5", names: ["larder.internal", "fd00::5"])
        #expect(named.acceptsHost("larder.internal") && named.acceptsHost("Larder.Internal:8443"))
        #expect(named.acceptsHost("[fd00:0::5]:1"))
        #expect(!named.acceptsHost("larder.internal.evil.example") && !named.acceptsHost("internal"))
    }

    static let origins: [(String, Bool)] = [
        ("http://127.0.0.1:9090", true), ("http://localhost:9090", true), ("HTTP://LOCALHOST:9090", true),
        ("http://evil.example", false), ("null", false), ("", false), ("http://127.0.0.1", false),
        ("https://127.0.0.1:9090", false), ("http://127.0.0.1:9091", false), ("http://127.0.0.1:9090/", false),
        ("ftp://127.0.0.1:9090", false), ("http://user@127.0.0.1:9090", false),
    ]

    @Test(arguments: origins) func originOfAPlainEndpoint(_ origin: String, _ accepted: Bool) {
        #expect(Self.guardOn("127.0.0.1").acceptsOrigin(origin) == accepted)
    }

    @Test func originDefaultPortAndNames() {
        #expect(Self.guardOn("127.0.0.1", 443, scheme: "https").acceptsOrigin("https://127.0.0.1"))
        #expect(Self.guardOn("127.0.0.1", 80).acceptsOrigin("http://localhost"))
        let named = Self.guardOn("127.0.0.1", names: ["admin.example.com"])
        #expect(named.acceptsOrigin("https://admin.example.com"))
    }

    typealias Request = AdminRequestGuard.Request

    @Test func readsPassWhateverTheirOrigin() {
        let g = Self.guardOn("127.0.0.1")
        #expect(g.refusal(Request(method: .get, path: "/stats", host: "127.0.0.1:9090", origin: "http://evil.example",
                                  contentType: "text/plain", fetchSite: "cross-site")) == nil)
    }

    @Test func wrongHostIs421EvenForReads() {
        let g = Self.guardOn("127.0.0.1")
        let r = g.refusal(Request(method: .get, path: "/stats", host: "evil.example:9090"))
        #expect(r?.status == 421)
        #expect(r?.reason == "Host evil.example:9090 is not this admin endpoint: use 127.0.0.1:9090 or localhost:9090, "
                + "or add the name to admin_hosts")
    }

    @Test func healthzAndRequestsWithoutHostPass() {
        let g = Self.guardOn("127.0.0.1")
        #expect(g.refusal(Request(method: .get, path: "/healthz", host: "10.1.2.3:9090")) == nil)
        #expect(g.refusal(Request(method: .post, path: "/config/reload")) == nil)
    }

    static let crossSite: [Request] = [
        Request(method: .post, path: "/config/reload", origin: "http://evil.example"),
        Request(method: .delete, path: "/cache", origin: "null"),
        Request(method: .post, path: "/config/reload", contentType: "application/x-www-form-urlencoded"),
        Request(method: .post, path: "/config/reload", contentType: "Multipart/Form-Data; boundary=x"),
        Request(method: .put, path: "/cache", contentType: " text/plain;charset=UTF-8"),
        Request(method: .patch, path: "/cache", fetchSite: "cross-site"),
        Request(method: .other, path: "/cache", fetchSite: "same-site"),
        Request(method: .options, path: "/cache", origin: "http://127.0.0.1:8000"),
    ]

    @Test(arguments: crossSite) func crossSiteStateChangesAre403(_ request: Request) {
        var r = request
        r.host = "127.0.0.1:9090"
        #expect(Self.guardOn("127.0.0.1").refusal(r)?.status == 403)
    }

    @Test func sameOriginAndToolStateChangesPass() {
        let g = Self.guardOn("127.0.0.1")
        #expect(g.refusal(Request(method: .post, path: "/config/reload", host: "127.0.0.1:9090",
                                  origin: "http://127.0.0.1:9090", fetchSite: "same-origin")) == nil)
        #expect(g.refusal(Request(method: .delete, path: "/cache", host: "localhost:9090",
                                  contentType: "application/json", fetchSite: "none")) == nil)
    }

    @Test func tokensAreRedactedFromLoggedTargets() {
        #expect(AdminTarget.redacted("/stats?token=abc") == "/stats?token=REDACTED")
        #expect(AdminTarget.redacted("/?a=1&token=abc&b=2") == "/?a=1&token=REDACTED&b=2")
        #expect(AdminTarget.redacted("/?%74oken=abc&TOKEN=d&token") == "/?%74oken=REDACTED&TOKEN=REDACTED&token=REDACTED")
        #expect(AdminTarget.redacted("/cache?url=http%3A%2F%2Fa%2F%3Ftoken%3Dx") == "/cache?url=http%3A%2F%2Fa%2F%3Ftoken%3Dx")
        #expect(AdminTarget.redacted("/stats") == "/stats")
        #expect(AdminTarget.redacted("/stats?&&tokens=1") == "/stats?&&tokens=1")
    }
}
