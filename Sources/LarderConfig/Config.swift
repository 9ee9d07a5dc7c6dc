import HTTPWire

/// Everything Larder can be told, with the built-in defaults. `Config/larder.yaml` documents each key;
/// the loader fills this from the file, then `LARDER_…` environment variables, then command-line flags.
public struct Config: Sendable, Equatable {
    /// `host:port` pairs the proxy listens on (`listen`). Port 0 picks a free port (logged).
    public var listen: [Endpoint] = [Endpoint(host: "127.0.0.1", port: 3128)]
    /// Admin endpoint listener (`admin_listen`); nil disables it.
    public var adminListen: Endpoint? = Endpoint(host: "127.0.0.1", port: 9090)
    /// Bearer token for the admin endpoint (`admin_token`); required when it listens off loopback.
    public var adminToken: String?
    /// Extra names (or addresses) the admin endpoint answers to in `Host` (`admin_hosts`), for when
    /// it is reached by a name; its own listening address, and `localhost` on loopback, always are.
    public var adminHosts: [String] = []
    /// Event-loop threads (`workers`); 0 means one per core.
    public var workers: Int = 0
    /// Directory holding the LMDB cache (`cache_dir`).
    public var cacheDirectory: String = "larder-cache"
    /// How long in-flight requests may take to finish after SIGTERM/SIGINT (`shutdown_grace`), seconds.
    public var shutdownGrace: Double = 10
    /// Reverse (accelerator) mode: origin-form requests go here (`reverse_origin`), e.g. `http://127.0.0.1:8080`.
    public var reverseOrigin: OriginURL? = nil
    /// `reverse_host`: the `Host` reverse mode sends upstream, and keys the cache on.
    public var reverseHost: ReverseHost = .client
    /// `reverse_allowed_hosts`: the `Host` values reverse mode answers (empty: any); others get 400.
    public var reverseAllowedHosts: [HostPattern] = []
    /// Ports CONNECT may reach (`connect_ports`).
    public var connectPorts: [Int] = [443]
    /// Clients allowed to send `PURGE` to the proxy port (`purge_allowed_from`).
    public var purgeAllowedFrom: [AddressRange] = AddressRange.loopback
    /// Clients that may use the proxy at all (`allow_clients`); loopback only by default, so Larder
    /// is never an open proxy unless told to be.
    public var allowClients: [AddressRange] = AddressRange.loopback
    /// Destinations never contacted (`deny_destinations`): host patterns, and networks checked
    /// against the addresses a name resolves to. Link-local (cloud metadata) by default.
    public var denyDestinations: [DestinationPattern] = [
        .network(AddressRange(bytes: [169, 254, 0, 0], prefixLength: 16)),
        .network(AddressRange(bytes: [0xFE, 0x80] + Array(repeating: 0, count: 14), prefixLength: 10)),
    ]
    /// `protect_this_host`: also refuse destinations on this machine (loopback, the unspecified
    /// address, its interfaces' addresses) — `auto` does so once `allow_clients` admits any
    /// client that is not on this machine.
    public var protectThisHost: ProtectThisHost = .auto
    /// Proxy authentication (`auth.*`).
    public var auth = Auth()
    /// Name this proxy gives itself in `Via` (`via_name`).
    public var viaName: String = "larder"
    /// Operational log level (`log_level`): trace, debug, info, notice, warning, error, critical.
    public var logLevel: String = "info"
    /// Access log destination (`access_log`): nil (off), "stdout", or a file path.
    public var accessLog: String? = "stdout"
    /// `access_log_format`: combined or json.
    public var accessLogFormat: String = "combined"
    /// `Proxy-Authorization: Basic` against an htpasswd file (`auth.*`).
    public struct Auth: Sendable, Equatable {
        /// htpasswd-format file of `user:hash` lines (bcrypt or SHA-crypt); nil: no authentication.
        public var usersFile: String?
        /// The realm named in `Proxy-Authenticate`.
        public var realm: String = "Larder"
        /// Destination host patterns that need authentication (`*` for every destination).
        public var destinations: [HostPattern] = [.any]
        /// Password checks waiting or running at once, over all clients (`auth.max_pending_checks`);
        /// a request with an unseen credential beyond it gets `429`.
        public var maxPendingChecks: Int = 32
        /// The same per client address (`auth.max_pending_checks_per_client`).
        public var maxPendingChecksPerClient: Int = 4
    }

    /// Client-side limits (`limits.*`).
    public var limits = Limits()
    /// The outbound session client (`session.*`), named after NSURLSessionConfiguration.
    public var session = Session()
    /// The cache (`cache.*`): capacities, durability, policy defaults and rules.
    public var cache = Cache()
    /// TLS (`tls.*`): HTTPS listeners, trust exceptions for origins, interception.
    public var tls = TLS()

    public struct TLS: Sendable, Equatable {
        /// `tls.listen`: HTTPS proxy listeners (clients speak TLS to the proxy itself).
        public var listen: [Endpoint] = []
        /// `tls.certificate_file`: PEM certificate (then its chain) of the HTTPS listeners and admin endpoint.
        public var certificateFile: String?
        /// `tls.key_file`: its PEM private key.
        public var keyFile: String?
        /// `tls.admin`: the admin endpoint speaks TLS.
        public var admin: Bool = false
        /// `tls.trust`: per-host exceptions to origin certificate verification, by pinned SHA-256.
        public var trust: [TrustException] = []
        /// `tls.intercept`: CONNECT destinations (host patterns) whose TLS Larder terminates, so their
        /// requests go through the cache. Empty: interception off.
        public var intercept: [HostPattern] = []
        /// `tls.intercept_ca_certificate` / `tls.intercept_ca_key`: the CA that signs minted certificates;
        /// unset: Larder's own, generated under `cache_dir/ca` on first use.
        public var interceptCACertificate: String?
        public var interceptCAKey: String?
        /// `tls.intercept_key_type`: ec-p256 or rsa-2048.
        public var interceptKeyType: String = "ec-p256"
        /// `tls.intercept_certificate_lifetime`: validity of a minted certificate, seconds.
        public var interceptCertificateLifetime: Double = 30 * 86_400
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
        /// `cache.disk_capacity`: stored bytes kept on disk (LRU eviction beyond).
        public var diskCapacity: Int = 1 << 30
        /// `cache.memory_capacity`: bytes of the in-memory tier.
        public var memoryCapacity: Int = 64 << 20
        /// `cache.memory_max_object_size`: entries up to this size are also held in memory.
        public var memoryMaxObjectSize: Int = 1 << 20
        /// `cache.max_object_size`: larger responses are passed through, not stored.
        public var maxObjectSize: Int = 256 << 20
        /// `cache.durability`: "fast" (periodic sync) or "safe" (sync every commit).
        public var durability: String = "fast"
        /// `cache.sync_interval`: how often "fast" durability syncs, seconds.
        public var syncInterval: Double = 1
        /// `cache.revalidation`: "head" (the documented way) or "conditional-get" (RFC 9111).
        public var revalidation: String = "head"
        /// `cache.default_policy`: the request cache policy when a request names none.
        public var defaultPolicy: String = "use-protocol-cache-policy"
        /// `cache.offline`: serve only from the cache (return-cache-data-dont-load for everything).
        public var offline: Bool = false
        /// `cache.heuristic_fraction` of (Date − Last-Modified) is the heuristic lifetime ...
        public var heuristicFraction: Double = 0.1
        /// ... capped at `cache.heuristic_max` seconds.
        public var heuristicMax: Double = 86_400
        /// `cache.collapse_requests`: concurrent misses for one URL share one origin fetch.
        public var collapseRequests: Bool = true
        /// `cache.on_unusable_dir`: what a cache directory that cannot be used at start means.
        public var onUnusableDirectory: UnusableCacheDirectory = .exit
        /// `cache.rules`: per-URL policy, storage and freshness, first match per aspect wins.
        public var rules: [CacheRuleConfig] = []
        public init() {}
    }

    public struct Limits: Sendable, Equatable {
        /// `limits.max_head_bytes`: largest request head (431 beyond).
        public var maxHeadBytes: Int = 65_536
        /// `limits.max_header_count`: most header fields in a request (431 beyond).
        public var maxHeaderCount: Int = 100
        /// `limits.max_uri_bytes`: longest request line (414 beyond).
        public var maxURIBytes: Int = 8_192
        /// `limits.client_header_timeout`: seconds a client may take to send a whole request head.
        public var clientHeaderTimeout: Double = 30
        /// `limits.client_idle_timeout`: seconds an idle keep-alive client connection is kept.
        public var clientIdleTimeout: Double = 60
        /// `limits.max_response_head_bytes`: largest response head accepted from an origin (502 beyond).
        public var maxResponseHeadBytes: Int = 65_536
        /// Largest request body (`limits.max_request_body`); larger → 413.
        public var maxRequestBody: Int = 1 << 30
        /// Client connections open at once, all workers together (`limits.max_connections`); more → 503.
        public var maxConnections: Int = 10_000
        /// Client connections open at once from one address (`limits.max_connections_per_client`);
        /// more → 429. 0: no per-address limit.
        public var maxConnectionsPerClient: Int = 512
        public init() {}
    }

    public struct Session: Sendable, Equatable {
        /// `session.http_additional_headers`: fields added to every outbound request that lacks them.
        public var httpAdditionalHeaders: [HeaderPair] = []
        /// `session.timeout_interval_for_request`: longest silence while waiting for origin bytes (504).
        public var timeoutIntervalForRequest: Double = 60
        /// `session.timeout_interval_for_resource`: longest whole exchange with an origin (504).
        public var timeoutIntervalForResource: Double = 604_800
        /// `session.connect_timeout`: longest TCP (and TLS) connection setup (504).
        public var connectTimeout: Double = 10
        /// `session.http_maximum_connections_per_host`: open connections per origin; excess requests queue FIFO.
        public var httpMaximumConnectionsPerHost: Int = 64
        /// `session.max_idle_connections_per_host`: idle keep-alive connections kept per origin.
        public var maxIdleConnectionsPerHost: Int = 32
        /// `session.reuse_after_bodyless_answers`: reuse a connection after a HEAD or 304 answer whose
        /// head announces a body (checked for stray bytes first).
        public var reuseAfterBodylessAnswers: Bool = true
        /// `session.idle_connection_timeout`: seconds an idle pooled origin connection is kept.
        public var idleConnectionTimeout: Double = 60
        /// `session.proxy`: parent proxy (connectionProxyDictionary), e.g. `http://proxy:3128`.
        public var parentProxy: OriginURL? = nil
        /// `session.tls_minimum_version`: "1.2" or "1.3".
        public var tlsMinimumVersion: String = "1.2"
        /// `session.tls_maximum_version`: "1.2" or "1.3".
        public var tlsMaximumVersion: String = "1.3"
        /// `session.ca_file`: PEM bundle to verify https origins; nil uses the system store.
        public var caFile: String? = nil
        /// `session.dns_servers`: name servers (`host:port`) to ask instead of /etc/resolv.conf's;
        /// /etc/hosts is honoured either way.
        public var dnsServers: [Endpoint] = []
        public init() {}
    }
}

/// `host:port` for listeners; IPv6 hosts are written `[::1]:3128` and stored without brackets.
public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) { self.host = host; self.port = port }
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
    public var scheme: String
    public var host: String
    public var port: Int
    public init(scheme: String, host: String, port: Int) { self.scheme = scheme; self.host = host; self.port = port }
    public var description: String { "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)" }
}

/// One configured header field (order kept).
public struct HeaderPair: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// One `cache.rules` entry.
public struct CacheRuleConfig: Sendable, Equatable {
    public var scheme: String?
    public var host: HostPattern?
    public var pathPrefix: String?
    public var statuses: [Int] = []
    public var contentType: String?
    /// A request cache policy name (use-protocol-cache-policy, reload-ignoring-local-cache-data, ...).
    public var policy: String?
    /// allowed, memory-only or not-allowed.
    public var storage: String?
    public var forcedLifetime: Double?
    public var maximumLifetime: Double?
    public var defaultLifetime: Double?
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

/// What Larder does when its cache directory cannot be used at start (permissions, a read-only file
/// system, another instance holding it): damage is never this, it is moved aside.
public enum UnusableCacheDirectory: String, Sendable, Equatable, CaseIterable {
    /// Stop with a message (exit status 2).
    case exit
    /// Run as a proxy that caches nothing, saying so loudly.
    case passThrough = "pass-through"
}
