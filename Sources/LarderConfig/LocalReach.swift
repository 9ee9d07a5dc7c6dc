extension Endpoint {
    /// Where a client on this machine connects to reach a listener bound here: a wildcard
    /// (`0.0.0.0`, `::`) is reached on loopback, `localhost` (bound as 127.0.0.1) at 127.0.0.1;
    /// any other address as it is.
    public var reachedLocally: Endpoint {
        var host = self.host
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        switch host.lowercased() {
        case "0.0.0.0", "localhost": host = "127.0.0.1"
        case "::", "0:0:0:0:0:0:0:0": host = "::1"
        default: break
        }
        return Endpoint(host: host, port: port)
    }
}
