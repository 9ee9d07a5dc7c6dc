import CachePolicy
import CacheStore
import HTTPWire

/// The origin's answer to a revalidation, applied to the entry: the one place that decides it, for
/// client requests and background refreshes alike.
extension CacheExchange {
    enum RevalidationStep {
        /// A 5xx where the entry may be served stale instead (RFC 5861 stale-if-error).
        case serveStale
        /// Unchanged: the entry's head is freshened; serve it.
        case unchanged
        /// Unchanged, but the stored head will not parse: the answer goes to the client as it is.
        case unusable
        /// Unchanged for this client, whose answer may not update the shared entry: serve it as stored.
        case unchangedNotShared
        /// Changed, found by HEAD: fetch the new response with GET once this exchange ends.
        case refetch
        /// Changed, found by a client's HEAD: the entry is invalidated; the answer is the client's.
        case forwardThis
        /// Changed, found by a conditional GET: this response is the new one, being stored.
        case storeThis
        /// A background refresh got a 5xx: the entry stays as it was.
        case keep
    }

    /// The revalidation to write instead of the client's request line, if revalidating.
    /// The method is the phase's: CachePolicy chose it, HEAD for a client's HEAD (`Revalidation.method`).
    func outboundRevalidation(for clientMethod: HTTPMethod) -> OutboundHead.Revalidation? {
        // Filling the cache from a ranged miss: the whole object, without the client's Range.
        if rangeFill, case .fetching = phase { return OutboundHead.Revalidation(method: .get, conditionalFields: []) }
        // Completing a stored prefix: the rest of it, on the same version only (`If-Range`).
        if let completion, case .fetching = phase {
            return OutboundHead.Revalidation(method: .get, conditionalFields: completion.requestFields)
        }
        guard case .revalidating(let m) = phase, let entry else { return nil }
        assert(clientMethod != .head || m == .head, "a client's HEAD is revalidated with HEAD")
        return OutboundHead.Revalidation(method: m == .head ? .head : .get,
                                         conditionalFields: Revalidation.conditionalFields(for: entry.facts))
    }

    /// `head` answered the revalidation `method` of `entry` (phase `.revalidating`); the meaning
    /// is CachePolicy's (`Revalidation.verdict`), carried out here.
    func applyRevalidationAnswer(_ head: ResponseHead, method: RevalidationMethod, request: RequestHead,
                                 background: Bool, now: Int64, cache: Cache, setup: CacheSetup,
                                 table: InFlightTable) -> RevalidationStep {
        guard let entry else { return .keep }
        // The stored head, for the fields a HEAD's 200 must not relabel; the answer as the cache's
        // policy reads it (a targeted field's `private` or `no-store` keeps it off the shared entry).
        let storedHead = head.status == 200 && method == .head
            ? entry.parsedHead ?? CachedResponseWriter.parse(entry.head) : nil
        let policyAnswer = TargetedCacheControl.policyHead(of: head, targets: setup.targetedFields) ?? head
        switch Revalidation.verdict(entry: entry.facts, request: facts, response: policyAnswer, method: method,
                                    now: now, background: background, storedHead: storedHead,
                                    requestHasCookie: request.headers.firstIndex(of: "cookie") != nil) {
        case .serveStale:
            status = CacheStatus(hit: true, forwardStatus: head.status, ttl: entry.facts.timeToLive(now: now),
                                 detail: "stale-if-error")
            phase = .revalidated
            return .serveStale
        case .unchanged:
            guard freshen(with: head, request: request, now: now, cache: cache, setup: setup),
                  let fresh = self.entry else { return .unusable }
            status = CacheStatus(forward: .stale, forwardStatus: head.status, ttl: fresh.facts.timeToLive(now: now),
                                 detail: method == .head ? "revalidated-head" : "revalidated")
            phase = .revalidated
            return .unchanged
        case .unchangedNotShared:
            status = CacheStatus(forward: .stale, forwardStatus: head.status, ttl: entry.facts.timeToLive(now: now),
                                 detail: "revalidated-not-stored")
            phase = .revalidated
            return .unchangedNotShared
        case .changedRefetch:
            leadAsRefresh(table: table, setup: setup)
            cache.invalidate(primaryKey: primaryKey)
            self.entry = nil
            phase = .refetch
            return .refetch
        case .changedForwardThis:
            cache.invalidate(primaryKey: primaryKey)
            self.entry = nil
            // A HEAD answer has no body to store: forwarded, and the exchange is done with it.
            bypass()
            status = CacheStatus(forward: .stale, forwardStatus: head.status, detail: "revalidated-head-changed")
            return .forwardThis
        case .changedStoreThis:
            leadAsRefresh(table: table, setup: setup)
            cache.invalidate(primaryKey: primaryKey)
            self.entry = nil
            fetchWhole()
            status = CacheStatus(forward: .stale, forwardStatus: head.status)
            announce(beginStoring(request: request, response: head, now: now, cache: cache, setup: setup), table: table)
            return .storeThis
        case .keepEntryAndGiveUp, .forwardError:
            return .keep
        }
    }

    /// A background refresh about to remove the entry leads the URL's next fetch, so that requests
    /// missing it from now on follow rather than fetch it again (none when a fetch is under way,
    /// or collapsing is off). Led before the entry goes: a miss in between would lead instead.
    /// Its answer clears the URL's pass marker when stored, as a collapsed miss's does.
    private func leadAsRefresh(table: InFlightTable, setup: CacheSetup) {
        guard let leader = refreshLeader, inFlight == nil, setup.collapseRequests else { return }
        inFlight = table.lead(key: primaryKey, participant: leader)
        if inFlight != nil { passMarking = .clearIfStored }
    }

    /// The revalidation got no answer (`error`): whether the stale entry stands in for it.
    func mayServeStaleWithoutAnswer(method: RevalidationMethod, now: Int64) -> Bool {
        guard let entry else { return false }
        if case .serveStale = Revalidation.verdict(entry: entry.facts, request: facts, response: nil, method: method,
                                                   now: now, background: false) {
            return true
        }
        return false
    }
}
