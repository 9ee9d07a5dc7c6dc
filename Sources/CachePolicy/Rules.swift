import HTTPWire
/// A configuration rule: a match on the URL (and, for storage, the response), and what it sets.
public struct CacheRule: Sendable, Equatable {
    /// nil matches both.
    public var scheme: String?
    /// `example.com` exactly, `*.example.com` for any subdomain (not the domain itself), `*` for any.
    public var host: HostPattern?
    /// Path prefix, e.g. `/static/`; nil matches all.
    public var pathPrefix: String?
    /// Whole-path pattern (`**/pool/**.deb`, see `PathGlob`); nil matches all.
    public var path: PathGlob?
    /// Response statuses this rule's storage policy applies to; empty matches all.
    public var statuses: [Int]
    /// Response Content-Type prefix (`image/`); nil matches all.
    public var contentTypePrefix: String?

    public var requestPolicy: RequestCachePolicy?
    public var storagePolicy: StoragePolicy?
    public var freshness: FreshnessOverride?
    /// A client's reload (`Cache-Control: no-cache` or `max-age`, `Pragma: no-cache`) does not
    /// bypass or revalidate an entry the freshness rules call fresh (Squid's `ignore-reload`):
    /// for package indexes whose clients ask for a reload every time.
    public var ignoreReload: Bool?

    public init(scheme: String? = nil, host: HostPattern? = nil, pathPrefix: String? = nil, path: PathGlob? = nil,
                statuses: [Int] = [], contentTypePrefix: String? = nil, requestPolicy: RequestCachePolicy? = nil,
                storagePolicy: StoragePolicy? = nil, freshness: FreshnessOverride? = nil, ignoreReload: Bool? = nil) {
        self.scheme = scheme; self.host = host; self.pathPrefix = pathPrefix; self.path = path; self.statuses = statuses
        self.contentTypePrefix = contentTypePrefix; self.requestPolicy = requestPolicy
        self.storagePolicy = storagePolicy; self.freshness = freshness; self.ignoreReload = ignoreReload
    }
}

/// The configured rules, in order: for each aspect the first matching rule that sets it wins.
public struct CacheRules: Sendable, Equatable {
    public var rules: [CacheRule]
    public init(_ rules: [CacheRule] = []) { self.rules = rules }

    /// Request-side match (scheme, host lowercase, path) → policy, if any rule sets one.
    /// Response criteria (statuses, content type) play no part here.
    public func requestPolicy(scheme: String, host: [UInt8], path: UnsafeRawBufferPointer) -> RequestCachePolicy? {
        for rule in rules where rule.requestPolicy != nil && rule.matchesURL(scheme: scheme, host: host, path: path) {
            return rule.requestPolicy
        }
        return nil
    }

    /// Request-side match → whether clients' reloads are ignored (the first rule that says so wins).
    public func ignoresReload(scheme: String, host: [UInt8], path: UnsafeRawBufferPointer) -> Bool {
        for rule in rules where rule.ignoreReload != nil && rule.matchesURL(scheme: scheme, host: host, path: path) {
            return rule.ignoreReload!
        }
        return false
    }

    /// Response-side match → storage policy (`.allowed` when no rule sets one) and freshness override.
    public func storage(scheme: String, host: [UInt8], path: UnsafeRawBufferPointer, status: Int,
                        contentType: UnsafeRawBufferPointer?) -> (policy: StoragePolicy, freshness: FreshnessOverride?) {
        var policy: StoragePolicy?
        var freshness: FreshnessOverride?
        for rule in rules where (policy == nil && rule.storagePolicy != nil) || (freshness == nil && rule.freshness != nil) {
            guard rule.matchesURL(scheme: scheme, host: host, path: path),
                  rule.matchesResponse(status: status, contentType: contentType) else { continue }
            if policy == nil { policy = rule.storagePolicy }
            if freshness == nil { freshness = rule.freshness }
            if policy != nil, freshness != nil { break }
        }
        return (policy ?? .allowed, freshness)
    }
}

extension CacheRule {
    /// Scheme (case-insensitive), host pattern, path prefix (byte-exact), path pattern (byte-exact, query left out).
    func matchesURL(scheme: String, host: [UInt8], path: UnsafeRawBufferPointer) -> Bool {
        if let ruleScheme = self.scheme, !Self.equalIgnoringCase(ruleScheme.utf8, scheme.utf8) { return false }
        if let pattern = self.host, !pattern.matches(host) { return false }
        if let prefix = pathPrefix {
            var i = 0
            for b in prefix.utf8 {
                guard i < path.count, path[i] == b else { return false }
                i += 1
            }
        }
        if let pattern = self.path, !pattern.matches(path) { return false }
        return true
    }

    /// Status list (empty: any) and Content-Type prefix (case-insensitive; absent type never matches one).
    func matchesResponse(status: Int, contentType: UnsafeRawBufferPointer?) -> Bool {
        if !statuses.isEmpty, !statuses.contains(status) { return false }
        if let prefix = contentTypePrefix {
            guard let contentType else { return false }
            var i = 0
            for b in prefix.utf8 {
                guard i < contentType.count, asciiLower(contentType[i]) == asciiLower(b) else { return false }
                i += 1
            }
        }
        return true
    }

    static func equalIgnoringCase<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).allSatisfy { asciiLower($0) == asciiLower($1) }
    }
}
