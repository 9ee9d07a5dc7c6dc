import EventLoop
import HTTPWire
import LarderConfig

/// Where the proxy must not go: `deny_destinations` (host patterns before DNS, networks after)
/// and its own listeners (a request to itself would loop until the connection limit).
struct DestinationRules: Sendable {
    private(set) var hostPatterns: [HostPattern] = []
    /// Whether any host pattern is denied: read on every request, where it spares copying these
    /// rules (a reference count for each of their arrays) when there is none.
    private(set) var refusesHostNames = false
    var networks: [AddressRange] = []
    var ownListeners: OwnListeners
    /// This machine's own addresses, when `protect_this_host` applies (else empty). Addresses that
    /// appear later are caught when connected to (`SessionConfiguration.refuseThisMachine`).
    var thisMachine: [AddressRange] = []

    /// `protectThisHost`: the machine's own addresses (loopback, unspecified, its interfaces') are
    /// refused too, so clients from elsewhere cannot reach services that trust local callers.
    init(_ patterns: [DestinationPattern], ownListeners: OwnListeners, protectThisHost: Bool = false) {
        for p in patterns {
            switch p {
            case .host(let h): hostPatterns.append(h)
            case .network(let r): networks.append(r)
            }
        }
        refusesHostNames = !hostPatterns.isEmpty
        self.ownListeners = ownListeners
        if protectThisHost {
            thisMachine = AddressRange.thisHost
                + OwnListeners.interfaceAddresses().map { AddressRange(bytes: $0, prefixLength: $0.count * 8) }
        }
    }

    /// Why a host name (or address literal) given by the client may not be contacted, if it may not.
    func refusal(host: [UInt8]) -> String? {
        for pattern in hostPatterns where pattern.matches(host) {
            return "\(String(decoding: host, as: UTF8.self)) is in deny_destinations (\(pattern))"
        }
        return nil
    }

    /// Why a resolved address may not be connected to, if it may not.
    func refusal(address: SocketAddress) -> String? {
        refusal(address: address, port: address.port)
    }

    /// The same for `address` reached on `port` (a name's addresses are kept apart from the port
    /// a request names).
    func refusal(address: SocketAddress, port: Int) -> String? {
        let bytes = address.addressBytes
        if thisMachine.contains(where: { $0.contains(bytes) }) {
            return "\(address.host) is this machine (protect_this_host)"
        }
        for network in networks where network.contains(bytes) {
            return "\(address.host) is in deny_destinations (\(network))"
        }
        if ownListeners.contains(bytes, port: port) {
            let host = address.isIPv6 ? "[\(address.host)]" : address.host
            return "\(host):\(port) is this proxy itself"
        }
        return nil
    }
}
