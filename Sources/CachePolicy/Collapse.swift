/// Why a cache miss fetches on its own instead of sharing a fetch already under way for the URL.
public enum CollapseRefusal: String, Sendable, Equatable {
    case disabled = "disabled"          // the collapse_requests setting is off
    case reload = "reload"              // the request asked for the origin (reload policy, fwd=request)
    case bypass = "bypass"              // the request does not use the cache at all
    case method = "method"              // only GET misses share a fetch
    case range = "range"                // a range wants part of the response, the fetch gets it whole
    case conditionals = "conditionals"  // If-None-Match / If-Modified-Since may be answered 304
    case body = "body"                  // the request carries a body the origin must receive
    case upgrade = "upgrade"            // Connection: upgrade, the connection may become a tunnel
}

public enum CollapseEligibility: Sendable, Equatable {
    /// Join the fetch in flight for this URL, or lead one that later misses may join.
    case collapse
    case fetchAlone(CollapseRefusal)
}

public enum Collapse {
    /// Whether a miss may share one origin fetch with identical misses (request collapsing): only a
    /// plain GET whose answer is the whole stored response every follower can be given as it is.
    ///
    /// `enabled` is the `collapse_requests` setting; `reason` the lookup's `.fetch` reason;
    /// `hasBody` whether the request has any body framing (Content-Length, even 0, or chunked);
    /// `upgradeRequested` whether it asks to switch protocols. Checks run in the order of
    /// `CollapseRefusal`, the first failing one naming the reason.
    public static func eligibility(enabled: Bool, reason: FetchReason, request: RequestFacts, hasBody: Bool,
                                   upgradeRequested: Bool) -> CollapseEligibility {
        guard enabled else { return .fetchAlone(.disabled) }
        switch reason {
        case .request: return .fetchAlone(.reload)
        case .bypass: return .fetchAlone(.bypass)
        case .uriMiss, .varyMiss, .miss: break
        }
        guard request.method == .get else { return .fetchAlone(.method) }
        if request.hasRange { return .fetchAlone(.range) }
        if request.hasConditionals { return .fetchAlone(.conditionals) }
        if hasBody { return .fetchAlone(.body) }
        if upgradeRequested { return .fetchAlone(.upgrade) }
        return .collapse
    }
}
