/// The one table of Larder's statistics: `/stats` (JSON), `/metrics` (Prometheus text) and the
/// README's list are all made from it, so a name means the same thing everywhere.
public struct Metric: Sendable {
    public enum Kind: String, Sendable {
        case counter, gauge
    }

    /// Where a series' value comes from.
    public enum Source: Sendable {
        /// Summed over workers.
        case count(Count)
        /// Summed over workers.
        case level(Level)
        /// One series per worker, labelled with its index.
        case perWorker(Level, divisor: Double)
        /// Read from the cache or the process when the statistics are taken.
        case sampled(Sample)
    }

    /// Name without the `larder_` prefix or the `_total` suffix of counters, e.g. `cache_lookups`.
    public let name: String
    public let kind: Kind
    public let help: String
    /// The label that tells the series apart, if there is more than one.
    public let label: String?
    public let series: [(value: String, source: Source)]

    public var prometheusName: String { "larder_" + name + (kind == .counter ? "_total" : "") }
}

/// Values read when statistics are taken rather than counted as things happen.
public enum Sample: String, CaseIterable, Sendable {
    case uptimeSeconds
    case memoryEntries, memoryBytes, memoryCapacityBytes, memoryEvictions
    case diskEntries, diskBytes, diskCapacityBytes, diskEvictions
    case checksumFailures
    case cacheDisabled
    case cacheEphemeral
    case mapUsedBytes, mapSizeBytes
    case pendingWriteBytes
    case collapsedFetchesInFlight
    case detachedFetchesInFlight
    case warmRunning, warmTotal, warmDone, warmStored, warmFresh, warmRevalidated, warmNotStored, warmFailed, warmBytes
}

public enum Metrics {
    private static func one(_ name: String, _ kind: Metric.Kind, _ help: String, _ source: Metric.Source) -> Metric {
        Metric(name: name, kind: kind, help: help, label: nil, series: [("", source)])
    }

    private static func labelled(_ name: String, _ kind: Metric.Kind, _ help: String, _ label: String,
                                 _ series: [(String, Metric.Source)]) -> Metric {
        Metric(name: name, kind: kind, help: help, label: label, series: series.map { (value: $0.0, source: $0.1) })
    }

    public static let table: [Metric] = [
        one("uptime_seconds", .gauge, "Seconds since Larder started.", .sampled(.uptimeSeconds)),
        one("client_connections", .counter, "Client connections accepted.", .count(.connectionsAccepted)),
        one("client_connections_open", .gauge, "Client connections open now.", .level(.clientConnectionsOpen)),
        labelled("requests", .counter, "Client requests by method.", "method", [
            ("GET", .count(.requestGET)), ("HEAD", .count(.requestHEAD)), ("POST", .count(.requestPOST)),
            ("PUT", .count(.requestPUT)), ("DELETE", .count(.requestDELETE)), ("PATCH", .count(.requestPATCH)),
            ("OPTIONS", .count(.requestOPTIONS)), ("CONNECT", .count(.requestCONNECT)),
            ("other", .count(.requestOther)),
        ]),
        labelled("responses", .counter, "Responses to clients by status class.", "class", [
            ("1xx", .count(.response1xx)), ("2xx", .count(.response2xx)), ("3xx", .count(.response3xx)),
            ("4xx", .count(.response4xx)), ("5xx", .count(.response5xx)),
        ]),
        labelled("cache_lookups", .counter, "Requests by what the cache did with them.", "result", [
            ("hit", .count(.lookupHit)), ("miss", .count(.lookupMiss)),
            ("revalidated_unchanged", .count(.lookupRevalidatedUnchanged)),
            ("revalidated_changed", .count(.lookupRevalidatedChanged)),
            ("stale_served", .count(.lookupStaleServed)),
            ("only_if_cached_miss", .count(.lookupOnlyIfCachedMiss)), ("pass", .count(.lookupPass)),
        ]),
        one("cache_revalidated_head_changed", .counter,
            "HEAD revalidations (for clients and background refreshes) that found the stored response changed: each "
            + "costs one GET more, unless a client asked HEAD.", .count(.revalidationHeadChanged)),
        labelled("client_bytes", .counter, "Response body bytes sent to clients, by where they came from.",
                 "source", [("cache", .count(.clientBytesFromCache)), ("origin", .count(.clientBytesFromOrigin))]),
        one("collapsed_requests", .counter, "Requests answered from another request's origin fetch.",
            .count(.collapsedRequests)),
        one("collapsed_followers_detached", .counter,
            "Collapsed requests detached because their client stopped reading while the shared fetch waited for it.",
            .count(.collapsedFollowersDetached)),
        one("collapsed_fetches_in_flight", .gauge, "Origin fetches that requests may join now.",
            .sampled(.collapsedFetchesInFlight)),
        one("detached_fetches_in_flight", .gauge,
            "Downloads running with no client attached: finished for the cache after their client left, range fills, "
            + "background refreshes.", .sampled(.detachedFetchesInFlight)),
        labelled("detached_fetches_cut", .counter,
                 "Downloads with no client attached that were cut rather than finished, by the limit they would have "
                 + "passed.", "limit", [
            ("detached_fetches_per_client", .count(.detachedCutPerClientFetches)),
            ("detached_bytes_per_client", .count(.detachedCutPerClientBytes)),
            ("detached_fetches", .count(.detachedCutFetches)),
            ("detached_bytes", .count(.detachedCutBytes)),
        ]),
        labelled("hand_overs_refused", .counter,
                 "First clients' downloads not handed over to their followers because the client's detached budget "
                 + "had no room (once per download); the client goes on pacing them.", "limit", [
            ("detached_fetches_per_client", .count(.handOversRefusedPerClientFetches)),
            ("detached_bytes_per_client", .count(.handOversRefusedPerClientBytes)),
            ("detached_fetches", .count(.handOversRefusedFetches)),
            ("detached_bytes", .count(.handOversRefusedBytes)),
        ]),
        labelled("origin_fetches_refused", .counter,
                 "Requests answered 429 instead of going to an origin, by the limit they would have passed.", "limit", [
            ("origin_fetches_per_client", .count(.originFetchesRefusedPerClient)),
        ]),
        labelled("cache_entries", .gauge, "Stored responses by tier.", "tier",
                 [("memory", .sampled(.memoryEntries)), ("disk", .sampled(.diskEntries))]),
        labelled("cache_bytes", .gauge, "Bytes stored by tier.", "tier",
                 [("memory", .sampled(.memoryBytes)), ("disk", .sampled(.diskBytes))]),
        labelled("cache_capacity_bytes", .gauge, "Configured capacity by tier.", "tier",
                 [("memory", .sampled(.memoryCapacityBytes)), ("disk", .sampled(.diskCapacityBytes))]),
        labelled("cache_evictions", .counter, "Entries evicted to stay under capacity, by tier.", "tier",
                 [("memory", .sampled(.memoryEvictions)), ("disk", .sampled(.diskEvictions))]),
        one("cache_checksum_failures", .counter,
            "Stored entries found damaged when read (a body chunk or record failed its checksum): each is dropped, "
            + "and its request answered from the origin, or cut if the head was already sent.",
            .sampled(.checksumFailures)),
        one("cache_disabled", .gauge,
            "1 while Larder serves without a cache (cache.on_unusable_dir: pass-through and an unusable cache_dir).",
            .sampled(.cacheDisabled)),
        one("cache_ephemeral", .gauge,
            "1 when the cache is memory only (cache.ephemeral): nothing is written to disk and a restart starts empty.",
            .sampled(.cacheEphemeral)),
        one("lmdb_map_used_bytes", .gauge, "Bytes of the LMDB map in use.", .sampled(.mapUsedBytes)),
        one("lmdb_map_size_bytes", .gauge, "Size of the LMDB map.", .sampled(.mapSizeBytes)),
        one("cache_pending_write_bytes", .gauge, "Bytes queued for the disk writer.", .sampled(.pendingWriteBytes)),
        labelled("origin_requests", .counter, "Requests sent to origins, by connection.", "connection",
                 [("new", .count(.originRequestsNewConnection)), ("reused", .count(.originRequestsReusedConnection))]),
        one("origin_connections_open", .gauge, "Connections to origins open now.", .level(.originConnectionsOpen)),
        one("origin_connections_idle", .gauge, "Idle pooled connections to origins.", .level(.originConnectionsIdle)),
        one("origin_connections_discarded_unsafe", .counter,
            "Origin connections closed instead of reused: bytes followed a complete response, or the response "
            + "came before the request body was sent.", .level(.originConnectionsDiscardedUnsafe)),
        labelled("origin_errors", .counter, "Failed origin exchanges by kind.", "kind", [
            ("dns", .count(.originErrorDNS)), ("refused", .count(.originErrorRefused)),
            ("connect", .count(.originErrorConnect)), ("timeout", .count(.originErrorTimeout)),
            ("tls", .count(.originErrorTLS)), ("invalid_response", .count(.originErrorInvalidResponse)),
            ("premature_close", .count(.originErrorPrematureClose)),
        ]),
        labelled("client_connections_refused", .counter,
                 "Client connections turned away at accept, by limit, or on a proxy_protocol listener for coming from "
                 + "outside proxy_protocol_from or without a valid PROXY header.", "reason", [
            ("max_connections", .count(.connectionsRefusedFull)),
            ("max_connections_per_client", .count(.connectionsRefusedPerClient)),
            ("proxy_untrusted", .count(.connectionsRefusedProxyUntrusted)),
            ("proxy_header", .count(.connectionsRefusedProxyHeader)),
        ]),
        labelled("requests_denied", .counter, "Requests refused by access rules, by reason.", "reason", [
            ("client", .count(.deniedClient)), ("destination", .count(.deniedDestination)),
            ("connect_port", .count(.deniedConnectPort)), ("auth_missing", .count(.authMissing)),
            ("auth_failed", .count(.authFailed)),
        ]),
        labelled("auth_checks_refused", .counter,
                 "Requests with unchecked proxy credentials answered 429 because too many password checks were "
                 + "pending, by limit.", "limit", [
            ("max_pending_checks", .count(.authChecksRefusedQueueFull)),
            ("max_pending_checks_per_client", .count(.authChecksRefusedPerClient)),
        ]),
        one("offline_refusals", .counter,
            "Requests not forwarded because Larder is offline (cache.offline): tunnels, upgrades, unsafe methods and "
            + "other requests the cache never answers (503), and reads the cache had to pass on (504). A plain cache "
            + "miss is counted as a cache lookup with result only_if_cached_miss.", .count(.offlineRefusals)),
        labelled("tls_handshakes", .counter,
                 "TLS handshakes completed: with clients (HTTPS listener, interception), with origins, and how many "
                 + "of those resumed a session.", "peer", [
            ("client", .count(.clientTLSHandshakes)), ("origin", .level(.originTLSHandshakes)),
            ("origin_resumed", .level(.originTLSResumptions)),
        ]),
        one("tls_client_handshake_failures", .counter, "Client TLS handshakes that failed (logged with the reason).",
            .count(.clientTLSHandshakeFailures)),
        labelled("http2", .counter,
                 "HTTP/2 from clients: connections, streams (each a request), connections ended for a protocol "
                 + "error or abuse (CONTINUATION, SETTINGS or PING floods, rapid reset), and streams answered by an "
                 + "exchange an earlier stream left waiting.", "what", [
            ("connections", .count(.h2Connections)), ("streams", .count(.h2Streams)),
            ("connection_errors", .count(.h2ConnectionErrors)), ("exchanges_reused", .count(.h2ExchangesReused)),
        ]),
        one("origin_http2_streams", .counter,
            "Requests sent to https origins as HTTP/2 streams (session.http2: auto, where the origin chose h2).",
            .level(.originH2Streams)),
        one("connects_intercepted", .counter, "CONNECT tunnels decrypted by interception (tls.intercept).",
            .count(.connectsIntercepted)),
        one("warm_running", .gauge, "1 while a warm job (POST /warm) runs.", .sampled(.warmRunning)),
        labelled("warm_urls", .gauge, "URLs of the running or last warm job, by what became of them (total: in its list).",
                 "state", [
            ("total", .sampled(.warmTotal)), ("done", .sampled(.warmDone)), ("stored", .sampled(.warmStored)),
            ("fresh", .sampled(.warmFresh)), ("revalidated", .sampled(.warmRevalidated)),
            ("not_stored", .sampled(.warmNotStored)), ("failed", .sampled(.warmFailed)),
        ]),
        one("warm_bytes", .gauge, "Response body bytes the running or last warm job has read.", .sampled(.warmBytes)),
        Metric(name: "loop_lag_seconds", kind: .gauge, help: "How late each worker's event loop ran its last tick.",
               label: "worker", series: [("", .perWorker(.loopLagMicroseconds, divisor: 1e6))]),
    ]
}

extension Metrics {
    /// The table as Markdown, for the README and `larder metrics`.
    public static func markdown() -> String {
        var out = "| Prometheus name | type | labels | meaning |\n|---|---|---|---|\n"
        for m in table {
            let labels: String
            if let label = m.label {
                let values = m.series.map(\.value).filter { !$0.isEmpty }
                labels = values.isEmpty ? "`\(label)`" : "`\(label)`: " + values.joined(separator: ", ")
            } else {
                labels = ""
            }
            out += "| `\(m.prometheusName)` | \(m.kind.rawValue) | \(labels) | \(m.help) |\n"
        }
        return out
    }
}
