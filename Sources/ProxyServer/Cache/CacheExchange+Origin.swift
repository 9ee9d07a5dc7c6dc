import CachePolicy
import CacheStore
import HTTPWire
import SessionClient

/// The origin's side of the cache flow, one driver for every fetch that involves the cache: a
/// client's request (`CacheFlow`), a background refresh, and a collapsed fetch whose client left.
/// What the phase says to do with a response head and with the end of the exchange is decided
/// here once; the callers add only what a client has (serving, statistics, its cookies).
extension CacheExchange {
    enum HeadStep {
        /// The response goes on to the client (and to the store, when it is being kept).
        case forward
        /// Already decided (revalidated, or to be fetched again): the answer is not the client's.
        case consumed
        /// The answer to a revalidation, applied to the entry.
        case revalidation(RevalidationStep)
        /// The rest of a stored prefix: the client gets `whole` (being stored), the prefix's bytes,
        /// then the answer's body.
        case combined(whole: ResponseHead, prefix: PieceCompletion)
    }

    enum EndStep {
        case done
        /// The revalidation said unchanged (or the entry stands in for a 5xx): serve it.
        case serveEntry(StoredResponse)
        /// HEAD found a change: fetch the whole new response with GET, to store (the one GET after
        /// the one HEAD; its Cache-Status says `revalidated-head-changed`).
        case refetch
        /// The revalidation got no answer (`method` was its method): stale-if-error may apply.
        case revalidationFailed(RevalidationMethod)
    }

    /// The final response head from the origin, in the current phase.
    func originHead(_ head: ResponseHead, request: RequestHead, background: Bool, now: Int64, cache: Cache,
                    setup: CacheSetup, table: InFlightTable) -> HeadStep {
        switch phase {
        case .revalidating(let m):
            return .revalidation(applyRevalidationAnswer(head, method: m, request: request, background: background,
                                                         now: now, cache: cache, setup: setup, table: table))
        case .fetching:
            status.forwardStatus = head.status
            if let completion { return completionAnswered(head, completion, request: request, now: now, cache: cache, setup: setup) }
            let shared = beginStoring(request: request, response: head, now: now, cache: cache, setup: setup)
            announce(shared, table: table)
            return .forward
        case .bypass:
            status.forwardStatus = head.status
            return .forward
        case .unsafe:
            status.forwardStatus = head.status
            for key in Invalidation.targets(method: request.method, status: head.status, targetKey: primaryKey,
                                            response: head) {
                cache.invalidate(primaryKey: key)
                table.forget(key)
            }
            // A POST's answer that names its target is stored for it, in place of what was there.
            if request.method == .post, PostReuse.reusable(response: head, targetKey: primaryKey) {
                fetchWhole()
                _ = beginStoring(request: request, response: head, now: now, cache: cache, setup: setup, reusablePost: true)
            }
            return .forward
        case .revalidated, .refetch:
            return .consumed
        }
    }

    /// The decision to store (or share) a fetched response, `shared`, told to the collapsed
    /// followers (they get the head, or are released to fetch on their own) and to the URL's pass
    /// marker (whether the URL's next misses may wait on each other, see `InFlightTable`).
    func announce(_ shared: InFlightFetch.Head?, table: InFlightTable) {
        if let f = inFlight {
            if let shared {
                f.publish(shared, disk: diskBacking())
            } else { endCollapse(failed: false, table: table) }
        }
        switch passMarking {
        case .none: break
        case .markOrClear: if shared == nil { table.markPass(primaryKey) } else { table.clearPass(primaryKey) }
        case .clearIfStored: if shared != nil { table.clearPass(primaryKey) }
        }
    }

    /// A body stored on disk as it arrives, too large for the memory window: requests that join
    /// late read what is committed there. A smaller one is joined from memory alone.
    private func diskBacking() -> DiskBacking? {
        guard let w = writer else { return nil }
        if let n = announcedLength, n <= InFlightTable.joinWindow { return nil }
        return w.followProgress().map { DiskBacking(progress: $0.0, pin: $0.1) }
    }

    /// The origin's exchange ended (`error` nil) or broke off.
    func originEnded(error: SessionError?, now: Int64, table: InFlightTable) -> EndStep {
        switch phase {
        case .fetching:
            completeFetch(error: error, table: table)
            return .done
        case .revalidating(let m):
            return error == nil ? .done : .revalidationFailed(m)
        case .revalidated:
            // Decided on the head; a failure after it does not matter.
            return entry.map { .serveEntry($0) } ?? .done
        case .refetch:
            fetchWhole()
            status = refetchStatus ?? CacheStatus(forward: .stale, detail: "revalidated-head-changed")
            refetchStatus = nil
            requestTime = now
            return .refetch
        case .unsafe, .bypass:
            return .done
        }
    }
}

extension CacheExchange.RevalidationStep {
    /// Whether the revalidation's answer is consumed by the cache rather than sent to the client.
    var consumesAnswer: Bool {
        switch self {
        case .serveStale, .unchanged, .unchangedNotShared, .refetch: return true
        case .unusable, .forwardThis, .storeThis, .keep: return false
        }
    }
}
