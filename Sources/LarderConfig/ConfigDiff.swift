/// What differs between two configurations, key by key, and whether each difference can take
/// effect in a running Larder (a reload) or needs a restart (listeners, threads, the cache's
/// files and capacities, the outbound session, the logs' destinations).
public enum ConfigDiff {
    struct Key: Sendable {
        let key: String
        let live: Bool
        let same: @Sendable (Config, Config) -> Bool
        /// Copies this key's value from the first configuration into the second.
        let copy: @Sendable (Config, inout Config) -> Void
    }

    static func key<T: Equatable & Sendable>(_ key: String, live: Bool,
                                             _ path: WritableKeyPath<Config, T> & Sendable) -> Key {
        Key(key: key, live: live, same: { $0[keyPath: path] == $1[keyPath: path] },
            copy: { from, to in to[keyPath: path] = from[keyPath: path] })
    }

    /// Every configuration key (a test checks this against the schema).
    static let keys: [Key] = [
        key("listen", live: false, \.listen),
        key("admin_listen", live: false, \.adminListen),
        key("admin_token", live: true, \.adminToken),
        key("admin_hosts", live: true, \.adminHosts),
        key("workers", live: false, \.workers),
        key("cache_dir", live: false, \.cacheDirectory),
        key("shutdown_grace", live: true, \.shutdownGrace),
        key("reverse_origin", live: true, \.reverseOrigin),
        key("reverse_host", live: true, \.reverseHost),
        key("reverse_allowed_hosts", live: true, \.reverseAllowedHosts),
        key("connect_ports", live: true, \.connectPorts),
        key("purge_allowed_from", live: true, \.purgeAllowedFrom),
        key("allow_clients", live: true, \.allowClients),
        key("deny_destinations", live: true, \.denyDestinations),
        key("protect_this_host", live: true, \.protectThisHost),
        key("auth.users_file", live: true, \.auth.usersFile),
        key("auth.realm", live: true, \.auth.realm),
        key("auth.destinations", live: true, \.auth.destinations),
        key("auth.max_pending_checks", live: true, \.auth.maxPendingChecks),
        key("auth.max_pending_checks_per_client", live: true, \.auth.maxPendingChecksPerClient),
        key("via_name", live: true, \.viaName),
        key("log_level", live: false, \.logLevel),
        key("access_log", live: false, \.accessLog),
        key("access_log_format", live: false, \.accessLogFormat),
        key("limits.max_head_bytes", live: true, \.limits.maxHeadBytes),
        key("limits.max_header_count", live: true, \.limits.maxHeaderCount),
        key("limits.max_uri_bytes", live: true, \.limits.maxURIBytes),
        key("limits.client_header_timeout", live: true, \.limits.clientHeaderTimeout),
        key("limits.client_idle_timeout", live: true, \.limits.clientIdleTimeout),
        key("limits.max_response_head_bytes", live: false, \.limits.maxResponseHeadBytes),
        key("limits.max_request_body", live: true, \.limits.maxRequestBody),
        key("limits.max_connections", live: true, \.limits.maxConnections),
        key("limits.max_connections_per_client", live: true, \.limits.maxConnectionsPerClient),
        key("session.http_additional_headers", live: false, \.session.httpAdditionalHeaders),
        key("session.timeout_interval_for_request", live: false, \.session.timeoutIntervalForRequest),
        key("session.timeout_interval_for_resource", live: false, \.session.timeoutIntervalForResource),
        key("session.connect_timeout", live: false, \.session.connectTimeout),
        key("session.http_maximum_connections_per_host", live: false, \.session.httpMaximumConnectionsPerHost),
        key("session.max_idle_connections_per_host", live: false, \.session.maxIdleConnectionsPerHost),
        key("session.reuse_after_bodyless_answers", live: false, \.session.reuseAfterBodylessAnswers),
        key("session.idle_connection_timeout", live: false, \.session.idleConnectionTimeout),
        key("session.proxy", live: false, \.session.parentProxy),
        key("session.tls_minimum_version", live: false, \.session.tlsMinimumVersion),
        key("session.tls_maximum_version", live: false, \.session.tlsMaximumVersion),
        key("session.ca_file", live: false, \.session.caFile),
        key("session.dns_servers", live: false, \.session.dnsServers),
        key("tls.ca_file", live: false, \.session.caFile),
        key("tls.listen", live: false, \.tls.listen),
        // Read again on every reload, changed or not: renewed files keep their names.
        key("tls.certificate_file", live: true, \.tls.certificateFile),
        key("tls.key_file", live: true, \.tls.keyFile),
        key("tls.admin", live: false, \.tls.admin),
        key("tls.trust", live: false, \.tls.trust),
        key("tls.intercept", live: false, \.tls.intercept),
        key("tls.intercept_ca_certificate", live: false, \.tls.interceptCACertificate),
        key("tls.intercept_ca_key", live: false, \.tls.interceptCAKey),
        key("tls.intercept_key_type", live: false, \.tls.interceptKeyType),
        key("tls.intercept_certificate_lifetime", live: false, \.tls.interceptCertificateLifetime),
        key("cache.disk_capacity", live: false, \.cache.diskCapacity),
        key("cache.memory_capacity", live: false, \.cache.memoryCapacity),
        key("cache.memory_max_object_size", live: false, \.cache.memoryMaxObjectSize),
        key("cache.max_object_size", live: false, \.cache.maxObjectSize),
        key("cache.durability", live: false, \.cache.durability),
        key("cache.sync_interval", live: false, \.cache.syncInterval),
        key("cache.revalidation", live: true, \.cache.revalidation),
        key("cache.default_policy", live: true, \.cache.defaultPolicy),
        key("cache.offline", live: true, \.cache.offline),
        key("cache.heuristic_fraction", live: true, \.cache.heuristicFraction),
        key("cache.heuristic_max", live: true, \.cache.heuristicMax),
        key("cache.collapse_requests", live: true, \.cache.collapseRequests),
        key("cache.on_unusable_dir", live: false, \.cache.onUnusableDirectory),
        key("cache.rules", live: true, \.cache.rules),
    ]

    /// Keys whose values differ: those a reload applies, and those that wait for a restart.
    public static func between(_ old: Config, _ new: Config) -> (live: [String], restart: [String]) {
        var live: [String] = []
        var restart: [String] = []
        for k in keys where !k.same(old, new) {
            if k.live { live.append(k.key) } else { restart.append(k.key) }
        }
        return (live, restart)
    }

    /// Sets `key` in `config` back to its value in `from` (a reload keeps restart-only values).
    public static func keep(_ key: String, from: Config, in config: inout Config) {
        keys.first { $0.key == key }?.copy(from, &config)
    }

    /// The keys a reload cannot apply.
    public static var restartKeys: [String] { keys.filter { !$0.live }.map(\.key) }
}
