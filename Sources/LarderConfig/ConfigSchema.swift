import CachePolicy
import HTTPWire
import Yams

/// One configuration key: its dotted name, default, parser, whether a reload applies it, and what it
/// means. `ConfigSchema.fields` is the one list of keys: `Config`'s defaults, the loader, the
/// environment overrides, the unknown-key check, the reload diff, the README's key table
/// (`larder config-keys`) and the check of `Config/larder.yaml` all read it.
public struct ConfigField: Sendable {
    /// What a reload does with a changed value.
    public enum Reload: String, Sendable, Equatable {
        /// Applied to the running proxy; new requests see it.
        case live
        /// Kept as it was until a restart (listeners, threads, the cache's files, the outbound session, logs).
        case restart
    }

    /// Dotted name, `session.connect_timeout`.
    public let key: String
    public let reload: Reload
    /// One line for the README's table (Markdown).
    public let doc: String
    /// The default as the file writes it; empty when the key is unset by default.
    public let defaultText: String
    /// What `GET /config` shows of the value (`ConfigReport`).
    public let disclosure: Disclosure

    let path: PartialKeyPath<Config> & Sendable
    let defaultValue: any Sendable
    let apply: @Sendable (inout Config, Node) throws(ValueError) -> Void
    /// This key's value in a configuration, as the file writes it.
    let text: @Sendable (Config) -> String
    let same: @Sendable (Config, Config) -> Bool
    /// Copies this key's value from the first configuration into the second.
    let copy: @Sendable (Config, inout Config) -> Void
    /// Whether a configuration holds this key's default.
    let holdsDefault: @Sendable (Config) -> Bool

    init<T: Equatable & Sendable>(_ key: String, _ path: WritableKeyPath<Config, T> & Sendable, _ value: T,
                                  _ reload: Reload, _ doc: String, _ shape: ValueShape<T>,
                                  disclosure: Disclosure = .shown) {
        self.key = key
        self.reload = reload
        self.doc = doc
        self.disclosure = disclosure
        self.path = path
        defaultValue = value
        defaultText = shape.render(value)
        let parse = shape.parse
        let render = shape.render
        apply = { config, node throws(ValueError) in config[keyPath: path] = try parse(node) }
        text = { render($0[keyPath: path]) }
        same = { $0[keyPath: path] == $1[keyPath: path] }
        copy = { from, to in to[keyPath: path] = from[keyPath: path] }
        holdsDefault = { $0[keyPath: path] == value }
    }

    /// Whether `node` sets this key to its default.
    func isDefault(_ node: Node) throws(ValueError) -> Bool {
        var config = Config()
        try apply(&config, node)
        return holdsDefault(config)
    }

    /// `LARDER_SESSION_CONNECT_TIMEOUT` for `session.connect_timeout`.
    public var environmentName: String {
        "LARDER_" + key.uppercased().replacingDotsWithUnderscores()
    }
}

public enum ConfigSchema {
    public static let fields: [ConfigField] = [
        ConfigField("listen", \.listen, [Endpoint(host: "127.0.0.1", port: 3128)], .restart,
                    "proxy listeners; port 0 picks a free port (logged); `{address: HOST:PORT, proxy_protocol: true}` "
                        + "takes a PROXY protocol header (v1 or v2) first, from `proxy_protocol_from` only",
                    .list(.listener).checked { list throws(ValueError) in
                        guard !list.isEmpty else { throw ValueError("needs at least one HOST:PORT") }
                    }),
        ConfigField("proxy_protocol_from", \.proxyProtocolFrom, AddressRange.loopback, .live,
                    "load balancers whose PROXY protocol headers are believed, on `proxy_protocol` listeners; any "
                        + "other connection there is closed", .list(.addressRange)),
        ConfigField("admin_listen", \.adminListen, Endpoint(host: "127.0.0.1", port: 9090), .restart,
                    "admin endpoint (below), `off` to disable; never a proxy port",
                    .optional(.endpoint, off: ["off", "false"], unset: "off")),
        ConfigField("admin_token", \.adminToken, nil, .live,
                    "bearer token the admin endpoint requires (all but `/healthz` and `/readyz`); required off loopback, "
                        + "and there at least \(AdminTokenRule.minimumLength) characters and no placeholder such as "
                        + "`change-me` (Larder refuses to start otherwise)",
                    .optional(.text.checked { s throws(ValueError) in
                        if s.contains(where: { $0 == " " || $0.isNewline || !$0.isASCII }) {
                            throw ValueError("must be printable ASCII without spaces")
                        }
                    }), disclosure: .redacted),
        ConfigField("admin_hosts", \.adminHosts, [], .live,
                    "extra names (or addresses) the admin endpoint accepts in `Host`, any port, for when it is "
                        + "reached by a name; its own address and, on loopback, `localhost` always are",
                    .list(ValueShape(parse: { n throws(ValueError) in try ConfigLoader.parseHostName(try nonEmpty(n)) },
                                     render: ConfigText.scalar))),
        ConfigField("workers", \.workers, 0, .restart, "event-loop threads; 0 = one per core",
                    .integer(0...256, what: "a thread count (0: one per core)")),
        ConfigField("cache_dir", \.cacheDirectory, "larder-cache", .restart,
                    "LMDB cache directory (created if missing)", .text),
        ConfigField("shutdown_grace", \.shutdownGrace, 10, .live, "time in-flight requests get after SIGTERM",
                    .duration),
        ConfigField("reverse_origin", \.reverseOrigin, nil, .live,
                    "reverse mode: every request goes here (absolute-form ones too; `CONNECT` is `405`)",
                    .optional(.origin)),
        ConfigField("reverse_host", \.reverseHost, .client, .live,
                    "reverse mode: the `Host` sent upstream and keyed on, `client` (the client's, normalised) "
                        + "or `origin` (`reverse_origin`'s)", .choice),
        ConfigField("reverse_allowed_hosts", \.reverseAllowedHosts, [], .live,
                    "reverse mode: `Host` names or `*.patterns` answered, any other gets `400`; empty: any",
                    hostPatterns),
        ConfigField("mirrors", \.mirrors, [], .live,
                    "registry mirror endpoints: a path on Larder's listeners standing for an upstream registry, "
                        + "fetched over verified TLS, so clients need no CA: built-in names ("
                        + MirrorConfig.builtInNames.map { "`\($0)`" }.joined(separator: ", ")
                        + ") or `{name, kind, path, upstream, also, min_release_age}` (see below)", .mirrors),
        ConfigField("connect_ports", \.connectPorts, [443], .live, "ports CONNECT may reach",
                    .list(.integer(1...65_535, what: "a port"))),
        ConfigField("purge_allowed_from", \.purgeAllowedFrom, AddressRange.loopback, .live,
                    "clients that may send `PURGE <url>` to the proxy port", .list(.addressRange)),
        // Loopback only: Larder is never an open proxy unless told to be.
        ConfigField("allow_clients", \.allowClients, AddressRange.loopback, .live,
                    "clients that may use the proxy at all; others get 403", .list(.addressRange)),
        // Link-local holds cloud metadata services.
        ConfigField("deny_destinations", \.denyDestinations, [
            .network(AddressRange(bytes: [169, 254, 0, 0], prefixLength: 16)),
            .network(AddressRange(bytes: [0xFE, 0x80] + Array(repeating: 0, count: 14), prefixLength: 10)),
        ], .live, "networks (checked after DNS) and host patterns never contacted (403)", .list(.destination)),
        ConfigField("protect_this_host", \.protectThisHost, .auto, .live,
                    "refuse destinations on this machine (loopback, `0.0.0.0`, its interfaces' addresses): "
                        + "`auto` once `allow_clients` admits anyone from elsewhere, `on`, `off`", .choice),
        ConfigField("auth.users_file", \.auth.usersFile, nil, .live,
                    "htpasswd-style `user:hash` file (bcrypt or SHA-crypt) for `Proxy-Authorization: Basic`; "
                        + "none: no authentication", .optionalText),
        ConfigField("auth.realm", \.auth.realm, "Larder", .live, "realm in `Proxy-Authenticate`",
                    .text.checked { s throws(ValueError) in
                        guard s.allSatisfy({ $0.isASCII && $0 != "\"" && $0 != "\\" && !$0.isNewline }) else {
                            throw ValueError("must be printable ASCII without quotes or backslashes")
                        }
                    }),
        ConfigField("auth.destinations", \.auth.destinations, [.any], .live,
                    "destination host patterns that need credentials", hostPatterns),
        ConfigField("auth.max_pending_checks", \.auth.maxPendingChecks, 32, .live,
                    "password checks waiting or running at once; beyond it an unseen credential gets `429` with "
                        + "`Retry-After`", .integer(1...100_000, what: "a number of checks")),
        ConfigField("auth.max_pending_checks_per_client", \.auth.maxPendingChecksPerClient, 4, .live,
                    "the same per client address", .integer(1...100_000, what: "a number of checks")),
        ConfigField("via_name", \.viaName, "larder", .live, "pseudonym in `Via`",
                    .text.checked { s throws(ValueError) in
                        guard s.allSatisfy({ $0.isASCII && $0 != " " && $0 != "," && !$0.isNewline }) else {
                            throw ValueError("must be a single token without spaces or commas, got \"\(s)\"")
                        }
                    }),
        ConfigField("log_level", \.logLevel, .info, .restart, "operational log (stderr): trace … critical", .choice),
        ConfigField("access_log", \.accessLog, .stdout, .restart,
                    "one line per request: `stdout`, a file (reopened on SIGUSR1), or `off`",
                    .optional(ValueShape(parse: { n throws(ValueError) in
                        let s = try scalar(n)
                        return s == "stdout" ? .stdout : .file(s)
                    }, render: { destination in
                        switch destination {
                        case .stdout: return "stdout"
                        case .file(let path): return ConfigText.scalar(path)
                        }
                    }), off: ["off", "false"], unset: "off")),
        ConfigField("access_log_format", \.accessLogFormat, .combined, .restart,
                    "`combined` (+ cache result and seconds) or `json`", .choice),

        ConfigField("limits.max_head_bytes", \.limits.maxHeadBytes, 65_536, .live, "largest request head (431 beyond)",
                    .size(1_024...16_777_216)),
        ConfigField("limits.max_header_count", \.limits.maxHeaderCount, 100, .live,
                    "most request fields (431 beyond)", .integer(1...10_000, what: "a field count")),
        ConfigField("limits.max_uri_bytes", \.limits.maxURIBytes, 8_192, .live, "longest request line (414 beyond)",
                    .size(64...1_048_576)),
        ConfigField("limits.client_header_timeout", \.limits.clientHeaderTimeout, 30, .live,
                    "time to send a whole request head (408 beyond)", .positiveDuration),
        ConfigField("limits.client_idle_timeout", \.limits.clientIdleTimeout, 60, .live,
                    "idle keep-alive client connections close after this (counted once their answers are "
                        + "written); also the send timeout: a client that takes less than 16 KiB of its answer "
                        + "in this time is dropped", .positiveDuration),
        ConfigField("limits.max_response_head_bytes", \.limits.maxResponseHeadBytes, 65_536, .restart,
                    "largest origin response head (502 beyond)", .size(1_024...16_777_216)),
        ConfigField("limits.max_request_body", \.limits.maxRequestBody, 1 << 30, .live,
                    "largest request body (413 beyond; a chunked upload is cut there)", .size(1...(1 << 50))),
        ConfigField("limits.max_connections", \.limits.maxConnections, 10_000, .live,
                    "client connections at once, all workers together (503 beyond)",
                    .integer(1...1_000_000, what: "a connection count")),
        ConfigField("limits.max_connections_per_client", \.limits.maxConnectionsPerClient, 512, .live,
                    "client connections at once from one address (429 beyond; 0: no limit)",
                    .integer(0...1_000_000, what: "a connection count (0: no limit)")),
        ConfigField("limits.origin_fetches_per_client", \.limits.originFetchesPerClient, 256, .live,
                    "requests of one client address at origins at once (forwarded, revalidated, fetched for the "
                        + "cache), all workers together; 429 beyond (0: no limit)",
                    .integer(0...1_000_000, what: "a fetch count (0: no limit)")),
        ConfigField("limits.detached_fetches_per_client", \.limits.detachedFetchesPerClient, 4, .live,
                    "downloads and background refreshes running with no client attached (finished for the cache "
                        + "after the client left, range fills) on behalf of one client address; beyond, the next is cut",
                    .integer(0...1_000_000, what: "a fetch count")),
        ConfigField("limits.detached_bytes_per_client", \.limits.detachedBytesPerClient, 64 << 20, .live,
                    "… and the bytes those may still download (an unknown length counts what has arrived, a MiB "
                        + "ahead); a client's first such download may be as large as any stored object",
                    .size(0...(1 << 50))),
        ConfigField("limits.detached_fetches", \.limits.detachedFetches, 64, .live,
                    "downloads with no client attached, all clients together",
                    .integer(0...1_000_000, what: "a fetch count")),
        ConfigField("limits.detached_bytes", \.limits.detachedBytes, 1 << 30, .live,
                    "… and the bytes those may still download", .size(0...(1 << 50))),

        ConfigField("http2.enabled", \.http2.enabled, true, .restart,
                    "HTTP/2 from clients: TLS listeners and interception offer `h2` by ALPN, plain listeners take "
                        + "the connection preface (prior knowledge); `Upgrade: h2c` is always refused", .boolean),
        ConfigField("http2.max_concurrent_streams", \.http2.maxConcurrentStreams, 100, .restart,
                    "streams one HTTP/2 connection may have open at once", .integer(1...10_000, what: "a stream count")),
        ConfigField("http2.stream_window", \.http2.streamWindow, 256 * 1024, .restart,
                    "request-body bytes a stream may send ahead of Larder (its flow-control window)",
                    .size(16_384...(1 << 30))),
        ConfigField("http2.connection_window", \.http2.connectionWindow, 1 << 20, .restart,
                    "… and all streams of a connection together", .size(65_535...(1 << 30))),
        ConfigField("http2.max_header_list", \.http2.maxHeaderList, 65_536, .restart,
                    "largest decoded header list of a request (the stream is refused beyond)",
                    .size(1_024...16_777_216)),
        ConfigField("http2.stream_output", \.http2.streamOutput, 64 * 1024, .restart,
                    "answer bytes queued per stream before its producer waits: with `max_concurrent_streams`, "
                        + "the bound on a connection's answer memory (6.25 MiB by default)", .size(16_384...(1 << 30))),

        ConfigField("session.http_additional_headers", \.session.httpAdditionalHeaders, [], .restart,
                    "fields added to outbound requests lacking them", .headers, disclosure: .valuesRedacted),
        ConfigField("session.timeout_interval_for_request", \.session.timeoutIntervalForRequest, 60, .restart,
                    "longest silence from an origin (504)", .positiveDuration),
        ConfigField("session.timeout_interval_for_resource", \.session.timeoutIntervalForResource, 604_800, .restart,
                    "longest whole exchange (504)", .positiveDuration),
        ConfigField("session.connect_timeout", \.session.connectTimeout, 10, .restart,
                    "longest connection setup, TCP and TLS (504)", .positiveDuration),
        ConfigField("session.http_maximum_connections_per_host", \.session.httpMaximumConnectionsPerHost, 64, .restart,
                    "per origin and worker; excess requests queue FIFO",
                    .integer(1...100_000, what: "a connection count")),
        ConfigField("session.max_idle_connections_per_host", \.session.maxIdleConnectionsPerHost, 64, .restart,
                    "idle keep-alive connections kept per origin and worker (at most `http_maximum_connections_per_host`)",
                    .integer(0...100_000, what: "a connection count")),
        ConfigField("session.reuse_after_bodyless_answers", \.session.reuseAfterBodylessAnswers, true, .restart,
                    "reuse a connection after a HEAD or 304 answer announcing a body (`false`: close it; see Security)",
                    .boolean),
        ConfigField("session.http2", \.session.http2, .auto, .restart,
                    "`auto`: https origins are offered HTTP/2 by ALPN and, where they choose it, one connection "
                        + "carries many requests (each a stream, counted in the per-host limit); `off`: HTTP/1.1 only",
                    .choice),
        ConfigField("session.idle_connection_timeout", \.session.idleConnectionTimeout, 60, .restart,
                    "idle pooled connections close after this", .positiveDuration),
        ConfigField("session.proxy", \.session.parentProxy, nil, .restart,
                    "parent proxy, `http://host:port`: http:// and ftp:// requests in absolute form, https and CONNECT tunnelled",
                    .optional(.parentProxy)),
        ConfigField("session.proxy_credentials_file", \.session.parentProxyCredentialsFile, nil, .restart,
                    "file with `user:password` for the parent proxy (`Proxy-Authorization: Basic`); none: no credentials",
                    .optionalText, disclosure: .notSecret(pathToSecret)),
        ConfigField("session.tls_minimum_version", \.session.tlsMinimumVersion, .tls12, .restart,
                    "lowest TLS version allowed towards https origins", .choice),
        ConfigField("session.tls_maximum_version", \.session.tlsMaximumVersion, .tls13, .restart,
                    "highest TLS version allowed towards https origins", .choice),
        ConfigField("session.ca_file", \.session.caFile, nil, .restart, "the older name of `tls.ca_file`",
                    .optionalText),
        ConfigField("session.dns_servers", \.session.dnsServers, [], .restart,
                    "name servers `host:port` to ask instead of resolv.conf's; `/etc/hosts` always applies",
                    .list(.dnsServer)),
        ConfigField("tls.ca_file", \.session.caFile, nil, .restart,
                    "CA bundle that verifies https origins (also `--ca-file`); none: the system store", .optionalText),
        ConfigField("tls.listen", \.tls.listen, [], .restart,
                    "HTTPS proxy listeners (clients use `https://HOST:PORT` as their proxy); `proxy_protocol` as in "
                        + "`listen` (the header comes before TLS)", .list(.listener)),
        // Read again on every reload, changed or not: renewed files keep their names.
        ConfigField("tls.certificate_file", \.tls.certificateFile, nil, .live,
                    "PEM certificate (then chain) of the HTTPS listeners and admin endpoint; read again on every "
                        + "reload", .optionalText),
        ConfigField("tls.key_file", \.tls.keyFile, nil, .live, "its PEM key; read again on every reload",
                    .optionalText, disclosure: .notSecret(pathToSecret)),
        ConfigField("tls.admin", \.tls.admin, false, .restart, "the admin endpoint speaks TLS", .boolean),
        ConfigField("tls.trust", \.tls.trust, [], .restart,
                    "per-host exceptions: `{host, sha256}` accepts the certificate with that fingerprint for hosts "
                        + "matching the pattern (`*` too); the first entry that matches applies", .trust),
        ConfigField("tls.intercept", \.tls.intercept, [], .restart,
                    "CONNECT destinations (host patterns) to decrypt and cache; empty: off", hostPatterns),
        ConfigField("tls.intercept_ca_certificate", \.tls.interceptCACertificate, nil, .restart,
                    "the CA certificate that signs minted certificates; none: Larder's own in `intercept_ca_dir`",
                    .optionalText),
        ConfigField("tls.intercept_ca_key", \.tls.interceptCAKey, nil, .restart, "that CA's key", .optionalText,
                    disclosure: .notSecret(pathToSecret)),
        // Configuration, not cache: outside cache_dir, so a cache moved aside or wiped keeps the CA clients trust.
        ConfigField("tls.intercept_ca_dir", \.tls.interceptCADirectory, "larder-ca", .restart,
                    "directory of Larder's own interception CA (`larder-ca.pem` 0644, `larder-ca-key.pem` 0600), "
                        + "apart from `cache_dir`: generated there on first use, or copied there from `cache_dir/ca` "
                        + "(earlier versions); never replaced but by `larder ca init --force`", .text),
        ConfigField("tls.intercept_key_type", \.tls.interceptKeyType, .ecP256, .restart,
                    "key of minted certificates: `ec-p256` or `rsa-2048`", .choice,
                    disclosure: .notSecret("the kind of key minted, not a key")),
        ConfigField("tls.intercept_certificate_lifetime", \.tls.interceptCertificateLifetime, 30 * 86_400, .restart,
                    "validity of minted certificates, 1h to 825d",
                    .positiveDuration.checked { d throws(ValueError) in
                        guard d >= 3_600, d <= 825 * 86_400 else {
                            throw ValueError("must be between 1h and 825d (clients reject longer-lived certificates)")
                        }
                    }),

        ConfigField("cache.disk_capacity", \.cache.diskCapacity, 1 << 30, .restart,
                    "bytes stored on disk; least recently used entries are evicted beyond. The directory's size on "
                        + "disk (`du`) stays within it plus a margin of max(10 %, 4 MiB)", .size(1 << 20...(1 << 50))),
        ConfigField("cache.memory_capacity", \.cache.memoryCapacity, 64 << 20, .restart,
                    "the in-memory tier in front of the disk", .size(0...(1 << 40))),
        ConfigField("cache.memory_max_object_size", \.cache.memoryMaxObjectSize, 1 << 20, .restart,
                    "entries up to this size are also kept in memory", .size(0...(1 << 40))),
        ConfigField("cache.max_object_size", \.cache.maxObjectSize, 256 << 20, .restart,
                    "larger responses are forwarded, not stored (at most a quarter of `disk_capacity` is used)",
                    .size(0...(1 << 50))),
        ConfigField("cache.durability", \.cache.durability, .fast, .restart,
                    "`fast`: sync every `sync_interval`; `safe`: sync every commit", .choice),
        ConfigField("cache.sync_interval", \.cache.syncInterval, 1, .restart, "how often `fast` durability syncs",
                    .positiveDuration),
        ConfigField("cache.revalidation", \.cache.revalidation, .head, .live,
                    "`head` (the documented way) or `conditional-get`", .choice),
        ConfigField("cache.default_policy", \.cache.defaultPolicy, .useProtocolCachePolicy, .live,
                    "policy for requests that name none", .choice),
        ConfigField("cache.offline", \.cache.offline, false, .live,
                    "serve only from the cache (504 when nothing is stored)", .boolean),
        ConfigField("cache.heuristic_fraction", \.cache.heuristicFraction, 0.1, .live,
                    "heuristic freshness: this fraction of (Date − Last-Modified) …", .fraction),
        ConfigField("cache.heuristic_max", \.cache.heuristicMax, 86_400, .live, "… at most this long", .duration),
        ConfigField("cache.collapse_requests", \.cache.collapseRequests, true, .live,
                    "concurrent misses for one URL share one origin fetch (see below)", .boolean),
        ConfigField("cache.on_unusable_dir", \.cache.onUnusableDirectory, .exit, .restart,
                    "a cache directory unusable at start: `exit` (status 2) or `pass-through` (serve uncached, "
                        + "`larder_cache_disabled` 1)", .choice),
        ConfigField("cache.ephemeral", \.cache.ephemeral, false, .restart,
                    "memory tier only: nothing written to disk, `cache_dir` neither created nor locked; responses "
                        + "up to `memory_max_object_size` are kept (also `--ephemeral`)", .boolean),
        ConfigField("cache.rules", \.cache.rules, [], .live,
                    "per-URL `policy`, `storage`, `freshness`, `ignore_reload` (see `Config/larder.yaml`)", .cacheRules),
        ConfigField("cache.presets", \.cache.presets, [], .live,
                    "shipped rule sets for package registries, applied after `rules` in the order listed: "
                        + Presets.names.map { "`\($0)`" }.joined(separator: ", ")
                        + " (`larder presets show NAME`)", presetNames),
        ConfigField("cache.targeted_cache_control", \.cache.targetedCacheControl, .auto, .live,
                    "RFC 9213 fields that govern Larder's own caching instead of `Cache-Control`, first present wins: "
                        + "`auto` (`CDN-Cache-Control` in reverse mode, none in forward mode) or a list, e.g. "
                        + "`[Larder-Cache-Control, CDN-Cache-Control]`; `[]`: none", targetedFields),
        ConfigField("cache.finish_aborted_fraction", \.cache.finishAbortedFraction, 0.75, .live,
                    "a cacheable download its client aborts is finished for the store once this fraction of "
                        + "its (known) length has arrived, so the retry is a hit; `off`: never",
                    .optional(.fraction, off: ["off"], unset: "off")),
        ConfigField("cache.finish_aborted_max_size", \.cache.finishAbortedMaxSize, 64 << 20, .live,
                    "… only for responses up to this size", .size(0...(1 << 50))),
        ConfigField("cache.range_misses", \.cache.rangeMisses, .fill, .live,
                    "a ranged request with nothing stored to answer it: `fill` (the whole object is fetched and "
                        + "stored, the range cut from it) or `pieces` (the range is asked for as it is and the 206 "
                        + "stored as a piece, completed by a later request for the whole)", .choice),
    ]

    /// Why a path to a key or credentials is shown: it names the file, whose permissions keep what
    /// is in it; the operator needs to see which file is in force, and the admin token guards it.
    static let pathToSecret = "a path: the secret stays in the file, which the path does not open"

    /// `auto`, or a list of field names.
    static let targetedFields = ValueShape<TargetedFields>(parse: { n throws(ValueError) in
        if case .scalar = n, try scalar(n) == "auto" { return .auto }
        var names: [String] = []
        for item in try list(n) {
            let name = try nonEmpty(item)
            guard name.utf8.allSatisfy(isTchar) else { throw ValueError("\"\(name)\" is not a field name") }
            names.append(name.lowercased())
        }
        return .fields(names)
    }, render: { value in
        switch value {
        case .auto: return "auto"
        case .fields(let names): return "[" + names.map(ConfigText.scalar).joined(separator: ", ") + "]"
        }
    })

    /// Names of shipped presets, each once.
    static let presetNames = ValueShape<[String]>(parse: { n throws(ValueError) in
        var names: [String] = []
        for item in try list(n) {
            let name = try nonEmpty(item)
            guard Presets.names.contains(name) else {
                throw ValueError("unknown preset \"\(name)\" (known: \(Presets.names.joined(separator: ", ")))")
            }
            guard !names.contains(name) else { throw ValueError("preset \"\(name)\" is listed twice") }
            names.append(name)
        }
        return names
    }, render: { "[" + $0.map(ConfigText.scalar).joined(separator: ", ") + "]" })

    /// Host patterns: `example.com`, `*.example.com` (any subdomain) or `*` (any host).
    static let hostPatterns = ValueShape<[HostPattern]>(parse: { n throws(ValueError) in
        var patterns: [HostPattern] = []
        for item in try list(n) { patterns.append(try ConfigLoader.parseHostPattern(try nonEmpty(item))) }
        return patterns
    }, render: { "[" + $0.map { ConfigText.scalar($0.description) }.joined(separator: ", ") + "]" })

    /// The default of the key at `path` (what `Config`'s properties start as).
    static func defaultValue<T>(_ path: KeyPath<Config, T>) -> T {
        let wanted: AnyKeyPath = path
        guard let field = fields.first(where: { $0.path as AnyKeyPath == wanted }) else {
            fatalError("no configuration key sets \(path)")
        }
        return field.defaultValue as! T
    }

    /// The keys as a Markdown table, for the README (`larder config-keys`).
    public static func markdown() -> String {
        var out = "| key | default | on reload | meaning |\n|---|---|---|---|\n"
        for f in fields {
            let value = f.defaultText.isEmpty ? "none" : "`\(f.defaultText)`"
            let reload = f.reload == .live ? "applied" : "restart"
            out += "| `\(f.key)` | \(value) | \(reload) | \(f.doc) |\n"
        }
        return out
    }

    static let sections = Set(fields.compactMap { f in f.key.split(separator: ".").dropLast().first.map(String.init) })

    static let byKey: [String: ConfigField] = Dictionary(uniqueKeysWithValues: fields.map { ($0.key, $0) })

    /// Checks that hold between keys rather than within one.
    static func crossChecks(_ c: Config) -> [(key: String, message: String)] {
        var out: [(key: String, message: String)] = []
        if c.session.tlsMinimumVersion > c.session.tlsMaximumVersion {
            out.append(("session.tls_minimum_version",
                        "\(c.session.tlsMinimumVersion.rawValue) is above tls_maximum_version \(c.session.tlsMaximumVersion.rawValue)"))
        }
        if let admin = c.adminListen, admin.port != 0, c.listen.contains(where: { $0.port == admin.port }) {
            out.append(("admin_listen", "port \(admin.port) is also a proxy port: the admin endpoint needs its own"))
        }
        if (c.listen + c.tls.listen).contains(where: \.proxyProtocol), c.proxyProtocolFrom.isEmpty {
            out.append(("proxy_protocol_from", "is empty, so no load balancer may connect to the proxy_protocol listeners"))
        }
        if !c.tls.listen.isEmpty || c.tls.admin, c.tls.certificateFile == nil || c.tls.keyFile == nil {
            out.append((c.tls.listen.isEmpty ? "tls.admin" : "tls.listen",
                        "needs tls.certificate_file and tls.key_file (the certificate Larder presents)"))
        }
        if !c.tls.intercept.isEmpty, c.tls.interceptCACertificate == nil, !c.cache.ephemeral,
           ConfigPaths.isWithin(c.tls.interceptCADirectory, c.cacheDirectory) {
            out.append(("tls.intercept_ca_dir", "\(c.tls.interceptCADirectory) is inside cache_dir: a cache moved aside "
                        + "or wiped would take the CA clients trust with it; give a directory outside it"))
        }
        if (c.tls.interceptCACertificate == nil) != (c.tls.interceptCAKey == nil) {
            out.append(("tls.intercept_ca_certificate", "give both tls.intercept_ca_certificate and tls.intercept_ca_key, or neither"))
        }
        if let admin = c.adminListen, !admin.isLoopback, c.adminToken == nil {
            out.append(("admin_listen", "\(admin) is reachable from other machines: set admin_token, "
                        + "or listen on a loopback address"))
        }
        if let admin = c.adminListen, !admin.isLoopback, let token = c.adminToken,
           let problem = AdminTokenRule.problem(token) {
            out.append(("admin_token", problem))
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

    static func choice<T: CaseIterable & RawRepresentable & Sendable & Equatable>(_ n: Node) throws(ValueError) -> T
    where T.RawValue == String {
        try ValueShape<T>.choice.parse(n)
    }

    /// `http` or `https`.
    static func scheme(_ n: Node) throws(ValueError) -> URIScheme {
        let s = try scalar(n)
        switch s {
        case "http": return .http
        case "https": return .https
        default: throw ValueError("expected one of http, https, got \"\(s)\"")
        }
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

    static let ruleKeys = ["scheme", "host", "path_prefix", "path", "status", "content_type", "policy", "storage", "freshness", "ignore_reload"]
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
                    case "scheme": r.scheme = try scheme(v)
                    case "host": r.host = try ConfigLoader.parseHostPattern(try nonEmpty(v))
                    case "path_prefix":
                        let p = try nonEmpty(v)
                        guard p.hasPrefix("/") else { throw ValueError("must start with /, got \"\(p)\"") }
                        r.pathPrefix = p
                    case "path":
                        let text = try nonEmpty(v)
                        do throws(PathGlobError) { r.path = try PathGlob(parsing: text) } catch {
                            throw ValueError("\(error.reason), got \"\(text)\"")
                        }
                    case "status":
                        r.statuses = []
                        for s in try list(v) { r.statuses.append(try integer(s, in: 100...999, what: "a status code")) }
                    case "content_type": r.contentType = try nonEmpty(v).lowercased()
                    case "policy": r.policy = try choice(v)
                    case "storage": r.storage = try choice(v)
                    case "ignore_reload": r.ignoreReload = try boolean(v)
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
                    || r.defaultLifetime != nil || r.ignoreReload != nil else {
                throw ValueError("\(place): sets nothing (give policy, storage, freshness or ignore_reload)")
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
    static func list(_ n: Node) throws(ValueError) -> [Node] {
        switch n {
        case .sequence(let seq): return Array(seq)
        case .scalar(let s):
            if n.null != nil { return [] }
            return s.string.split(separator: ",").map { Node(String($0.trimmingSpaces())) }
        default: throw ValueError("expected a list, got \(describe(n))")
        }
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
