import HTTPWire

/// Why a stale entry is served in place of the origin's answer (RFC 5861 §4 stale-if-error).
public enum StaleServeReason: String, Sendable, Equatable {
    /// The origin answered 500, 502, 503 or 504.
    case originError = "origin-error"
    /// No answer: the connection failed or broke off before a response head.
    case originUnreachable = "origin-unreachable"
}

/// What to do with the origin's answer to a revalidation of a stored entry (HEAD or conditional
/// GET), or with its absence. The same cases serve a client's request and a background refresh
/// (RFC 5861 stale-while-revalidate); `Revalidation.verdict` never returns the ones marked for the
/// other.
public enum RevalidationVerdict: Sendable, Equatable {
    /// Client only: serve the stored entry as it is, stale (Cache-Status `stale-if-error`); the
    /// entry is left as it was.
    case serveStale(StaleServeReason)
    /// Freshen the stored head from the response (`Revalidation.freshenedHead`) and serve the entry.
    case unchanged
    /// Client only: the answer confirms the entry, but is one user's (`mayUpdateSharedEntry`: it says
    /// `private` or `no-store`, or answers credentials or a `no-store` request): serve the entry as
    /// it is stored, and leave it as it was. A background refresh keeps the entry instead.
    case unchangedNotShared
    /// Invalidate the URL's entries; the response has no body to store (a HEAD answer), so fetch
    /// the whole response with a plain GET, without the client's conditionals or range, and store it.
    case changedRefetch
    /// Client HEAD only: invalidate the URL's entries (RFC 9111 §4.3.5); the answer to the HEAD is
    /// the client's, forwarded as it is (no GET: the client wants no body).
    case changedForwardThis
    /// Invalidate the URL's entries; the response is the whole new response to the conditional GET:
    /// forward it (client) and offer it to the store (`Storability.verdict`).
    case changedStoreThis
    /// Background only: the origin failed (5xx or no answer); leave the entry as it was and stop.
    case keepEntryAndGiveUp
    /// Client only: no answer and the stale entry may not stand in: the failure goes to the client
    /// as any forwarding failure does; the entry is left as it was.
    case forwardError
}

extension Revalidation {
    /// Decides what a revalidation's answer means for the stored `entry`.
    ///
    /// `response` is the final response head, nil when none came (a connection or transport
    /// failure). `method` is the revalidation method actually used (HEAD also for a client's HEAD
    /// request). `request` is what the client asked (`Lookup.mayServeStaleOnError` reads its
    /// max-stale, stale-if-error and policy); without it a failure is never hidden. `background`:
    /// the refresh runs with no client attached (stale-while-revalidate), whose client was already
    /// served the stale entry.
    ///
    /// Client: a 500/502/503/504 or no answer is hidden by the stale entry where
    /// `Lookup.mayServeStaleOnError` allows; no answer otherwise is `.forwardError`; any other
    /// response, a 5xx included, is judged by `outcome`: unchanged, or changed (refetch after a
    /// HEAD, but the answer itself when the client asked HEAD; the response itself after a
    /// conditional GET).
    ///
    /// Background: any 5xx or no answer is `.keepEntryAndGiveUp`; everything else is judged by
    /// `outcome` as for a client.
    public static func verdict(entry: EntryFacts, request: RequestFacts?, response: ResponseHead?,
                               method: RevalidationMethod, now: Int64, background: Bool,
                               storedHead: ResponseHead? = nil, requestHasCookie: Bool = false) -> RevalidationVerdict {
        guard let response else {
            if background { return .keepEntryAndGiveUp }
            guard let request, Lookup.mayServeStaleOnError(request: request, entry: entry, status: nil, now: now) else {
                return .forwardError
            }
            return .serveStale(.originUnreachable)
        }
        if response.status >= 500 {
            if background { return .keepEntryAndGiveUp }
            if let request, Lookup.mayServeStaleOnError(request: request, entry: entry, status: response.status, now: now) {
                return .serveStale(.originError)
            }
        }
        switch outcome(entry: entry, response: response, method: method, storedHead: storedHead) {
        case .unchanged:
            // An answer updates the shared entry only where it could have been stored for everyone
            // (RFC 9111 §3.5, §5.2.1.5, §5.2.2.5, §5.2.2.7): it confirms the entry to this client
            // all the same, who is served it as stored.
            if !mayUpdateSharedEntry(request, response, requestHasCookie: requestHasCookie) {
                return background ? .keepEntryAndGiveUp : .unchangedNotShared
            }
            return .unchanged
        case .changed:
            guard method == .head else { return .changedStoreThis }
            return !background && request?.method == .head ? .changedForwardThis : .changedRefetch
        }
    }

    /// Whether `response` (a 304, or a HEAD's 200 that does not contradict the entry) may update
    /// the shared entry: not when it says `no-store` or unqualified `private` (its fields are one
    /// user's), nor when the request said `no-store`, nor when the request carried credentials and
    /// the answer does not say it may be shared. A HEAD's 200 carries every field of the answer, so
    /// for it a `Cookie` counts as credentials too (a 304 carries the entry's metadata).
    private static func mayUpdateSharedEntry(_ request: RequestFacts?, _ response: ResponseHead,
                                             requestHasCookie: Bool) -> Bool {
        let credentials = request.map { $0.hasAuthorization || (requestHasCookie && response.status == 200) } ?? false
        if request?.directives.noStore == true { return false }
        // Parsed only when it could matter: most answers' Cache-Control says neither word.
        guard credentials || cacheControlMentionsNoStoreOrPrivate(response.headers) else { return true }
        let directives = CacheDirectives.parse(response.headers, isRequest: false)
        if directives.noStore || directives.private { return false }
        return !credentials || directives.public || directives.sMaxAge != nil || directives.mustRevalidate
    }

    /// Whether any Cache-Control value holds `no-store` or `private` anywhere, in any case: a
    /// quick, conservative test before a parse.
    private static func cacheControlMentionsNoStoreOrPrivate(_ headers: HeaderBlock) -> Bool {
        for i in 0..<headers.count where headers.nameEquals(at: i, "cache-control") {
            let found = headers.withBytes(headers.fields[i].value) { v -> Bool in
                containsLowered(v, 0, v.count, "no-store") || containsLowered(v, 0, v.count, "private")
            }
            if found { return true }
        }
        return false
    }

}
