import HTTPWire
import LarderConfig
import Testing
@testable import ProxyServer

/// Which requests a mirror serves and the upstream URL each stands for, from the target alone.
@Suite struct MirrorTableTests {
    static let pypi = MirrorConfig(
        name: "pypi", kind: .pypi, path: "/pypi/",
        upstream: MirrorUpstream(scheme: .https, host: "pypi.org", port: 443, path: "/"),
        also: [MirrorRoute(subpath: "files/", upstream: MirrorUpstream(scheme: .https, host: "files.pythonhosted.org",
                                                                       port: 443, path: "/"))])
    static let debian = MirrorConfig(
        name: "debian", kind: .debian, path: "/debian/",
        upstream: MirrorUpstream(scheme: .https, host: "deb.debian.org", port: 443, path: "/debian/"))
    static let local = MirrorConfig(
        name: "local", kind: .plain, path: "/local/",
        upstream: MirrorUpstream(scheme: .https, host: "127.0.0.1", port: 8443, path: "/repo/"))
    static let table = MirrorTable([pypi, debian, local])

    static func resolve(_ target: String) -> String {
        let result = Array(target.utf8).withUnsafeBytes { table.resolve(originForm: $0) }
        switch result {
        case .notMirrored: return "-"
        case .refused(let status, _): return "refused \(status)"
        case .mirrored(let match, let upstream):
            let name = table.entries[match.entry].config.name
            return "\(name): \(String(decoding: upstream, as: UTF8.self)) [\(String(decoding: match.relativePath, as: UTF8.self))]"
        }
    }

    @Test(arguments: [
        ("/pypi/simple/six/", "pypi: https://pypi.org/simple/six/ [simple/six/]"),
        ("/pypi/simple/six/?format=json", "pypi: https://pypi.org/simple/six/?format=json [simple/six/]"),
        ("/pypi/files/packages/ab/six-1.0-py3-none-any.whl",
         "pypi: https://files.pythonhosted.org/packages/ab/six-1.0-py3-none-any.whl [files/packages/ab/six-1.0-py3-none-any.whl]"),
        ("/debian/dists/bookworm/InRelease", "debian: https://deb.debian.org/debian/dists/bookworm/InRelease [dists/bookworm/InRelease]"),
        ("/local/a/b", "local: https://127.0.0.1:8443/repo/a/b [a/b]"),
        // Only under a mirror's path, spelled exactly.
        ("/pypix/simple/", "-"), ("/PYPI/simple/", "-"), ("/pypi", "-"), ("/", "-"),
        // A path cannot climb out of its upstream's prefix, however it is spelled.
        ("/debian/../etc/passwd", "refused 400"), ("/debian/dists/..", "refused 400"),
        ("/debian/%2e%2e/x", "refused 400"), ("/debian/%2E./x", "refused 400"), ("/debian/.%2e", "refused 400"),
        ("/debian/./x", "refused 400"), ("/debian/x/..%2fy", "refused 400"), ("/debian/x%2f..%2fy", "refused 400"),
        ("/debian/x%5c..", "refused 400"), ("/debian/a\\b", "refused 400"),
        // Dots inside names are names; a query's dots are not a path's.
        ("/debian/pool/main/a/a.b/a_1.0.deb", "debian: https://deb.debian.org/debian/pool/main/a/a.b/a_1.0.deb [pool/main/a/a.b/a_1.0.deb]"),
        ("/debian/x...y", "debian: https://deb.debian.org/debian/x...y [x...y]"),
        ("/local/x?path=../..", "local: https://127.0.0.1:8443/repo/x?path=../.. [x]"),
        // A scoped npm name keeps its encoded slash; an authority-looking path stays a path.
        ("/local/@scope%2fname", "local: https://127.0.0.1:8443/repo/@scope%2fname [@scope%2fname]"),
        ("/local//evil.example/x", "local: https://127.0.0.1:8443/repo//evil.example/x [/evil.example/x]"),
        ("/local/@evil.example/", "local: https://127.0.0.1:8443/repo/@evil.example/ [@evil.example/]"),
    ])
    func resolvesOriginFormTargets(_ target: String, _ expected: String) {
        #expect(Self.resolve(target) == expected)
    }

    static func capture(_ target: String) -> String {
        var head = RequestHead()
        let bytes = Array("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        _ = try? bytes.withUnsafeBytes { raw throws(HTTPWireError) in try RequestParser.parse(raw, into: &head, limits: HeadLimits()) }
        guard case .success(let parsed) = RequestRouter.parseTarget(head) else { return "unparsed" }
        let result = head.headers.withBytes(head.target) { table.capture(parsed, bytes: $0) }
        switch result {
        case .notMirrored: return "-"
        case .refused(let status, _): return "refused \(status)"
        case .mirrored(let match, let upstream):
            return "\(String(decoding: upstream, as: UTF8.self)) [\(String(decoding: match.relativePath, as: UTF8.self))]"
                + (match.rewritesURLs ? " rewrites" : "")
        }
    }

    @Test(arguments: [
        // The http:// form of a URL an https mirror upstream serves is fetched as that https URL.
        ("http://deb.debian.org/debian/pool/main/a/a_1.deb", "https://deb.debian.org/debian/pool/main/a/a_1.deb [pool/main/a/a_1.deb]"),
        ("http://DEB.debian.org/debian/dists/x/InRelease?x=1", "https://deb.debian.org/debian/dists/x/InRelease?x=1 [dists/x/InRelease]"),
        ("http://files.pythonhosted.org/packages/x.whl", "https://files.pythonhosted.org/packages/x.whl [files/packages/x.whl]"),
        // Not under the upstream's path, another port, another host, already https: not captured.
        ("http://deb.debian.org/debian-security/x", "-"), ("http://deb.debian.org:8080/debian/x", "-"),
        ("http://deb.debian.org.evil/debian/x", "-"), ("https://deb.debian.org/debian/x", "-"),
        ("http://deb.debian.org/debian/../x", "-"),
    ])
    func capturesPlainHTTPFormsOfUpstreamURLs(_ target: String, _ expected: String) {
        #expect(Self.capture(target) == expected)
    }
}

/// The memory all workers' held documents may take together.
@Suite struct MirrorHoldBudgetTests {
    @Test func reservesUpToTheLimitAndGivesBackWhatItTook() {
        let budget = MirrorHoldBudget(limit: 100)
        #expect(budget.reserve(60))
        #expect(!budget.reserve(41), "over the limit: nothing taken")
        #expect(budget.current == 60)
        #expect(budget.reserve(40))
        budget.release(100)
        #expect(budget.current == 0)
    }

    @Test func anExchangeGivesBackItsBytesWhenItGoes() throws {
        let budget = MirrorHoldBudget(limit: 100)
        let entry = MirrorTable([MirrorTableTests.pypi]).entries[0]
        let match = MirrorMatch(entry: 0, route: 1, relativePath: Array("simple/six/".utf8), rewritesURLs: true)
        var exchange: MirrorExchange? = MirrorExchange(match: match, entry: entry, plan: .relay,
                                                       publicBase: Array("http://h/pypi/".utf8), budget: budget)
        #expect(exchange!.reserve(70))
        #expect(!exchange!.reserve(31))
        #expect(budget.current == 70)
        exchange = nil  // a client that left mid-document
        #expect(budget.current == 0)
    }
}
