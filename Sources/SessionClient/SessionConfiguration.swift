import HTTPWire

/// What a `Session` is made from, after NSURLSessionConfiguration: timeouts, connection limits, the
/// keep-alive pool, an optional parent proxy, TLS limits. All times are in seconds.
public struct SessionConfiguration: Sendable, Equatable {
    /// Fields added to every outbound request that does not carry them (httpAdditionalHeaders).
    public var httpAdditionalHeaders: [AdditionalHeader] = []
    /// Longest silence while waiting for bytes from the origin (timeoutIntervalForRequest).
    public var timeoutIntervalForRequest: Double = 60
    /// Longest whole exchange (timeoutIntervalForResource).
    public var timeoutIntervalForResource: Double = 604_800
    /// Longest connection setup.
    public var connectTimeout: Double = 10
    /// Open connections per origin; further requests wait in FIFO order (httpMaximumConnectionsPerHost).
    public var httpMaximumConnectionsPerHost: Int = 64
    /// Idle keep-alive connections kept per origin.
    public var maxIdleConnectionsPerHost: Int = 32
    /// Reuse a connection after a HEAD or 304 answer whose head announces a body: such a body, if a
    /// broken origin sends it anyway, is caught only when it arrives before the next request is
    /// written. False closes those connections instead (a new one per HEAD revalidation).
    public var reuseAfterBodylessAnswers: Bool = true
    /// Refuse a connection that turns out to reach this machine itself (its source and destination
    /// addresses are the same): catches addresses this machine gained after the rules were made.
    public var refuseThisMachine: Bool = false
    /// How long an idle pooled connection is kept.
    public var idleConnectionTimeout: Double = 60
    /// Send everything through this HTTP proxy (connectionProxyDictionary).
    public var parentProxy: ProxyAddress? = nil
    /// Name servers to use instead of /etc/resolv.conf's (`host:port`).
    public var nameServers: [String] = []
    /// Largest response head accepted from an origin.
    public var maxResponseHeadBytes: Int = 65_536
    /// Most header fields accepted in a response head.
    public var maxResponseHeaderCount: Int = 256
    /// Lowest TLS version offered to https origins (TLSMinimumSupportedProtocol): "1.2" or "1.3".
    public var tlsMinimumVersion: String = "1.2"
    /// Highest TLS version offered (TLSMaximumSupportedProtocol).
    public var tlsMaximumVersion: String = "1.3"
    /// PEM bundle to verify https origins against; nil: the system store.
    public var caFile: String? = nil
    /// Hosts whose certificate is accepted on its fingerprint alone (custom chain validation).
    public var trustExceptions: [TrustException] = []

    public init() {}
}

/// One `httpAdditionalHeaders` entry.
public struct AdditionalHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// A parent proxy's address.
public struct ProxyAddress: Sendable, Equatable {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) { self.host = host; self.port = port }
}

/// Accept the certificate with SHA-256 `sha256` (lowercase hex) for hosts matching `hostPattern`
/// (`name`, `*.suffix` or `*`), whatever its chain, name or dates.
public struct TrustException: Sendable, Equatable {
    public var hostPattern: HostPattern
    public var sha256: String
    public init(hostPattern: HostPattern, sha256: String) { self.hostPattern = hostPattern; self.sha256 = sha256 }
}
