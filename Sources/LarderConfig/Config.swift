import CachePolicy
import HTTPWire

/// Everything Larder can be told. Each property is one key of `ConfigSchema.fields`, which holds
/// its default, its parser and its documentation; `Config()` is every key at its default. The
/// loader fills this from the file, then `LARDER_…` environment variables, then command-line flags.
public struct Config: Sendable, Equatable {
    /// `listen`
    public var listen: [Endpoint] = ConfigSchema.defaultValue(\.listen)
    /// `proxy_protocol_from`: the load balancers believed on `proxy_protocol` listeners.
    public var proxyProtocolFrom: [AddressRange] = ConfigSchema.defaultValue(\.proxyProtocolFrom)
    /// `admin_listen`; nil: no admin endpoint.
    public var adminListen: Endpoint? = ConfigSchema.defaultValue(\.adminListen)
    /// `admin_token`
    public var adminToken: String? = ConfigSchema.defaultValue(\.adminToken)
    /// `admin_hosts`
    public var adminHosts: [String] = ConfigSchema.defaultValue(\.adminHosts)
    /// `workers`; 0: one per core.
    public var workers: Int = ConfigSchema.defaultValue(\.workers)
    /// `cache_dir`
    public var cacheDirectory: String = ConfigSchema.defaultValue(\.cacheDirectory)
    /// `shutdown_grace`, seconds.
    public var shutdownGrace: Double = ConfigSchema.defaultValue(\.shutdownGrace)
    /// `reverse_origin`; nil: forward proxy only.
    public var reverseOrigin: OriginURL? = ConfigSchema.defaultValue(\.reverseOrigin)
    /// `reverse_host`
    public var reverseHost: ReverseHost = ConfigSchema.defaultValue(\.reverseHost)
    /// `reverse_allowed_hosts`; empty: any.
    public var reverseAllowedHosts: [HostPattern] = ConfigSchema.defaultValue(\.reverseAllowedHosts)
    /// `mirrors`: registry mirror endpoints on Larder's own listeners.
    public var mirrors: [MirrorConfig] = ConfigSchema.defaultValue(\.mirrors)
    /// `connect_ports`
    public var connectPorts: [Int] = ConfigSchema.defaultValue(\.connectPorts)
    /// `purge_allowed_from`
    public var purgeAllowedFrom: [AddressRange] = ConfigSchema.defaultValue(\.purgeAllowedFrom)
    /// `allow_clients`
    public var allowClients: [AddressRange] = ConfigSchema.defaultValue(\.allowClients)
    /// `deny_destinations`
    public var denyDestinations: [DestinationPattern] = ConfigSchema.defaultValue(\.denyDestinations)
    /// `protect_this_host`
    public var protectThisHost: ProtectThisHost = ConfigSchema.defaultValue(\.protectThisHost)
    /// `auth.*`
    public var auth: Auth = Auth()
    /// `via_name`
    public var viaName: String = ConfigSchema.defaultValue(\.viaName)
    /// `log_level`
    public var logLevel: LogLevel = ConfigSchema.defaultValue(\.logLevel)
    /// `access_log`; nil: off.
    public var accessLog: AccessLogDestination? = ConfigSchema.defaultValue(\.accessLog)
    /// `access_log_format`
    public var accessLogFormat: AccessLogFormat = ConfigSchema.defaultValue(\.accessLogFormat)

    /// `Proxy-Authorization: Basic` against an htpasswd file.
    public struct Auth: Sendable, Equatable {
        /// `auth.users_file`; nil: no authentication.
        public var usersFile: String? = ConfigSchema.defaultValue(\.auth.usersFile)
        /// `auth.realm`
        public var realm: String = ConfigSchema.defaultValue(\.auth.realm)
        /// `auth.destinations`
        public var destinations: [HostPattern] = ConfigSchema.defaultValue(\.auth.destinations)
        /// `auth.max_pending_checks`
        public var maxPendingChecks: Int = ConfigSchema.defaultValue(\.auth.maxPendingChecks)
        /// `auth.max_pending_checks_per_client`
        public var maxPendingChecksPerClient: Int = ConfigSchema.defaultValue(\.auth.maxPendingChecksPerClient)
    }

    /// `limits.*`: what clients may send.
    public var limits: Limits = Limits()
    /// `session.*`: the outbound session client, named after NSURLSessionConfiguration.
    public var session: Session = Session()
    /// `cache.*`: capacities, durability, policy defaults and rules.
    public var cache: Cache = Cache()
    /// `tls.*`: HTTPS listeners, trust exceptions for origins, interception.
    public var tls: TLS = TLS()
    /// `http2.*`: HTTP/2 from clients.
    public var http2: HTTP2 = HTTP2()

    public struct HTTP2: Sendable, Equatable {
        /// `http2.enabled`: TLS listeners offer `h2` by ALPN; plain ones take the connection preface.
        public var enabled: Bool = ConfigSchema.defaultValue(\.http2.enabled)
        /// `http2.max_concurrent_streams`
        public var maxConcurrentStreams: Int = ConfigSchema.defaultValue(\.http2.maxConcurrentStreams)
        /// `http2.stream_window`
        public var streamWindow: Int = ConfigSchema.defaultValue(\.http2.streamWindow)
        /// `http2.connection_window`
        public var connectionWindow: Int = ConfigSchema.defaultValue(\.http2.connectionWindow)
        /// `http2.max_header_list`
        public var maxHeaderList: Int = ConfigSchema.defaultValue(\.http2.maxHeaderList)
        /// `http2.stream_output`
        public var streamOutput: Int = ConfigSchema.defaultValue(\.http2.streamOutput)
        public init() {}
    }

    public struct TLS: Sendable, Equatable {
        /// `tls.listen`
        public var listen: [Endpoint] = ConfigSchema.defaultValue(\.tls.listen)
        /// `tls.certificate_file`
        public var certificateFile: String? = ConfigSchema.defaultValue(\.tls.certificateFile)
        /// `tls.key_file`
        public var keyFile: String? = ConfigSchema.defaultValue(\.tls.keyFile)
        /// `tls.admin`
        public var admin: Bool = ConfigSchema.defaultValue(\.tls.admin)
        /// `tls.trust`
        public var trust: [TrustException] = ConfigSchema.defaultValue(\.tls.trust)
        /// `tls.intercept`; empty: interception off.
        public var intercept: [HostPattern] = ConfigSchema.defaultValue(\.tls.intercept)
        /// `tls.intercept_ca_certificate`; nil (with the key): Larder's own, in `interceptCADirectory`.
        public var interceptCACertificate: String? = ConfigSchema.defaultValue(\.tls.interceptCACertificate)
        /// `tls.intercept_ca_key`
        public var interceptCAKey: String? = ConfigSchema.defaultValue(\.tls.interceptCAKey)
        /// `tls.intercept_ca_dir`: where Larder keeps its own CA, apart from the cache.
        public var interceptCADirectory: String = ConfigSchema.defaultValue(\.tls.interceptCADirectory)
        /// `tls.intercept_key_type`
        public var interceptKeyType: KeyType = ConfigSchema.defaultValue(\.tls.interceptKeyType)
        /// `tls.intercept_certificate_lifetime`, seconds.
        public var interceptCertificateLifetime: Double = ConfigSchema.defaultValue(\.tls.interceptCertificateLifetime)
        public init() {}
    }

    /// Accept an origin's certificate for hosts matching `host` when its SHA-256 fingerprint is
    /// `sha256` (lowercase hex), whatever its chain, name or dates say.
    public struct TrustException: Sendable, Equatable {
        public var host: HostPattern
        public var sha256: String
        public init(host: HostPattern, sha256: String) { self.host = host; self.sha256 = sha256 }
    }

    public init() {}

    public struct Cache: Sendable, Equatable {
        /// `cache.disk_capacity`, bytes.
        public var diskCapacity: Int = ConfigSchema.defaultValue(\.cache.diskCapacity)
        /// `cache.memory_capacity`, bytes.
        public var memoryCapacity: Int = ConfigSchema.defaultValue(\.cache.memoryCapacity)
        /// `cache.memory_max_object_size`, bytes.
        public var memoryMaxObjectSize: Int = ConfigSchema.defaultValue(\.cache.memoryMaxObjectSize)
        /// `cache.max_object_size`, bytes.
        public var maxObjectSize: Int = ConfigSchema.defaultValue(\.cache.maxObjectSize)
        /// `cache.durability`
        public var durability: Durability = ConfigSchema.defaultValue(\.cache.durability)
        /// `cache.sync_interval`, seconds.
        public var syncInterval: Double = ConfigSchema.defaultValue(\.cache.syncInterval)
        /// `cache.revalidation`
        public var revalidation: Revalidation = ConfigSchema.defaultValue(\.cache.revalidation)
        /// `cache.default_policy`
        public var defaultPolicy: RequestPolicy = ConfigSchema.defaultValue(\.cache.defaultPolicy)
        /// `cache.offline`
        public var offline: Bool = ConfigSchema.defaultValue(\.cache.offline)
        /// `cache.heuristic_fraction`
        public var heuristicFraction: Double = ConfigSchema.defaultValue(\.cache.heuristicFraction)
        /// `cache.heuristic_max`, seconds.
        public var heuristicMax: Double = ConfigSchema.defaultValue(\.cache.heuristicMax)
        /// `cache.collapse_requests`
        public var collapseRequests: Bool = ConfigSchema.defaultValue(\.cache.collapseRequests)
        /// `cache.on_unusable_dir`
        public var onUnusableDirectory: UnusableCacheDirectory = ConfigSchema.defaultValue(\.cache.onUnusableDirectory)
        /// `cache.ephemeral`: the memory tier only, no directory, nothing on disk.
        public var ephemeral: Bool = ConfigSchema.defaultValue(\.cache.ephemeral)
        /// `cache.rules`
        public var rules: [CacheRuleConfig] = ConfigSchema.defaultValue(\.cache.rules)
        /// `cache.presets`: names of shipped rule sets (`Presets`), applied after `rules`, in this order.
        public var presets: [String] = ConfigSchema.defaultValue(\.cache.presets)
        /// `cache.targeted_cache_control`
        public var targetedCacheControl: TargetedFields = ConfigSchema.defaultValue(\.cache.targetedCacheControl)
        /// `cache.finish_aborted_fraction`: an aborted download is finished for the store from this
        /// fraction of its body on; nil: never.
        public var finishAbortedFraction: Double? = ConfigSchema.defaultValue(\.cache.finishAbortedFraction)
        /// `cache.finish_aborted_max_size`, bytes.
        public var finishAbortedMaxSize: Int = ConfigSchema.defaultValue(\.cache.finishAbortedMaxSize)
        /// `cache.range_misses`
        public var rangeMisses: RangeMisses = ConfigSchema.defaultValue(\.cache.rangeMisses)
        public init() {}
    }

    public struct Limits: Sendable, Equatable {
        /// `limits.max_head_bytes`
        public var maxHeadBytes: Int = ConfigSchema.defaultValue(\.limits.maxHeadBytes)
        /// `limits.max_header_count`
        public var maxHeaderCount: Int = ConfigSchema.defaultValue(\.limits.maxHeaderCount)
        /// `limits.max_uri_bytes`
        public var maxURIBytes: Int = ConfigSchema.defaultValue(\.limits.maxURIBytes)
        /// `limits.client_header_timeout`, seconds.
        public var clientHeaderTimeout: Double = ConfigSchema.defaultValue(\.limits.clientHeaderTimeout)
        /// `limits.client_idle_timeout`, seconds.
        public var clientIdleTimeout: Double = ConfigSchema.defaultValue(\.limits.clientIdleTimeout)
        /// `limits.max_response_head_bytes`
        public var maxResponseHeadBytes: Int = ConfigSchema.defaultValue(\.limits.maxResponseHeadBytes)
        /// `limits.max_request_body`
        public var maxRequestBody: Int = ConfigSchema.defaultValue(\.limits.maxRequestBody)
        /// `limits.max_connections`, all workers together.
        public var maxConnections: Int = ConfigSchema.defaultValue(\.limits.maxConnections)
        /// `limits.max_connections_per_client`; 0: no per-address limit.
        public var maxConnectionsPerClient: Int = ConfigSchema.defaultValue(\.limits.maxConnectionsPerClient)
        /// `limits.detached_fetches_per_client`, `detached_bytes_per_client`, `detached_fetches`,
        /// `detached_bytes`: downloads running with no client attached.
        public var originFetchesPerClient: Int = ConfigSchema.defaultValue(\.limits.originFetchesPerClient)
        public var detachedFetchesPerClient: Int = ConfigSchema.defaultValue(\.limits.detachedFetchesPerClient)
        public var detachedBytesPerClient: Int = ConfigSchema.defaultValue(\.limits.detachedBytesPerClient)
        public var detachedFetches: Int = ConfigSchema.defaultValue(\.limits.detachedFetches)
        public var detachedBytes: Int = ConfigSchema.defaultValue(\.limits.detachedBytes)
        public init() {}
    }

    public struct Session: Sendable, Equatable {
        /// `session.http_additional_headers`
        public var httpAdditionalHeaders: [HeaderPair] = ConfigSchema.defaultValue(\.session.httpAdditionalHeaders)
        /// `session.timeout_interval_for_request`, seconds.
        public var timeoutIntervalForRequest: Double = ConfigSchema.defaultValue(\.session.timeoutIntervalForRequest)
        /// `session.timeout_interval_for_resource`, seconds.
        public var timeoutIntervalForResource: Double = ConfigSchema.defaultValue(\.session.timeoutIntervalForResource)
        /// `session.connect_timeout`, seconds.
        public var connectTimeout: Double = ConfigSchema.defaultValue(\.session.connectTimeout)
        /// `session.http_maximum_connections_per_host`
        public var httpMaximumConnectionsPerHost: Int = ConfigSchema.defaultValue(\.session.httpMaximumConnectionsPerHost)
        /// `session.max_idle_connections_per_host`
        public var maxIdleConnectionsPerHost: Int = ConfigSchema.defaultValue(\.session.maxIdleConnectionsPerHost)
        /// `session.reuse_after_bodyless_answers`
        public var reuseAfterBodylessAnswers: Bool = ConfigSchema.defaultValue(\.session.reuseAfterBodylessAnswers)
        /// `session.http2`
        public var http2: OriginHTTP2 = ConfigSchema.defaultValue(\.session.http2)
        /// `session.idle_connection_timeout`, seconds.
        public var idleConnectionTimeout: Double = ConfigSchema.defaultValue(\.session.idleConnectionTimeout)
        /// `session.proxy` (connectionProxyDictionary)
        public var parentProxy: OriginURL? = ConfigSchema.defaultValue(\.session.parentProxy)
        /// `session.proxy_credentials_file`: `user:password` for the parent proxy.
        public var parentProxyCredentialsFile: String? = ConfigSchema.defaultValue(\.session.parentProxyCredentialsFile)
        /// `session.tls_minimum_version`
        public var tlsMinimumVersion: TLSVersion = ConfigSchema.defaultValue(\.session.tlsMinimumVersion)
        /// `session.tls_maximum_version`
        public var tlsMaximumVersion: TLSVersion = ConfigSchema.defaultValue(\.session.tlsMaximumVersion)
        /// `tls.ca_file` (or its older name `session.ca_file`); nil: the system store.
        public var caFile: String? = ConfigSchema.defaultValue(\.session.caFile)
        /// `session.dns_servers`; empty: /etc/resolv.conf's.
        public var dnsServers: [Endpoint] = ConfigSchema.defaultValue(\.session.dnsServers)
        public init() {}
    }
}


/// `host:port` for listeners; IPv6 hosts are written `[::1]:3128` and stored without brackets.
public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// Proxy listeners only: every connection starts with a PROXY protocol header naming the real
    /// client (`{address: HOST:PORT, proxy_protocol: true}`), accepted from `proxy_protocol_from`.
    public var proxyProtocol: Bool
    public init(host: String, port: Int, proxyProtocol: Bool = false) {
        self.host = host
        self.port = port
        self.proxyProtocol = proxyProtocol
    }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Reachable only from this machine: an address in 127.0.0.0/8 or ::1 (also IPv4-mapped,
    /// `::ffff:127.0.0.1`), or the name `localhost` (which Larder binds as 127.0.0.1). The host is
    /// parsed as an address, never matched as text: `127.evil.example` is a name anyone may own,
    /// and `0.0.0.0` or `::` listen on every interface.
    public var isLoopback: Bool { Endpoint.isLoopback(host: host) }

    /// `isLoopback` for a host as written in configuration: brackets around IPv6 are allowed.
    public static func isLoopback(host: String) -> Bool {
        var literal = Substring(host)
        if literal.hasPrefix("["), literal.hasSuffix("]") { literal = literal.dropFirst().dropLast() }
        if literal.lowercased() == "localhost" { return true }
        guard let bytes = ConfigLoader.addressBytes(String(literal)) else { return false }
        return AddressRange.loopback.contains { $0.contains(bytes) }
    }
}

/// An IPv4 or IPv6 network, `10.0.0.0/8` or `::1/128` (a bare address is a /32 or /128).
public struct AddressRange: Sendable, Equatable, CustomStringConvertible {
    public var bytes: [UInt8]
    public var prefixLength: Int
    public init(bytes: [UInt8], prefixLength: Int) { self.bytes = bytes; self.prefixLength = prefixLength }

    /// 127.0.0.0/8 and ::1/128.
    public static let loopback = [AddressRange(bytes: [127, 0, 0, 0], prefixLength: 8),
                                  AddressRange(bytes: Array(repeating: 0, count: 15) + [1], prefixLength: 128)]

    /// Whether `address` (4 or 16 bytes) is in this network. An IPv4-mapped IPv6 address
    /// (`::ffff:10.1.2.3`, how a dual-stack listener sees IPv4 clients) matches IPv4 networks.
    public func contains(_ address: [UInt8]) -> Bool {
        if address.count == 16, bytes.count == 4 {
            let v4 = AddressRange.unmapped(address)
            return v4.count == 4 && contains(v4)
        }
        guard address.count == bytes.count else { return false }
        var bits = prefixLength
        for (a, b) in zip(address, bytes) where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            if a & mask != b & mask { return false }
            bits -= 8
        }
        return true
    }

    /// `::ffff:a.b.c.d` as the IPv4 address it carries; any other address as it is.
    public static func unmapped(_ b: [UInt8]) -> [UInt8] {
        if b.count == 16, b[0..<10].allSatisfy({ $0 == 0 }), b[10] == 0xFF, b[11] == 0xFF { return Array(b[12...]) }
        return b
    }

    public var description: String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") + "/\(prefixLength)" }
        var groups: [String] = []
        for i in stride(from: 0, to: 16, by: 2) { groups.append(String(Int(bytes[i]) << 8 | Int(bytes[i + 1]), radix: 16)) }
        return groups.joined(separator: ":") + "/\(prefixLength)"
    }
}

/// One `deny_destinations` entry: a network (matched against resolved addresses) or a host
/// pattern (`example.com`, `*.example.com`).
public enum DestinationPattern: Sendable, Equatable, CustomStringConvertible {
    case network(AddressRange)
    case host(HostPattern)

    public var description: String {
        switch self {
        case .network(let r): return r.description
        case .host(let h): return h.description
        }
    }
}

/// `http://host[:port]` or `https://host[:port]` with no path (origins and parent proxies).
public struct OriginURL: Sendable, Equatable, CustomStringConvertible {
    public var scheme: URIScheme
    public var host: String
    public var port: Int
    public init(scheme: URIScheme, host: String, port: Int) { self.scheme = scheme; self.host = host; self.port = port }
    public var description: String { "\(scheme.name)://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// One configured header field (order kept).
public struct HeaderPair: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// One `cache.rules` entry.
public struct CacheRuleConfig: Sendable, Equatable {
    public var scheme: URIScheme?
    public var host: HostPattern?
    public var pathPrefix: String?
    public var path: PathGlob?
    public var statuses: [Int] = []
    public var contentType: String?
    public var policy: Config.RequestPolicy?
    public var storage: Config.StoragePolicy?
    public var forcedLifetime: Double?
    public var maximumLifetime: Double?
    public var defaultLifetime: Double?
    /// Clients' reloads (`no-cache`, `max-age`, `Pragma: no-cache`) do not bypass fresh entries.
    public var ignoreReload: Bool?
    /// A preset's rule (never set from YAML): its lifetimes apply only to responses shareable
    /// without them (`SharingGuard`); the user's own rules apply as written.
    public var fromPreset = false
    public init() {}
}

/// Which `Host` a request in reverse mode carries to the origin. The cache key is always built
/// from the Host actually forwarded, so one client's Host can never choose what another receives.
public enum ReverseHost: String, Sendable, Equatable, CaseIterable {
    /// The client's Host, passed on (virtual hosts behind one origin address).
    case client
    /// The authority of `reverse_origin`, whatever the client sent.
    case origin
}

/// Whether clients may reach services listening on Larder's own machine through it.
public enum ProtectThisHost: String, Sendable, Equatable, CaseIterable {
    /// On when `allow_clients` admits a non-loopback address, off while only local clients may use Larder.
    case auto
    case on
    case off

    /// Whether the protection applies under these `allow_clients`.
    public func applies(allowClients: [AddressRange]) -> Bool {
        switch self {
        case .on: return true
        case .off: return false
        case .auto: return allowClients.contains { !$0.isWithinLoopback }
        }
    }
}

extension AddressRange {
    /// Whether every address of this network is a loopback address.
    public var isWithinLoopback: Bool {
        AddressRange.loopback.contains { outer in
            outer.bytes.count == bytes.count && prefixLength >= outer.prefixLength && outer.contains(bytes)
        }
    }

    /// This machine, as a destination: loopback and the unspecified addresses (0.0.0.0/8, ::).
    public static let thisHost = loopback + [AddressRange(bytes: [0, 0, 0, 0], prefixLength: 8),
                                            AddressRange(bytes: Array(repeating: 0, count: 16), prefixLength: 128)]
}

/// `cache.targeted_cache_control`: which RFC 9213 targeted fields (e.g. `CDN-Cache-Control`) govern
/// Larder's own caching, first present wins.
public enum TargetedFields: Sendable, Equatable {
    /// `CDN-Cache-Control` in reverse mode (Larder is the origin's own cache), none in forward mode.
    case auto
    /// These field names, lower-cased, in order, in either mode; empty: none.
    case fields([String])
}

/// What Larder does when its cache directory cannot be used at start (permissions, a read-only file
/// system, another instance holding it): damage is never this, it is moved aside.
public enum UnusableCacheDirectory: String, Sendable, Equatable, CaseIterable {
    /// Stop with a message (exit status 2).
    case exit
    /// Run as a proxy that caches nothing, saying so loudly.
    case passThrough = "pass-through"
}
