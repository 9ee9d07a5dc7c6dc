import HTTPWire

/// Why a response was not stored (Cache-Status `detail`, logs, statistics).
public enum NotStoredReason: String, Sendable, Equatable, CaseIterable {
    case method = "method"                       // only GET responses are stored
    case status = "status"                       // not cacheable by default and no explicit freshness
    case partialContent = "partial-content"      // not one well-formed piece, or a 200 with Content-Range answering a Range
    case requestNoStore = "request-no-store"
    case responseNoStore = "no-store"
    case privateResponse = "private"
    case authorization = "authorization"         // request had Authorization without public/s-maxage/must-revalidate
    case noFreshnessOrValidator = "no-freshness" // nothing would ever let it be reused
    case varyStar = "vary-star"
    case mustUnderstand = "must-understand"      // must-understand with a status we do not understand
    case storagePolicy = "storage-policy"        // a rule said notAllowed

    /// The raw value as a `Cache-Status` detail.
    public var detail: CacheStatus.Detail {
        switch self {
        case .method: return "method"
        case .status: return "status"
        case .partialContent: return "partial-content"
        case .requestNoStore: return "request-no-store"
        case .responseNoStore: return "no-store"
        case .privateResponse: return "private"
        case .authorization: return "authorization"
        case .noFreshnessOrValidator: return "no-freshness"
        case .varyStar: return "vary-star"
        case .mustUnderstand: return "must-understand"
        case .storagePolicy: return "storage-policy"
        }
    }
}

public enum StoreDecision: Sendable, Equatable {
    /// Store in `tier` (allowed: memory and disk; allowedInMemoryOnly: memory only), without the
    /// fields listed (qualified `private=` and `no-cache=` field names, lowercased).
    case store(tier: StoragePolicy, omitFields: [[UInt8]])
    case doNotStore(NotStoredReason)
}

public enum Storability {
    /// RFC 9111 §3 for a shared cache, plus the storage policy chosen by configuration.
    /// `request` is the request as the client sent it (its method, Authorization, no-store);
    /// `response` is the origin's final response head.
    ///
    /// Checks run in this order, the first failing one naming the reason: method, final status (1xx
    /// and 304 are not stored), partial content, must-understand, request no-store, response no-store,
    /// unqualified private, Authorization, status without explicit freshness, nothing that would ever
    /// allow reuse, `Vary: *`, storage policy.
    /// `reusablePost`: `request` is a POST whose answer names its target (`PostReuse.reusable`),
    /// judged from here on as a GET's would be.
    public static func decide(request: RequestHead, response: ResponseHead, storagePolicy: StoragePolicy,
                              settings: PolicySettings, reusablePost: Bool = false) -> StoreDecision {
        // HEAD responses refresh stored GET entries (Revalidation) but are never entries themselves.
        guard request.method == .get || (reusablePost && request.method == .post) else { return .doNotStore(.method) }
        let status = response.status
        guard status >= 200, status != 304 else { return .doNotStore(.status) }
        let headers = response.headers
        // A 206 is stored as a piece of its representation when it is one well-formed piece answering
        // the one range asked for (`PartialContent`). A 200 carrying Content-Range is a 200 like any
        // other (RFC 9110 §14.4 gives the field no meaning there), unless it answers a Range: then it
        // may be the piece a broken origin labelled 200, and storing it would serve a fragment as the whole.
        if status == 206 ? !PartialContent.isStorablePiece(request: request, response: response)
            : headers.has("content-range") && request.headers.has("range") {
            return .doNotStore(.partialContent)
        }

        let directives = CacheDirectives.parse(headers, isRequest: false)
        // §5.2.2.3: must-understand stores only status codes we understand, and then overrides no-store.
        if directives.mustUnderstand, !isUnderstood(status) { return .doNotStore(.mustUnderstand) }
        if CacheDirectives.parse(request.headers, isRequest: true).noStore { return .doNotStore(.requestNoStore) }
        if directives.noStore, !directives.mustUnderstand { return .doNotStore(.responseNoStore) }
        if directives.private { return .doNotStore(.privateResponse) }
        // §3.5: a shared cache stores answers to authenticated requests only when explicitly allowed.
        if request.headers.has("authorization"),
           !(directives.public || directives.sMaxAge != nil || directives.mustRevalidate) {
            return .doNotStore(.authorization)
        }

        let expires = EntryFacts.expiresValue(headers, responseTime: nil)
        let hasExplicitFreshness = hasExplicitFreshness(directives, expires: expires)
        let heuristicEligible = isHeuristicallyCacheable(status) || directives.public
        if !heuristicEligible, !hasExplicitFreshness { return .doNotStore(.status) }
        if !heuristicEligible, !hasPositiveExplicitLifetime(directives, expires, headers),
           !headers.has("etag"), !headers.has("last-modified") {
            return .doNotStore(.noFreshnessOrValidator)
        }

        if EntryFacts.varyFields(headers).star { return .doNotStore(.varyStar) }
        if storagePolicy == .notAllowed { return .doNotStore(.storagePolicy) }

        return .store(tier: storagePolicy, omitFields: qualifiedFields(directives))
    }

    /// `max-age`, `s-maxage` or an `Expires` field (valid or not: RFC 9111 §5.3 makes an invalid one
    /// mean already expired), as `EntryFacts.expiresValue` reads it.
    static func hasExplicitFreshness(_ directives: CacheDirectives, expires: Int64??) -> Bool {
        directives.maxAge != nil || directives.sMaxAge != nil || expires != nil
    }

    /// The fields `private="…"` and `no-cache="…"` name (lowercased): never stored, never shared.
    public static func qualifiedFields(_ directives: CacheDirectives) -> [[UInt8]] {
        var omitFields = directives.privateFields
        for name in directives.noCacheFields where !omitFields.contains(name) { omitFields.append(name) }
        return omitFields
    }

    /// The qualified fields of a response head's Cache-Control.
    public static func qualifiedFields(of headers: HeaderBlock) -> [[UInt8]] {
        // Asked of both heads on every revalidation; most name neither directive, and a scan for
        // the two words costs far less than parsing the directives.
        let mayQualify = headers.storage.withUnsafeBytes { all in
            headers.fields.contains { f in
                let s = f.value.start, e = s + f.value.count
                return equalsIgnoringCase(all, f.name.start, f.name.start + f.name.count, "cache-control")
                    && (containsLowered(all, s, e, "private") || containsLowered(all, s, e, "no-cache"))
            }
        }
        return mayQualify ? qualifiedFields(CacheDirectives.parse(headers, isRequest: false)) : []
    }

    /// Status codes heuristically cacheable (RFC 9110 §15.1): 200 203 204 206 300 301 308 404 405 410 414 501.
    public static func isHeuristicallyCacheable(_ status: Int) -> Bool {
        switch status {
        case 200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501: return true
        default: return false
        }
    }

    /// Statuses whose caching semantics we implement, for `must-understand` (RFC 9111 §5.2.2.3).
    static func isUnderstood(_ status: Int) -> Bool {
        isHeuristicallyCacheable(status) || status == 302 || status == 303 || status == 307
    }

    /// Whether the explicit freshness (s-maxage, max-age, Expires − Date) would give any time fresh.
    private static func hasPositiveExplicitLifetime(_ directives: CacheDirectives, _ expires: Int64??,
                                                    _ headers: HeaderBlock) -> Bool {
        if directives.conflictingFreshness { return false }
        if let sMaxAge = directives.sMaxAge { return sMaxAge > 0 }
        if let maxAge = directives.maxAge { return maxAge > 0 }
        guard case .some(.some(let expiresAt)) = expires else { return false }
        guard let date = headers.withFirstValue("date", { HTTPDate.parse($0) }) ?? nil else { return true }
        return expiresAt > date
    }
}
