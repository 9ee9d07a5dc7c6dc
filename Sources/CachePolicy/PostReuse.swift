import HTTPWire

/// A response to a POST stored for its target (RFC 9110 §9.3.3, RFC 9111 §4): reusable for a later
/// GET or HEAD of that URI when the origin says it is the target's representation — explicit
/// freshness, and a `Content-Location` that names the POST's own target. Any other POST answer
/// only invalidates (RFC 9111 §4.4).
public enum PostReuse {
    /// Whether `response`, a POST's answer, may be stored for `targetKey` (the POST's primary key).
    /// A `Content-Location` naming another URI, even on the same origin, never stores anything: the
    /// answer would then be stored for a URI the client did not send its body to.
    public static func reusable(response: ResponseHead, targetKey: [UInt8]) -> Bool {
        guard response.status == 200 || response.status == 203 else { return false }
        let headers = response.headers
        guard Storability.hasExplicitFreshness(CacheDirectives.parse(headers, isRequest: false),
                                               expires: EntryFacts.expiresValue(headers, responseTime: nil)),
              let base = Invalidation.BaseURI(key: targetKey) else { return false }
        // An empty reference is the target itself (RFC 3986 §5.2.2).
        return headers.withOnlyValue("content-location") { $0.isEmpty || Invalidation.resolve($0, against: base) == targetKey }
            ?? false
    }
}
