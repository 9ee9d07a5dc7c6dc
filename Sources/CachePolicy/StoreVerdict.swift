import HTTPWire

/// What to store of a response the cache decided to keep: everything `Cache.beginStore` needs.
public struct StorePlan: Sendable, Equatable {
    /// `.allowed` (memory and disk) or `.allowedInMemoryOnly`; never `.notAllowed`.
    public var tier: StoragePolicy
    /// Field names (lowercased) left out of the stored head: qualified `private=` and `no-cache=`.
    public var omitFields: [[UInt8]]
    /// The entry's facts, computed with the storage rule's freshness override.
    public var facts: EntryFacts
    /// The body length the response's framing announces (Content-Length), nil when it runs to
    /// the end of a chunked or close-delimited body.
    public var expectedLength: Int?

    public init(tier: StoragePolicy, omitFields: [[UInt8]], facts: EntryFacts, expectedLength: Int?) {
        self.tier = tier; self.omitFields = omitFields; self.facts = facts; self.expectedLength = expectedLength
    }
}

/// Whether a response from the origin becomes a cache entry, every check in one place.
public enum StoreVerdict: Sendable, Equatable {
    case store(StorePlan)
    case doNotStore(NotStoredReason)
}

extension Storability {
    /// The whole store decision for `response`, the origin's answer to `request`: only GET
    /// responses, then `decide` (RFC 9111 §3 and the storage policy), then the entry's facts, and
    /// last a response that would be stale at once with no validator to revalidate it by is
    /// refused (`.noFreshnessOrValidator`): storing it would only cost disk.
    ///
    /// `storagePolicy` and `override` are what the configuration rules matching the URL and the
    /// response say (`CacheRules.storage`); `requestTime` is when the request went to the origin
    /// and `responseTime` when this head arrived (the facts' RFC 9111 §4.2.3 times).
    public static func verdict(request: RequestHead, response: ResponseHead, storagePolicy: StoragePolicy,
                               override: FreshnessOverride?, requestTime: Int64, responseTime: Int64,
                               settings: PolicySettings, reusablePost: Bool = false) -> StoreVerdict {
        guard request.method == .get || (reusablePost && request.method == .post) else { return .doNotStore(.method) }
        switch decide(request: request, response: response, storagePolicy: storagePolicy, settings: settings,
                      reusablePost: reusablePost) {
        case .doNotStore(let reason):
            return .doNotStore(reason)
        case .store(let tier, let omitFields):
            var expected: Int?
            if case .contentLength(let n) = response.framing { expected = n }
            let override = SharingGuard.applicable(override, requestHeaders: request.headers, response: response)
            let facts = EntryFacts.make(response: response, requestTime: requestTime, responseTime: responseTime,
                                        bodyLength: expected, settings: settings, override: override)
            // Heuristically cacheable statuses pass `decide` without any freshness, and a rule's
            // maximum lifetime can bring an explicit one down to nothing.
            if facts.freshnessLifetime == 0, facts.etag == nil, facts.lastModified == nil {
                return .doNotStore(.noFreshnessOrValidator)
            }
            return .store(StorePlan(tier: tier, omitFields: omitFields, facts: facts, expectedLength: expected))
        }
    }
}
