import LarderConfig
import Testing
@testable import ProxyServer

/// Start-up's pure parts: the order of its steps, the listen addresses it works out before any
/// socket is opened, and the line a failed step stops it with.
@Suite struct StartUpTests {
    /// Steps that must come before others, and why.
    static let orderings: [(StartStep, StartStep, String)] = [
        (.checkConfiguration, .loadSettings, "settings are made from a configuration that passed the checks"),
        (.raiseOpenFiles, .loadSettings, "the descriptor budget is sized by the raised limit"),
        (.loadInterceptionCA, .openCache, "a damaged cache is moved aside with cache_dir/ca, where the CA was once kept"),
        (.openCache, .startInterception, "minted certificates are kept under cache_dir"),
        (.openAccessLog, .prepareWorkers, "every worker writes the access log"),
        (.loadCertificate, .prepareWorkers, "the HTTPS listeners take the certificate"),
        (.startInterception, .prepareWorkers, "every worker intercepts"),
        (.planListeners, .checkPorts, "the ports probed are the planned addresses"),
        (.checkPorts, .bindListeners, "every port is probed before any is bound"),
        (.bindListeners, .startAdmin, "POST /warm warms through the first proxy listener"),
        (.startAdmin, .startWorkers, "every listener is bound before any worker thread runs"),
    ]

    @Test(arguments: orderings.indices)
    func stepOrder(_ i: Int) {
        let (earlier, later, why) = Self.orderings[i]
        #expect(earlier < later, "\(earlier.doing) before \(later.doing): \(why)")
    }

    @Test func theWorkersStartLast() {
        #expect(StartStep.allCases.last == .startWorkers)
        #expect(Set(StartStep.allCases.map(\.doing)).count == StartStep.allCases.count, "each step says what it does")
    }

    static func endpoint(_ host: String, _ port: Int, proxyProtocol: Bool = false) -> Endpoint {
        var e = Endpoint(host: host, port: port)
        e.proxyProtocol = proxyProtocol
        return e
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var listen: [Endpoint]
        var tlsListen: [Endpoint] = []
        var admin: Endpoint? = nil
        var adminTLS = false
        /// Each proxy listener's address, with " tls" for an HTTPS one.
        var proxy: [String]
        var adminAt: String? = nil
        var probes: [String]
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "plain listeners, then HTTPS ones, each in the order configured",
            listen: [endpoint("127.0.0.1", 3128), endpoint("::1", 3130)], tlsListen: [endpoint("0.0.0.0", 3129)],
            proxy: ["127.0.0.1:3128", "[::1]:3130", "0.0.0.0:3129 tls"],
            probes: ["127.0.0.1:3128", "[::1]:3130", "0.0.0.0:3129"]),
        Row(name: "localhost is 127.0.0.1, never looked up",
            listen: [endpoint("localhost", 8080)], proxy: ["127.0.0.1:8080"], probes: ["127.0.0.1:8080"]),
        Row(name: "the admin endpoint is probed last, named",
            listen: [endpoint("127.0.0.1", 3128)], admin: endpoint("127.0.0.1", 9000), adminTLS: true,
            proxy: ["127.0.0.1:3128"], adminAt: "127.0.0.1:9000 tls",
            probes: ["127.0.0.1:3128", "admin endpoint: 127.0.0.1:9000"]),
        Row(name: "port 0 is picked when bound, never probed",
            listen: [endpoint("127.0.0.1", 0)], tlsListen: [endpoint("127.0.0.1", 0)], admin: endpoint("127.0.0.1", 0),
            proxy: ["127.0.0.1:0", "127.0.0.1:0 tls"], adminAt: "127.0.0.1:0", probes: []),
        Row(name: "no listener at all: nothing to bind or probe", listen: [], proxy: [], probes: []),
    ]

    @Test(arguments: rows)
    func listenPlan(_ row: Row) throws {
        let plan = try ListenPlan(listen: row.listen, tlsListen: row.tlsListen, admin: row.admin, adminTLS: row.adminTLS)
        func said(_ l: ListenPlan.Listener) -> String { l.address.description + (l.tls ? " tls" : "") }
        #expect(plan.proxy.map(said) == row.proxy)
        #expect(plan.admin.map(said) == row.adminAt)
        #expect(plan.probes.map { $0.what + $0.address.description } == row.probes)
    }

    @Test func theProxyProtocolGoesWithItsListener() throws {
        let plan = try ListenPlan(listen: [Self.endpoint("127.0.0.1", 1), Self.endpoint("127.0.0.1", 2, proxyProtocol: true)],
                                  tlsListen: [], admin: nil, adminTLS: false)
        #expect(plan.proxy.map(\.endpoint.proxyProtocol) == [false, true])
    }

    @Test(arguments: [
        ([endpoint("example.com", 80)], nil as Endpoint?),
        ([endpoint("127.0.0.1", 80)], endpoint("admin.example", 9000)),
    ])
    func aHostThatIsNoAddressStopsTheStart(_ listen: [Endpoint], _ admin: Endpoint?) {
        let bad = admin ?? listen[0]
        #expect(throws: ProxyServer.StartError.self) {
            _ = try ListenPlan(listen: listen, tlsListen: [], admin: admin, adminTLS: false)
        }
        do {
            _ = try ListenPlan(listen: listen, tlsListen: [], admin: admin, adminTLS: false)
        } catch {
            #expect(error.description == "cannot listen on \(bad): not a numeric IPv4 or IPv6 address")
        }
    }

    @Test func aFailedStepSaysWhatLarderWasDoing() {
        let error = ProxyServer.StartError.during(.openCache, .cache("cannot open the cache in /c: denied"))
        #expect(error.description == "opening the cache: cannot open the cache in /c: denied")
        let nested = ProxyServer.StartError.during(.startAdmin, .listen("address in use"))
        #expect(nested.description == "starting the admin endpoint: address in use")
    }
}
