import HTTPWire
import Yams

/// One configuration key: its dotted name and how a YAML value sets it. The table below is the
/// single list of keys; the loader, the environment overrides and the unknown-key check all use it.
struct ConfigField: Sendable {
    let key: String
    let apply: @Sendable (inout Config, Node) throws(ValueError) -> Void

    /// `LARDER_SESSION_CONNECT_TIMEOUT` for `session.connect_timeout`.
    var environmentName: String {
        "LARDER_" + key.uppercased().replacingDotsWithUnderscores()
    }
}

enum ConfigSchema {
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    static let tlsVersions = ["1.2", "1.3"]

    static let fields: [ConfigField] = [
        ConfigField(key: "listen") { c, n throws(ValueError) in
            let list = try endpoints(n)
            guard !list.isEmpty else { throw ValueError("needs at least one HOST:PORT") }
            c.listen = list
        },
        ConfigField(key: "admin_listen") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.adminListen = (s == nil || s == "off" || s == "false") ? nil : try ConfigLoader.parseEndpoint(s!)
        },
        ConfigField(key: "admin_token") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            if let s, s.contains(where: { $0 == " " || $0.isNewline || !$0.isASCII }) {
                throw ValueError("must be printable ASCII without spaces")
            }
            c.adminToken = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "admin_hosts") { c, n throws(ValueError) in
            var names: [String] = []
            for item in try list(n) { names.append(try ConfigLoader.parseHostName(try nonEmpty(item))) }
            c.adminHosts = names
        },
        ConfigField(key: "workers") { c, n throws(ValueError) in
            c.workers = try integer(n, in: 0...256, what: "a thread count (0: one per core)")
        },
        ConfigField(key: "cache_dir") { c, n throws(ValueError) in
            c.cacheDirectory = try nonEmpty(n)
        },
        ConfigField(key: "shutdown_grace") { c, n throws(ValueError) in
            c.shutdownGrace = try duration(n)
        },
        ConfigField(key: "reverse_origin") { c, n throws(ValueError) in
            c.reverseOrigin = try scalarOrNull(n).map { s throws(ValueError) in try ConfigLoader.parseOriginURL(s) }
        },
        ConfigField(key: "reverse_host") { c, n throws(ValueError) in
            let s = try scalar(n)
            guard let mode = ReverseHost(rawValue: s) else { throw ValueError("expected client or origin, got \"\(s)\"") }
            c.reverseHost = mode
        },
        ConfigField(key: "reverse_allowed_hosts") { c, n throws(ValueError) in
            var hosts: [HostPattern] = []
            for item in try list(n) { hosts.append(try ConfigLoader.parseHostPattern(try nonEmpty(item))) }
            c.reverseAllowedHosts = hosts
        },
        ConfigField(key: "connect_ports") { c, n throws(ValueError) in
            var ports: [Int] = []
            for item in try list(n) { ports.append(try integer(item, in: 1...65_535, what: "a port")) }
            c.connectPorts = ports
        },
        ConfigField(key: "purge_allowed_from") { c, n throws(ValueError) in
            c.purgeAllowedFrom = try addressRanges(n)
        },
        ConfigField(key: "allow_clients") { c, n throws(ValueError) in
            c.allowClients = try addressRanges(n)
        },
        ConfigField(key: "deny_destinations") { c, n throws(ValueError) in
            var patterns: [DestinationPattern] = []
            for item in try list(n) { patterns.append(try ConfigLoader.parseDestinationPattern(try nonEmpty(item))) }
            c.denyDestinations = patterns
        },
        ConfigField(key: "protect_this_host") { c, n throws(ValueError) in
            let s = try scalar(n)
            guard let mode = ProtectThisHost(rawValue: s) else { throw ValueError("expected auto, on or off, got \"\(s)\"") }
            c.protectThisHost = mode
        },
        ConfigField(key: "auth.users_file") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.auth.usersFile = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "auth.realm") { c, n throws(ValueError) in
            let s = try nonEmpty(n)
            guard s.allSatisfy({ $0.isASCII && $0 != "\"" && $0 != "\\" && !$0.isNewline }) else {
                throw ValueError("must be printable ASCII without quotes or backslashes")
            }
            c.auth.realm = s
        },
        ConfigField(key: "auth.destinations") { c, n throws(ValueError) in
            var patterns: [HostPattern] = []
            for item in try list(n) { patterns.append(try ConfigLoader.parseHostPattern(try nonEmpty(item))) }
            c.auth.destinations = patterns
        },
        ConfigField(key: "auth.max_pending_checks") { c, n throws(ValueError) in
            c.auth.maxPendingChecks = try integer(n, in: 1...100_000, what: "a number of checks")
        },
        ConfigField(key: "auth.max_pending_checks_per_client") { c, n throws(ValueError) in
            c.auth.maxPendingChecksPerClient = try integer(n, in: 1...100_000, what: "a number of checks")
        },
        ConfigField(key: "via_name") { c, n throws(ValueError) in
            let s = try nonEmpty(n)
            guard s.allSatisfy({ $0.isASCII && $0 != " " && $0 != "," && !$0.isNewline }) else {
                throw ValueError("must be a single token without spaces or commas, got \"\(s)\"")
            }
            c.viaName = s
        },
        ConfigField(key: "log_level") { c, n throws(ValueError) in
            c.logLevel = try oneOf(n, logLevels)
        },
        ConfigField(key: "access_log") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.accessLog = (s == nil || s == "" || s == "off" || s == "false") ? nil : s
        },
        ConfigField(key: "access_log_format") { c, n throws(ValueError) in
            c.accessLogFormat = try oneOf(n, ["combined", "json"])
        },

        ConfigField(key: "limits.max_head_bytes") { c, n throws(ValueError) in
            c.limits.maxHeadBytes = try size(n, in: 1_024...16_777_216)
        },
        ConfigField(key: "limits.max_header_count") { c, n throws(ValueError) in
            c.limits.maxHeaderCount = try integer(n, in: 1...10_000, what: "a field count")
        },
        ConfigField(key: "limits.max_uri_bytes") { c, n throws(ValueError) in
            c.limits.maxURIBytes = try size(n, in: 64...1_048_576)
        },
        ConfigField(key: "limits.client_header_timeout") { c, n throws(ValueError) in
            c.limits.clientHeaderTimeout = try positiveDuration(n)
        },
        ConfigField(key: "limits.client_idle_timeout") { c, n throws(ValueError) in
            c.limits.clientIdleTimeout = try positiveDuration(n)
        },
        ConfigField(key: "limits.max_response_head_bytes") { c, n throws(ValueError) in
            c.limits.maxResponseHeadBytes = try size(n, in: 1_024...16_777_216)
        },
        ConfigField(key: "limits.max_request_body") { c, n throws(ValueError) in
            c.limits.maxRequestBody = try size(n, in: 1...(1 << 50))
        },
        ConfigField(key: "limits.max_connections") { c, n throws(ValueError) in
            c.limits.maxConnections = try integer(n, in: 1...1_000_000, what: "a connection count")
        },
        ConfigField(key: "limits.max_connections_per_client") { c, n throws(ValueError) in
            c.limits.maxConnectionsPerClient = try integer(n, in: 0...1_000_000, what: "a connection count (0: no limit)")
        },

        ConfigField(key: "session.http_additional_headers") { c, n throws(ValueError) in
            c.session.httpAdditionalHeaders = try headers(n)
        },
        ConfigField(key: "session.timeout_interval_for_request") { c, n throws(ValueError) in
            c.session.timeoutIntervalForRequest = try positiveDuration(n)
        },
        ConfigField(key: "session.timeout_interval_for_resource") { c, n throws(ValueError) in
            c.session.timeoutIntervalForResource = try positiveDuration(n)
        },
        ConfigField(key: "session.connect_timeout") { c, n throws(ValueError) in
            c.session.connectTimeout = try positiveDuration(n)
        },
        ConfigField(key: "session.http_maximum_connections_per_host") { c, n throws(ValueError) in
            c.session.httpMaximumConnectionsPerHost = try integer(n, in: 1...100_000, what: "a connection count")
        },
        ConfigField(key: "session.max_idle_connections_per_host") { c, n throws(ValueError) in
            c.session.maxIdleConnectionsPerHost = try integer(n, in: 0...100_000, what: "a connection count")
        },
        ConfigField(key: "session.reuse_after_bodyless_answers") { c, n throws(ValueError) in
            c.session.reuseAfterBodylessAnswers = try boolean(n)
        },
        ConfigField(key: "session.idle_connection_timeout") { c, n throws(ValueError) in
            c.session.idleConnectionTimeout = try positiveDuration(n)
        },
        ConfigField(key: "session.proxy") { c, n throws(ValueError) in
            let url = try scalarOrNull(n).map { s throws(ValueError) in try ConfigLoader.parseOriginURL(s) }
            if let url, url.scheme != "http" {
                throw ValueError("a parent proxy is reached over plain http://, got \"\(url)\"")
            }
            c.session.parentProxy = url
        },
        ConfigField(key: "session.tls_minimum_version") { c, n throws(ValueError) in
            c.session.tlsMinimumVersion = try oneOf(n, tlsVersions)
        },
        ConfigField(key: "session.tls_maximum_version") { c, n throws(ValueError) in
            c.session.tlsMaximumVersion = try oneOf(n, tlsVersions)
        },
        ConfigField(key: "session.ca_file") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.session.caFile = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "session.dns_servers") { c, n throws(ValueError) in
            var servers: [Endpoint] = []
            for item in try list(n) {
                let text = try scalar(item)
                // A bare address (IPv4, IPv6 or name) means the standard DNS port.
                let hasPort = text.hasPrefix("[") || text.filter({ $0 == ":" }).count == 1
                let e = hasPort ? try ConfigLoader.parseEndpoint(text) : Endpoint(host: text, port: 53)
                guard e.port != 0 else { throw ValueError("port 0 is not a valid DNS server port in \"\(text)\"") }
                servers.append(e)
            }
            c.session.dnsServers = servers
        },
        ConfigField(key: "tls.ca_file") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.session.caFile = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "tls.listen") { c, n throws(ValueError) in
            c.tls.listen = n.null != nil ? [] : try endpoints(n)
        },
        ConfigField(key: "tls.certificate_file") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.tls.certificateFile = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "tls.key_file") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.tls.keyFile = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "tls.admin") { c, n throws(ValueError) in
            c.tls.admin = try boolean(n)
        },
        ConfigField(key: "tls.trust") { c, n throws(ValueError) in
            c.tls.trust = try trustExceptions(n)
        },
        ConfigField(key: "tls.intercept") { c, n throws(ValueError) in
            var patterns: [HostPattern] = []
            if n.null == nil {
                for item in try list(n) { patterns.append(try ConfigLoader.parseHostPattern(try nonEmpty(item))) }
            }
            c.tls.intercept = patterns
        },
        ConfigField(key: "tls.intercept_ca_certificate") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.tls.interceptCACertificate = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "tls.intercept_ca_key") { c, n throws(ValueError) in
            let s = try scalarOrNull(n)
            c.tls.interceptCAKey = (s?.isEmpty ?? true) ? nil : s
        },
        ConfigField(key: "tls.intercept_key_type") { c, n throws(ValueError) in
            c.tls.interceptKeyType = try oneOf(n, ["ec-p256", "rsa-2048"])
        },
        ConfigField(key: "tls.intercept_certificate_lifetime") { c, n throws(ValueError) in
            let d = try positiveDuration(n)
            guard d >= 3_600, d <= 825 * 86_400 else {
                throw ValueError("must be between 1h and 825d (clients reject longer-lived certificates)")
            }
            c.tls.interceptCertificateLifetime = d
        },

        ConfigField(key: "cache.disk_capacity") { c, n throws(ValueError) in
            c.cache.diskCapacity = try size(n, in: 1 << 20...(1 << 50))
        },
        ConfigField(key: "cache.memory_capacity") { c, n throws(ValueError) in
            c.cache.memoryCapacity = try size(n, in: 0...(1 << 40))
        },
        ConfigField(key: "cache.memory_max_object_size") { c, n throws(ValueError) in
            c.cache.memoryMaxObjectSize = try size(n, in: 0...(1 << 40))
        },
        ConfigField(key: "cache.max_object_size") { c, n throws(ValueError) in
            c.cache.maxObjectSize = try size(n, in: 0...(1 << 50))
        },
        ConfigField(key: "cache.durability") { c, n throws(ValueError) in
            c.cache.durability = try oneOf(n, ["fast", "safe"])
        },
        ConfigField(key: "cache.sync_interval") { c, n throws(ValueError) in
            c.cache.syncInterval = try positiveDuration(n)
        },
        ConfigField(key: "cache.revalidation") { c, n throws(ValueError) in
            c.cache.revalidation = try oneOf(n, ["head", "conditional-get"])
        },
        ConfigField(key: "cache.default_policy") { c, n throws(ValueError) in
            c.cache.defaultPolicy = try oneOf(n, requestPolicies)
        },
        ConfigField(key: "cache.offline") { c, n throws(ValueError) in
            c.cache.offline = try boolean(n)
        },
        ConfigField(key: "cache.heuristic_fraction") { c, n throws(ValueError) in
            let s = try scalar(n)
            guard let v = Double(s), v >= 0, v <= 1 else { throw ValueError("expected a fraction from 0 to 1, got \"\(s)\"") }
            c.cache.heuristicFraction = v
        },
        ConfigField(key: "cache.heuristic_max") { c, n throws(ValueError) in
            c.cache.heuristicMax = try duration(n)
        },
        ConfigField(key: "cache.collapse_requests") { c, n throws(ValueError) in
            c.cache.collapseRequests = try boolean(n)
        },
        ConfigField(key: "cache.on_unusable_dir") { c, n throws(ValueError) in
            let s = try scalar(n)
            guard let mode = UnusableCacheDirectory(rawValue: s) else {
                throw ValueError("expected exit or pass-through, got \"\(s)\"")
            }
            c.cache.onUnusableDirectory = mode
        },
        ConfigField(key: "cache.rules") { c, n throws(ValueError) in
            c.cache.rules = try cacheRules(n)
        },
    ]

    /// Keys that hold a mapping of further keys rather than a value.
    static let sections: Set<String> = ["limits", "session", "cache", "auth", "tls"]

    static let requestPolicies = ["use-protocol-cache-policy", "reload-ignoring-local-cache-data",
                                  "reload-revalidating-cache-data", "return-cache-data-else-load",
                                  "return-cache-data-dont-load"]
    static let storagePolicies = ["allowed", "memory-only", "not-allowed"]

    static let byKey: [String: ConfigField] = Dictionary(uniqueKeysWithValues: fields.map { ($0.key, $0) })

    /// Checks that hold between keys rather than within one.
    static func crossChecks(_ c: Config) -> [(key: String, message: String)] {
        var out: [(key: String, message: String)] = []
        if c.session.tlsMinimumVersion > c.session.tlsMaximumVersion {
            out.append(("session.tls_minimum_version",
                        "\(c.session.tlsMinimumVersion) is above tls_maximum_version \(c.session.tlsMaximumVersion)"))
        }
        if c.session.maxIdleConnectionsPerHost > c.session.httpMaximumConnectionsPerHost {
            out.append(("session.max_idle_connections_per_host",
                        "\(c.session.maxIdleConnectionsPerHost) is above http_maximum_connections_per_host \(c.session.httpMaximumConnectionsPerHost)"))
        }
        if let admin = c.adminListen, admin.port != 0, c.listen.contains(where: { $0.port == admin.port }) {
            out.append(("admin_listen", "port \(admin.port) is also a proxy port: the admin endpoint needs its own"))
        }
        if !c.tls.listen.isEmpty || c.tls.admin, c.tls.certificateFile == nil || c.tls.keyFile == nil {
            out.append((c.tls.listen.isEmpty ? "tls.admin" : "tls.listen",
                        "needs tls.certificate_file and tls.key_file (the certificate Larder presents)"))
        }
        if (c.tls.interceptCACertificate == nil) != (c.tls.interceptCAKey == nil) {
            out.append(("tls.intercept_ca_certificate", "give both tls.intercept_ca_certificate and tls.intercept_ca_key, or neither"))
        }
        if let admin = c.adminListen, !admin.isLoopback, c.adminToken == nil {
            out.append(("admin_listen", "\(admin) is reachable from other machines: set admin_token, "
                        + "or listen on a loopback address"))
        }
        if c.limits.maxURIBytes > c.limits.maxHeadBytes {
            out.append(("limits.max_uri_bytes",
                        "\(c.limits.maxURIBytes) is above limits.max_head_bytes \(c.limits.maxHeadBytes)"))
        }
        return out
    }

    // MARK: value shapes

    static func describe(_ n: Node) -> String {
        switch n {
        case .scalar(let s): return "\"\(s.string)\""
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        }
    }

    static func scalar(_ n: Node) throws(ValueError) -> String {
        guard case .scalar(let s) = n else { throw ValueError("expected a single value, got \(describe(n))") }
        return s.string
    }

    static func scalarOrNull(_ n: Node) throws(ValueError) -> String? {
        let s = try scalar(n)
        if s.isEmpty || (n.null != nil && (s == "~" || s.lowercased() == "null")) { return nil }
        return s
    }

    static func nonEmpty(_ n: Node) throws(ValueError) -> String {
        guard let s = try scalarOrNull(n), !s.isEmpty else { throw ValueError("must not be empty") }
        return s
    }

    static func oneOf(_ n: Node, _ choices: [String]) throws(ValueError) -> String {
        let s = try scalar(n)
        guard choices.contains(s) else {
            throw ValueError("expected one of \(choices.joined(separator: ", ")), got \"\(s)\"")
        }
        return s
    }

    static func integer(_ n: Node, in range: ClosedRange<Int>, what: String) throws(ValueError) -> Int {
        let s = try scalar(n)
        guard let v = Int(s.trimmingSpaces()) else { throw ValueError("expected \(what), got \"\(s)\"") }
        guard range.contains(v) else {
            throw ValueError("must be from \(range.lowerBound) to \(range.upperBound), got \(v)")
        }
        return v
    }

    static func boolean(_ n: Node) throws(ValueError) -> Bool {
        let s = try scalar(n).lowercased()
        switch s {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw ValueError("expected true or false, got \"\(s)\"")
        }
    }

    static let ruleKeys = ["scheme", "host", "path_prefix", "status", "content_type", "policy", "storage", "freshness"]
    static let freshnessKeys = ["forced", "maximum", "default"]

    /// `cache.rules`: a list of mappings, each a match and what it sets.
    /// `tls.trust`: a list of `{host: PATTERN, sha256: FINGERPRINT}`; the fingerprint as hex, with
    /// or without colons (what `openssl x509 -fingerprint -sha256` prints).
    static func trustExceptions(_ n: Node) throws(ValueError) -> [Config.TrustException] {
        guard case .sequence(let seq) = n else {
            if n.null != nil { return [] }
            throw ValueError("expected a list of {host, sha256}, got \(describe(n))")
        }
        var out: [Config.TrustException] = []
        for (i, item) in seq.enumerated() {
            guard case .mapping(let m) = item else { throw ValueError("entry \(i + 1): expected a mapping, got \(describe(item))") }
            var host: HostPattern?
            var fingerprint: String?
            for (k, v) in m {
                switch try scalar(k) {
                case "host": host = try ConfigLoader.parseHostPattern(try nonEmpty(v))
                case "sha256":
                    let text = try nonEmpty(v)
                    var hex = text.lowercased().filter { $0 != ":" && $0 != " " }
                    if hex.hasPrefix("sha256=") { hex.removeFirst(7) }
                    guard hex.count == 64, hex.allSatisfy({ $0.isHexDigit }) else {
                        throw ValueError("entry \(i + 1): sha256 must be 32 bytes of hex, got \"\(text)\"")
                    }
                    fingerprint = hex
                case let other: throw ValueError("entry \(i + 1): unknown key \"\(other)\" (known: host, sha256)")
                }
            }
            guard let host, let fingerprint else { throw ValueError("entry \(i + 1): needs both host and sha256") }
            out.append(Config.TrustException(host: host, sha256: fingerprint))
        }
        return out
    }

    static func cacheRules(_ n: Node) throws(ValueError) -> [CacheRuleConfig] {
        guard case .sequence(let seq) = n else {
            if n.null != nil { return [] }
            throw ValueError("expected a list of rules, got \(describe(n))")
        }
        var rules: [CacheRuleConfig] = []
        for (i, item) in seq.enumerated() {
            let place = "rule \(i + 1)"
            guard case .mapping(let m) = item else { throw ValueError("\(place): expected a mapping, got \(describe(item))") }
            var r = CacheRuleConfig()
            for (k, v) in m {
                let key = try scalar(k)
                do throws(ValueError) {
                    switch key {
                    case "scheme": r.scheme = try oneOf(v, ["http", "https"])
                    case "host": r.host = try ConfigLoader.parseHostPattern(try nonEmpty(v))
                    case "path_prefix":
                        let p = try nonEmpty(v)
                        guard p.hasPrefix("/") else { throw ValueError("must start with /, got \"\(p)\"") }
                        r.pathPrefix = p
                    case "status":
                        r.statuses = []
                        for s in try list(v) { r.statuses.append(try integer(s, in: 100...999, what: "a status code")) }
                    case "content_type": r.contentType = try nonEmpty(v).lowercased()
                    case "policy": r.policy = try oneOf(v, requestPolicies)
                    case "storage": r.storage = try oneOf(v, storagePolicies)
                    case "freshness":
                        guard case .mapping(let f) = v else { throw ValueError("expected forced/maximum/default, got \(describe(v))") }
                        for (fk, fv) in f {
                            switch try scalar(fk) {
                            case "forced": r.forcedLifetime = try duration(fv)
                            case "maximum": r.maximumLifetime = try duration(fv)
                            case "default": r.defaultLifetime = try duration(fv)
                            case let other:
                                throw ValueError("unknown freshness key \"\(other)\" (known: \(freshnessKeys.joined(separator: ", ")))")
                            }
                        }
                    default:
                        throw ValueError("unknown key (known: \(ruleKeys.joined(separator: ", ")))")
                    }
                } catch {
                    throw ValueError("\(place): \(key): \(error.message)")
                }
            }
            guard r.policy != nil || r.storage != nil || r.forcedLifetime != nil || r.maximumLifetime != nil
                    || r.defaultLifetime != nil else {
                throw ValueError("\(place): sets nothing (give policy, storage or freshness)")
            }
            rules.append(r)
        }
        return rules
    }

    static func duration(_ n: Node) throws(ValueError) -> Double {
        try ConfigLoader.parseDuration(try scalar(n))
    }

    static func positiveDuration(_ n: Node) throws(ValueError) -> Double {
        let d = try duration(n)
        guard d > 0 else { throw ValueError("must be longer than zero") }
        return d
    }

    static func size(_ n: Node, in range: ClosedRange<Int>) throws(ValueError) -> Int {
        let v = try ConfigLoader.parseByteSize(try scalar(n))
        guard range.contains(v) else {
            throw ValueError("must be from \(range.lowerBound) to \(range.upperBound) bytes, got \(v)")
        }
        return v
    }

    /// A YAML list, or one scalar holding a comma-separated list (the environment's form).
    /// A list of networks (`10.0.0.0/8`, `::1/128`, single addresses).
    static func addressRanges(_ n: Node) throws(ValueError) -> [AddressRange] {
        var ranges: [AddressRange] = []
        for item in try list(n) { ranges.append(try ConfigLoader.parseAddressRange(try nonEmpty(item))) }
        return ranges
    }

    static func list(_ n: Node) throws(ValueError) -> [Node] {
        switch n {
        case .sequence(let seq): return Array(seq)
        case .scalar(let s):
            if n.null != nil { return [] }
            return s.string.split(separator: ",").map { Node(String($0.trimmingSpaces())) }
        default: throw ValueError("expected a list, got \(describe(n))")
        }
    }

    static func endpoints(_ n: Node) throws(ValueError) -> [Endpoint] {
        var out: [Endpoint] = []
        for item in try list(n) { out.append(try ConfigLoader.parseEndpoint(try scalar(item))) }
        return out
    }

    /// A mapping `Name: value` (order kept), or a list of `"Name: value"` strings.
    static func headers(_ n: Node) throws(ValueError) -> [HeaderPair] {
        var pairs: [HeaderPair] = []
        switch n {
        case .mapping(let m):
            for (k, v) in m { pairs.append(HeaderPair(name: try scalar(k), value: try scalar(v))) }
        case .sequence, .scalar:
            for item in try list(n) {
                let s = try scalar(item)
                guard let colon = s.firstIndex(of: ":") else {
                    throw ValueError("expected \"Name: value\", got \"\(s)\"")
                }
                pairs.append(HeaderPair(name: String(s[..<colon].trimmingSpaces()),
                                        value: String(s[s.index(after: colon)...].trimmingSpaces())))
            }
        case .alias:
            throw ValueError("expected a mapping of header names to values, got an alias")
        }
        for p in pairs {
            guard !p.name.isEmpty, p.name.utf8.allSatisfy(isTchar) else {
                throw ValueError("\"\(p.name)\" is not a valid header field name")
            }
            guard !p.value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw ValueError("the value of \(p.name) contains a line break or NUL")
            }
        }
        return pairs
    }
}

extension String {
    func replacingDotsWithUnderscores() -> String {
        String(self.map { $0 == "." ? "_" : $0 })
    }
}
