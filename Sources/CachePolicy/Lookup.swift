// The cache policy, as a shared proxy cache applies it.
//
// Model of time. Every decision takes `now` (seconds since the epoch) from the caller; nothing here
// reads a clock. A stored response carries the three times of RFC 9111 §4.2.3 (request_time,
// response_time, the Date it claims) reduced to `correctedInitialAge` when it is stored; its age at
// any later moment is that plus the time it has been resident. Freshness is a lifetime fixed when
// the response is stored or freshened (explicit, heuristic, or set by a configuration rule), so a
// lookup is two subtractions and a comparison.
//
// Source of rules. Apple's URL Loading System documentation ("Understanding Cache Access") names
// five request policies; a client of the proxy picks one with `Larder-Cache-Policy`, a configuration
// rule, or the server default, and the RFC 9111 request directives select the same behaviours
// (`no-cache` and `max-age=0` revalidate, `max-stale` alone is "return cache data else load",
// `only-if-cached` is "don't load"). Under the default policy a stale entry, or one marked
// `no-cache`, is revalidated with HEAD as that documentation says (conditional GET is a setting),
// except where HEAD cannot do the job in one round trip (`Revalidation.method`).
// Where it is silent, RFC 9111 decides, as for a shared cache.
//
// Where we depart from a literal reading of that documentation: "whatever its age" policies still never
// hand out an entry its origin forbade to be used without validation (`no-cache`), or a stale one
// marked `must-revalidate` / `proxy-revalidate` / `s-maxage` (RFC 9111 §4.2.4): "else load"
// revalidates it, "don't load" answers 504 as §5.2.2.2 requires of a disconnected cache.

import HTTPWire

/// What a request asks of the cache, distilled once from its head.
public struct RequestFacts: Sendable, Equatable {
    public var method: HTTPMethod
    public var directives: CacheDirectives
    /// The policy in force: the `Larder-Cache-Policy` header, else a matching rule's, else the server default.
    public var policy: RequestCachePolicy
    public var hasAuthorization: Bool
    /// Client conditionals and Range are answered from the cache when possible (see ClientConditionals).
    public var hasConditionals: Bool
    public var hasRange: Bool
    /// `If-Match` / `If-Unmodified-Since`: preconditions for the origin to judge (RFC 9110 §13.1.1,
    /// §13.1.4), so the request goes there and its answer is not stored.
    public var hasPreconditions: Bool

    public init(method: HTTPMethod, directives: CacheDirectives, policy: RequestCachePolicy, hasAuthorization: Bool,
                hasConditionals: Bool, hasRange: Bool, hasPreconditions: Bool = false) {
        self.method = method; self.directives = directives; self.policy = policy
        self.hasAuthorization = hasAuthorization; self.hasConditionals = hasConditionals; self.hasRange = hasRange
        self.hasPreconditions = hasPreconditions
    }

    /// Reads the directives and our policy header. `rulePolicy` comes from configuration rules
    /// matching the URL; `settings.defaultRequestPolicy` applies when neither names one.
    /// An unknown `Larder-Cache-Policy` value throws (the proxy answers 400).
    /// `ignoreReload`: a rule says clients' reloads do not count for this URL (`CacheRule.ignoreReload`).
    public static func make(_ head: RequestHead, rulePolicy: RequestCachePolicy?, ignoreReload: Bool = false,
                            settings: PolicySettings) throws(PolicyHeaderError) -> RequestFacts {
        let headers = head.headers
        var hasAuthorization = false
        var hasConditionals = false
        var hasRange = false
        var hasPreconditions = false
        var policyField: Int?
        headers.storage.withUnsafeBytes { all in
            for (index, field) in headers.fields.enumerated() {
                let s = field.name.start
                let e = s + field.name.count
                switch field.name.count {
                case 5:
                    if equalsIgnoringCase(all, s, e, "range") { hasRange = true }
                case 8:
                    if equalsIgnoringCase(all, s, e, "if-match") { hasPreconditions = true }
                case 13:
                    if equalsIgnoringCase(all, s, e, "authorization") {
                        hasAuthorization = true
                    } else if equalsIgnoringCase(all, s, e, "if-none-match") {
                        hasConditionals = true
                    }
                case 17:
                    if equalsIgnoringCase(all, s, e, "if-modified-since") { hasConditionals = true }
                case 19:
                    if policyField == nil, equalsIgnoringCase(all, s, e, policyHeaderName) {
                        policyField = index
                    } else if equalsIgnoringCase(all, s, e, "if-unmodified-since") {
                        hasPreconditions = true
                    }
                default:
                    break
                }
            }
        }
        var policy = rulePolicy ?? settings.defaultRequestPolicy
        if let policyField {
            let value = headers.fields[policyField].value
            guard let named = headers.withBytes(value, { RequestCachePolicy(wireName: $0) }) else {
                throw PolicyHeaderError(value: headers.valueString(at: policyField))
            }
            policy = named
        }
        // Offline overrides any policy asked for: none of them may reach the network.
        if settings.offline { policy = .returnCacheDataDontLoad }
        var directives = CacheDirectives.parse(headers, isRequest: true)
        if ignoreReload {
            // no-store and only-if-cached still hold; what asks for a fresher answer than the
            // rules give does not (Pragma: no-cache is read as no-cache when parsed).
            directives.noCache = false
            directives.maxAge = nil
            directives.minFresh = nil
        }
        return RequestFacts(method: head.method, directives: directives,
                            policy: policy, hasAuthorization: hasAuthorization, hasConditionals: hasConditionals,
                            hasRange: hasRange, hasPreconditions: hasPreconditions)
    }
}

extension RequestCachePolicy {
    /// The policy whose raw value `bytes` spells (ASCII case-insensitive), without making a String.
    init?(wireName p: UnsafeRawBufferPointer) {
        let n = p.count
        if equalsIgnoringCase(p, 0, n, "use-protocol-cache-policy") {
            self = .useProtocolCachePolicy
        } else if equalsIgnoringCase(p, 0, n, "reload-ignoring-local-cache-data") {
            self = .reloadIgnoringLocalCacheData
        } else if equalsIgnoringCase(p, 0, n, "reload-revalidating-cache-data") {
            self = .reloadRevalidatingCacheData
        } else if equalsIgnoringCase(p, 0, n, "return-cache-data-else-load") {
            self = .returnCacheDataElseLoad
        } else if equalsIgnoringCase(p, 0, n, "return-cache-data-dont-load") {
            self = .returnCacheDataDontLoad
        } else {
            return nil
        }
    }
}

public struct PolicyHeaderError: Error, Sendable, Equatable {
    public var value: String
    public init(value: String) { self.value = value }
}

/// Our request header naming a documented policy; stripped before forwarding.
public let policyHeaderName: StaticString = "larder-cache-policy"

/// Why the network is used (Cache-Status `fwd`).
public enum FetchReason: String, Sendable, Equatable {
    case uriMiss = "uri-miss"     // nothing stored for the URL
    case varyMiss = "vary-miss"   // stored, but no variant matches
    case miss = "miss"            // stored but unusable (e.g. request min-fresh, Vary: *)
    case request = "request"      // the request asked for the origin (reload policy)
    case bypass = "bypass"        // method or request never uses the cache
}

public enum LookupDecision: Sendable, Equatable {
    /// Serve the stored response without contacting the origin. `stale` when served past its lifetime
    /// (allowed by max-stale or returnCacheData… policies).
    case serve(age: Int64, stale: Bool)
    /// Serve now and refresh in the background (RFC 5861 stale-while-revalidate).
    case serveStaleThenRevalidate(age: Int64)
    /// Ask the origin whether the stored response is still good, with this method
    /// (`Revalidation.method`: the configured one, HEAD for a client's HEAD, GET without validators).
    case revalidate(RevalidationMethod)
    /// Go to the origin without using the stored response.
    case fetch(FetchReason)
    /// Nothing usable and the network is not allowed (only-if-cached, returnCacheDataDontLoad): 504.
    case gatewayTimeout
}

public enum Lookup {
    /// The documented useProtocolCachePolicy and the other four policies, with RFC 9111 §4 and §5.2.1
    /// request directives. `entry` is the stored variant matching the request, nil when none;
    /// `anyStored` tells a Vary miss from a URI miss.
    public static func decide(request: RequestFacts, entry: EntryFacts?, anyStored: Bool, now: Int64,
                              settings: PolicySettings) -> LookupDecision {
        // Only GET and HEAD read the cache; HEAD is answered from the stored GET.
        guard request.method == .get || request.method == .head, !request.hasPreconditions else {
            return settings.offline ? .gatewayTimeout : .fetch(.bypass)
        }
        let directives = request.directives
        // returnCacheDataDontLoad, or RFC 9111 §5.2.1.7 only-if-cached: never the network.
        let offline = settings.offline || request.policy == .returnCacheDataDontLoad || directives.onlyIfCached
        if !offline, request.policy == .reloadIgnoringLocalCacheData { return .fetch(.request) }

        guard let entry, !entry.varyStar else {
            if offline { return .gatewayTimeout }
            // RFC 9111 §4.1: a `Vary: *` response never matches a later request.
            if entry != nil { return .fetch(.miss) }
            return .fetch(anyStored ? .varyMiss : .uriMiss)
        }
        let age = entry.currentAge(now: now)
        let fresh = entry.freshnessLifetime > age
        // §4.2.4, §5.2.2.2, §5.2.2.4: these entries are never used without the origin's say-so.
        let needsOrigin = entry.noCache || (!fresh && entry.mustRevalidate)

        if offline {
            return needsOrigin ? .gatewayTimeout : .serve(age: age, stale: !fresh)
        }
        let revalidate = LookupDecision.revalidate(Revalidation.method(for: request.method, entry: entry,
                                                                       configured: settings.revalidation))
        // reloadRevalidatingCacheData; request no-cache (or Pragma) and max-age=0 ask the same.
        if request.policy == .reloadRevalidatingCacheData || directives.noCache || directives.maxAge == 0 {
            return revalidate
        }
        // returnCacheDataElseLoad, or max-stale without a value: any age will do.
        if request.policy == .returnCacheDataElseLoad || directives.maxStale == .some(nil) {
            return needsOrigin ? revalidate : .serve(age: age, stale: !fresh)
        }

        // useProtocolCachePolicy: "must be revalidated every time", then freshness.
        if entry.noCache { return revalidate }
        // §5.2.1.1: the client will not take a response older than max-age.
        if let maxAge = directives.maxAge, age > maxAge { return revalidate }
        if fresh {
            // §5.2.1.3: not fresh for long enough for this client.
            if let minFresh = directives.minFresh, entry.freshnessLifetime - age < minFresh { return .fetch(.miss) }
            return .serve(age: age, stale: false)
        }
        if entry.mustRevalidate { return revalidate }
        let staleness = age - entry.freshnessLifetime
        // §5.2.1.2: the client accepts this much staleness.
        if case .some(.some(let allowed)) = directives.maxStale, staleness <= allowed {
            return .serve(age: age, stale: true)
        }
        // RFC 5861 §3: serve now, refresh in the background, within the window.
        if entry.staleWhileRevalidate > 0, staleness <= entry.staleWhileRevalidate {
            return .serveStaleThenRevalidate(age: age)
        }
        return revalidate
    }

    /// After a failed revalidation or fetch (5xx, or `connectionFailed`), whether the stale entry
    /// may be served instead (RFC 5861 stale-if-error, request max-stale), never past must-revalidate.
    ///
    /// Only 500, 502, 503, 504 and a connection failure (nil) count as errors. The response's or the
    /// request's `stale-if-error` window, or the request's `max-stale` (and the "else load" policy),
    /// allow it; `must-revalidate` and `no-cache` entries never (RFC 9111 §4.2.4).
    public static func mayServeStaleOnError(request: RequestFacts, entry: EntryFacts, status: Int?, now: Int64) -> Bool {
        if let status {
            guard status == 500 || status == 502 || status == 503 || status == 504 else { return false }
        }
        guard !entry.mustRevalidate, !entry.noCache, !entry.varyStar else { return false }
        let staleness = entry.currentAge(now: now) - entry.freshnessLifetime
        if entry.staleIfError > 0, staleness <= entry.staleIfError { return true }
        // RFC 5861 §4: the request may carry stale-if-error too.
        if let window = request.directives.staleIfError, window > 0, staleness <= window { return true }
        switch request.directives.maxStale {
        case .some(.none): return true
        case .some(.some(let allowed)): return staleness <= allowed
        case .none: return request.policy == .returnCacheDataElseLoad
        }
    }
}
