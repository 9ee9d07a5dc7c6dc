import CachePolicy
import CacheStore
import HTTPWire

/// Writing to the cache: shared by client connections and background refreshes.
extension CacheExchange {
    /// Starts storing `head` (the answer to `request`) if the cache may. Returns what collapsed
    /// followers need to share it, or nil when the response will not be stored.
    /// `reusablePost`: a POST's answer stored for its target (`PostReuse`).
    func beginStoring(request: RequestHead, response head: ResponseHead, now: Int64, cache: Cache,
                      setup: CacheSetup, reusablePost: Bool = false) -> InFlightFetch.Head? {
        if head.status == 206 {
            // A piece never takes the place of a whole response stored for the URL, nor is one kept
            // that answers a request sent without the client's range (a fill, a revalidation); one
            // that is the whole after all is stored as the 200 it stands for.
            if !forwardedRange || entry.map({ $0.facts.status != 206 }) == true {
                status.detail = NotStoredReason.partialContent.detail
                return nil
            }
            if PartialContent.isStorablePiece(request: request, response: head),
               let piece = PartialContent.piece(of: head), piece.isWhole,
               let whole = PartialContent.wholeHead(of: head, completeLength: piece.completeLength) {
                return beginStoring(request: request, response: whole, now: now, cache: cache, setup: setup)
            }
        }
        let contentType = head.headers.firstIndex(of: "content-type").map { head.headers.fields[$0].value }
        let rule = path.withUnsafeBytes { path in
            if let ct = contentType {
                return head.headers.withBytes(ct) { setup.rules.storage(scheme: scheme, host: host, path: path,
                                                                        status: head.status, contentType: $0) }
            }
            return setup.rules.storage(scheme: scheme, host: host, path: path, status: head.status, contentType: nil)
        }
        // A targeted field addressed to this cache governs it instead of Cache-Control (RFC 9213).
        let policyHead = TargetedCacheControl.policyHead(of: head, targets: setup.targetedFields)
        func verdict(of response: ResponseHead) -> StoreVerdict {
            Storability.verdict(request: request, response: response, storagePolicy: rule.policy,
                                override: rule.freshness, requestTime: requestTime, responseTime: now,
                                settings: setup.policy, reusablePost: reusablePost)
        }
        // Not `policyHead ?? head`: that copies the head (a reference count per array) on every response.
        switch policyHead.map(verdict) ?? verdict(of: head) {
        case .doNotStore(.method):
            return nil  // only GET responses are stored; nothing to report
        case .doNotStore(let reason):
            status.detail = reason.detail
            return nil
        case .store(let plan):
            let facts = plan.facts
            // The verdict read the targeted field's qualified lists; Cache-Control's apply too, as
            // on every revalidation (`freshen`), so a field the origin marked private is never shared.
            var omit = plan.omitFields
            if policyHead != nil {
                for name in Storability.qualifiedFields(of: head.headers) where !omit.contains(name) { omit.append(name) }
            }
            let tier = plan.tier
            let expected = plan.expectedLength
            let secondary = CacheKey.secondary(varyFields: facts.varyFields, request: request.headers)
            let shared = InFlightFetch.Head(response: head, varyFields: facts.varyFields, varyStar: facts.varyStar,
                                            secondaryKey: secondary, omitFields: omit)
            // A language variant is stored for the language rather than for this request's field.
            let storedKey = facts.varyFields.isEmpty ? secondary
                : LanguageVariant.storedKey(varyFields: facts.varyFields, request: request.headers,
                                            response: head.headers) ?? secondary
            guard let w = cache.beginStore(primaryKey: primaryKey, secondaryKey: storedKey, facts: facts,
                                           head: [], tier: tier, expectedLength: expected, now: now) else {
                // Too large to keep, but still one response every waiting client can share.
                status.detail = "too-large"
                return shared
            }
            beginStore(StoreInProgress(writer: w, response: head, facts: facts, omitFields: omit, responseTime: now))
            status.stored = true
            return shared
        }
    }

    /// The origin said the stored `entry` is unchanged (304, or a matching HEAD) in answer to
    /// the revalidation of `request`: refresh its stored head from `update` (RFC 9111 §3.2,
    /// §4.3.4, §4.3.5). False when the stored head is unusable.
    func freshen(with update: ResponseHead, request: RequestHead, now: Int64, cache: Cache, setup: CacheSetup) -> Bool {
        guard let entry, let stored = entry.parsedHead ?? CachedResponseWriter.parse(entry.head) else { return false }
        // The qualified field lists of both heads keep applying: a field the stored response kept
        // private stays out whatever the update says, and the update's own lists apply too.
        var omit = privateFields(of: stored, setup: setup)
        for name in privateFields(of: update, setup: setup) where !omit.contains(name) { omit.append(name) }
        let newHead = Revalidation.freshenedHead(stored: stored, update: update, omitFields: omit)
        // An answer that changes nothing but what is already stored (e.g. a Date within the same
        // second, as for a popular URL) gives back the stored head byte for byte: its parse is reused.
        guard let parsed = sameBytes(newHead, entry.head) ? stored : CachedResponseWriter.parse(newHead) else {
            return true
        }
        let override = path.withUnsafeBytes {
            setup.rules.storage(scheme: scheme, host: host, path: $0, status: parsed.status, contentType: nil).freshness
        }
        let policyHead = TargetedCacheControl.policyHead(of: parsed, targets: setup.targetedFields) ?? parsed
        // A preset's lifetime is judged as for a new store: by the request that revalidated (its
        // Cookie or Authorization), the answer (its Set-Cookie, which is never stored) and the
        // head now stored. Otherwise an entry kept without one, a user's own file, would gain it
        // at the first revalidation and be served to anyone for a year.
        let guarded = SharingGuard.applicable(override, requestHeaders: request.headers, response: update)
        let facts = EntryFacts.make(response: policyHead, requestTime: requestTime, responseTime: now,
                                    bodyLength: entry.bodyLength, settings: setup.policy,
                                    override: SharingGuard.applicable(guarded, requestHeaders: nil, response: policyHead))
        cache.freshen(entry, facts: facts, head: newHead, parsedHead: parsed, now: now)
        var record = entry.record
        record.facts = facts
        record.head = newHead
        self.entry = StoredResponse(key: entry.key, record: record, body: entry.body, tier: entry.tier,
                                    parsedHead: parsed)
        return true
    }
}

/// The fields `head` keeps out of the shared cache: those its `Cache-Control` qualifies
/// (`private="…"`, `no-cache="…"`) and those a targeted field addressed to this cache qualifies
/// (RFC 9213), which is what the store read. Both, so that neither can let one in on an update.
func privateFields(of head: ResponseHead, setup: CacheSetup) -> [[UInt8]] {
    var fields = Storability.qualifiedFields(of: head.headers)
    if let policyHead = TargetedCacheControl.policyHead(of: head, targets: setup.targetedFields) {
        for name in Storability.qualifiedFields(of: policyHead.headers) where !fields.contains(name) {
            fields.append(name)
        }
    }
    return fields
}
