import EventLoop
import LarderConfig

/// Where start-up listens, worked out from the configuration before any socket is opened: the
/// proxy's plain listeners, then its HTTPS ones, each in the configured order, and the admin
/// endpoint. Pure: hosts are numeric literals, parsed, never looked up (`localhost` is 127.0.0.1).
struct ListenPlan {
    struct Listener {
        let endpoint: Endpoint
        let address: SocketAddress
        let tls: Bool
    }

    let proxy: [Listener]
    let admin: Listener?

    /// Throws `.badAddress` for the first endpoint whose host is no numeric address.
    init(listen: [Endpoint], tlsListen: [Endpoint], admin: Endpoint?, adminTLS: Bool) throws(ProxyServer.StartError) {
        var proxy: [Listener] = []
        for (endpoint, tls) in listen.map({ ($0, false) }) + tlsListen.map({ ($0, true) }) {
            proxy.append(Listener(endpoint: endpoint, address: try Self.address(endpoint), tls: tls))
        }
        self.proxy = proxy
        if let admin {
            self.admin = Listener(endpoint: admin, address: try Self.address(admin), tls: adminTLS)
        } else {
            self.admin = nil
        }
    }

    init(_ config: Config) throws(ProxyServer.StartError) {
        try self.init(listen: config.listen, tlsListen: config.tls.listen, admin: config.adminListen,
                      adminTLS: config.tls.admin)
    }

    /// The configured ports no other process may hold, with what each is for: all but port 0,
    /// which the first bind picks.
    var probes: [(address: SocketAddress, what: String)] {
        var out = proxy.filter { $0.address.port != 0 }.map { (address: $0.address, what: "") }
        if let admin, admin.address.port != 0 { out.append((admin.address, "admin endpoint: ")) }
        return out
    }

    private static func address(_ endpoint: Endpoint) throws(ProxyServer.StartError) -> SocketAddress {
        let host = endpoint.host == "localhost" ? "127.0.0.1" : endpoint.host
        guard let address = SocketAddress(ipLiteral: host, port: endpoint.port) else {
            throw .badAddress(endpoint.description)
        }
        return address
    }
}
