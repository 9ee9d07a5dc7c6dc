/// The documented request cache policies (NSURLRequest.CachePolicy), as a proxy applies them.
public enum RequestCachePolicy: String, Sendable, Equatable, CaseIterable {
    case useProtocolCachePolicy = "use-protocol-cache-policy"
    case reloadIgnoringLocalCacheData = "reload-ignoring-local-cache-data"
    case reloadRevalidatingCacheData = "reload-revalidating-cache-data"
    case returnCacheDataElseLoad = "return-cache-data-else-load"
    case returnCacheDataDontLoad = "return-cache-data-dont-load"
}

/// The documented storage policies (NSURLCacheStoragePolicy).
public enum StoragePolicy: String, Sendable, Equatable, CaseIterable {
    case allowed = "allowed"
    case allowedInMemoryOnly = "memory-only"
    case notAllowed = "not-allowed"
}

/// How a stale or must-revalidate entry is checked with the origin.
public enum RevalidationMethod: String, Sendable, Equatable, CaseIterable {
    /// The documented way: HEAD carrying the stored validators; compare (RFC 9111 §4.3.5).
    case head = "head"
    /// RFC 9111 §4.3.1: a conditional GET; 304 freshens, 200 replaces (one round trip when changed).
    case conditionalGet = "conditional-get"
}

/// Per-rule adjustment of freshness, like Squid's refresh_pattern.
public struct FreshnessOverride: Sendable, Equatable {
    /// Use this lifetime whatever the response says (but never for no-store / private / no-cache).
    public var forcedLifetime: Int64?
    /// Never consider a response fresh for longer than this.
    public var maximumLifetime: Int64?
    /// Lifetime when the response has no explicit freshness and no Last-Modified.
    public var defaultLifetime: Int64?
    /// A preset's: applies only where `SharingGuard` finds the response shareable without it.
    public var guarded: Bool
    public init(forcedLifetime: Int64? = nil, maximumLifetime: Int64? = nil, defaultLifetime: Int64? = nil,
                guarded: Bool = false) {
        self.forcedLifetime = forcedLifetime; self.maximumLifetime = maximumLifetime; self.defaultLifetime = defaultLifetime
        self.guarded = guarded
    }
}

/// Server-wide policy settings.
public struct PolicySettings: Sendable, Equatable {
    /// Policy for requests that name none (URLRequest's default: useProtocolCachePolicy;
    /// returnCacheDataDontLoad is "offline mode").
    public var defaultRequestPolicy: RequestCachePolicy = .useProtocolCachePolicy
    /// `cache.offline`: every request is returnCacheDataDontLoad, whatever its header or a rule names.
    public var offline = false
    public var revalidation: RevalidationMethod = .head
    /// Heuristic freshness: this fraction of (Date − Last-Modified), RFC 9111 §4.2.2 ...
    public var heuristicFraction: Double = 0.1
    /// ... capped at this many seconds.
    public var heuristicCap: Int64 = 86_400
    public init() {}
}
