import HTTPWire

/// What a `Session` is made from, after NSURLSessionConfiguration: timeouts, connection limits, the
/// keep-alive pool, an optional parent proxy, TLS limits. All times are in seconds.
///
/// Larder's configuration (its `session.*` keys) holds the defaults; the initialiser takes every
/// value it sets, so no default is written here a second time.
public struct SessionConfiguration: Sendable, Equatable {
    /// Fields added to every outbound request that does not carry them (httpAdditionalHeaders).
    public var httpAdditionalHeaders: [AdditionalHeader]
    /// Longest silence while waiting for bytes from the origin (timeoutIntervalForRequest).
    public var timeoutIntervalForRequest: Double
    /// Longest whole exchange (timeoutIntervalForResource).
    public var timeoutIntervalForResource: Double
    /// Longest connection setup.
    public var connectTimeout: Double
    /// Open connections per origin; further requests wait in FIFO order (httpMaximumConnectionsPerHost).
    public var httpMaximumConnectionsPerHost: Int
    /// Idle keep-alive connections kept per origin.
    public var maxIdleConnectionsPerHost: Int
    /// Idle keep-alive connections kept across all origins (the longest idle closed first): the
    /// session's share of what the open-files limit allows.
    public var maxIdleConnections: Int = .max
    /// Reuse a connection after a HEAD or 304 answer whose head announces a body: such a body, if a
    /// broken origin sends it anyway, is caught only when it arrives before the next request is
    /// written. False closes those connections instead (a new one per HEAD revalidation).
    public var reuseAfterBodylessAnswers: Bool
    /// Refuse a connection that turns out to reach this machine itself (its source and destination
    /// addresses are the same): catches addresses this machine gained after the rules were made.
    public var refuseThisMachine: Bool
    /// How long an idle pooled connection is kept.
    public var idleConnectionTimeout: Double
    /// Send everything through this HTTP proxy (connectionProxyDictionary).
    public var parentProxy: ProxyAddress?
    /// Name servers to use instead of /etc/resolv.conf's (`host:port`); empty: resolv.conf's.
    public var nameServers: [String]
    /// Largest response head accepted from an origin.
    public var maxResponseHeadBytes: Int
    /// Most header fields accepted in a response head (no configuration key sets it).
    public var maxResponseHeaderCount: Int = 256
    /// Lowest TLS version offered to https origins (TLSMinimumSupportedProtocol): "1.2" or "1.3".
    public var tlsMinimumVersion: String
    /// Highest TLS version offered (TLSMaximumSupportedProtocol).
    public var tlsMaximumVersion: String
    /// PEM bundle to verify https origins against; nil: the system store.
    public var caFile: String?
    /// Hosts whose certificate is accepted on its fingerprint alone (custom chain validation).
    public var trustExceptions: [TrustException]
    /// https origins are offered `h2` by ALPN (`session.http2: auto`); off: `http/1.1` only.
    public var http2 = true

    public init(httpAdditionalHeaders: [AdditionalHeader], timeoutIntervalForRequest: Double,
                timeoutIntervalForResource: Double, connectTimeout: Double, httpMaximumConnectionsPerHost: Int,
                maxIdleConnectionsPerHost: Int, reuseAfterBodylessAnswers: Bool, refuseThisMachine: Bool,
                idleConnectionTimeout: Double, parentProxy: ProxyAddress?, nameServers: [String],
                maxResponseHeadBytes: Int, tlsMinimumVersion: String, tlsMaximumVersion: String, caFile: String?,
                trustExceptions: [TrustException]) {
        self.httpAdditionalHeaders = httpAdditionalHeaders
        self.timeoutIntervalForRequest = timeoutIntervalForRequest
        self.timeoutIntervalForResource = timeoutIntervalForResource
        self.connectTimeout = connectTimeout
        self.httpMaximumConnectionsPerHost = httpMaximumConnectionsPerHost
        self.maxIdleConnectionsPerHost = maxIdleConnectionsPerHost
        self.reuseAfterBodylessAnswers = reuseAfterBodylessAnswers
        self.refuseThisMachine = refuseThisMachine
        self.idleConnectionTimeout = idleConnectionTimeout
        self.parentProxy = parentProxy
        self.nameServers = nameServers
        self.maxResponseHeadBytes = maxResponseHeadBytes
        self.tlsMinimumVersion = tlsMinimumVersion
        self.tlsMaximumVersion = tlsMaximumVersion
        self.caFile = caFile
        self.trustExceptions = trustExceptions
    }
}

/// One `httpAdditionalHeaders` entry.
public struct AdditionalHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// A parent proxy: its address, and the credentials it wants, if any.
public struct ProxyAddress: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var credentials: ProxyCredentials?
    public init(host: String, port: Int, credentials: ProxyCredentials? = nil) {
        self.host = host; self.port = port; self.credentials = credentials
    }
    /// The parent as a connection target (plain TCP: parents are reached over http://).
    public var key: OriginKey { OriginKey(scheme: .http, host: host, port: port) }
}

/// Accept the certificate with SHA-256 `sha256` (lowercase hex) for hosts matching `hostPattern`
/// (`name`, `*.suffix` or `*`), whatever its chain, name or dates.
public struct TrustException: Sendable, Equatable {
    public var hostPattern: HostPattern
    public var sha256: String
    public init(hostPattern: HostPattern, sha256: String) { self.hostPattern = hostPattern; self.sha256 = sha256 }
}
