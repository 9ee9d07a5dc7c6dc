import HTTPWire

public enum RevalidationOutcome: Sendable, Equatable {
    /// Serve the stored body with headers freshened from the origin's response.
    case unchanged
    /// Invalidate; with HEAD revalidation fetch with GET, with conditional GET the response is the new one.
    case changed
}

public enum Revalidation {
    /// Whether a stale-while-revalidate hit for `request` may start a background refresh. The
    /// refresh carries the request's fields, and its answer replaces the entry only when it may be
    /// stored for them: after a HEAD, a request `no-store` (RFC 9111 §5.2.1.5) or credentials it
    /// would only remove the entry. Those are served stale without one; the next plain GET within
    /// the window refreshes.
    public static func mayRefreshInBackground(for request: RequestFacts) -> Bool {
        request.method == .get && !request.directives.noStore && !request.hasAuthorization
    }

    /// The method that revalidates `entry` for a client's `requestMethod` (GET or HEAD; a background
    /// refresh asks for the stored GET), given the configured one:
    /// - a client's HEAD: HEAD whatever is configured. Its answer is the client's, and it freshens
    ///   or invalidates the entry (RFC 9111 §4.3.5): one round trip, and no body for a client that
    ///   wants none.
    /// - an entry with neither ETag nor Last-Modified: a plain GET (`conditionalGet` with no
    ///   conditionals). No answer to a HEAD could confirm it, so HEAD would always cost a GET too;
    ///   the GET's 200 replaces the entry.
    /// - otherwise the configured method.
    public static func method(for requestMethod: HTTPMethod, entry: EntryFacts,
                              configured: RevalidationMethod) -> RevalidationMethod {
        if requestMethod == .head { return .head }
        if entry.etag == nil, entry.lastModified == nil { return .conditionalGet }
        return configured
    }

    /// The conditional fields to add to a revalidation request: `If-None-Match` with the stored ETag,
    /// `If-Modified-Since` with Last-Modified (else nothing), as complete `Name: value\r\n` lines.
    public static func conditionalFields(for entry: EntryFacts) -> [UInt8] {
        var w = MessageWriter(capacity: 96)
        if let etag = entry.etag {
            w.append("If-None-Match: ")
            w.append(etag)
            w.append("\r\n")
        }
        // RFC 9111 §4.3.1: also the Last-Modified date, written as an IMF-fixdate.
        if let lastModified = entry.lastModified {
            w.append("If-Modified-Since: ")
            w.append(HTTPDate.format(lastModified))
            w.append("\r\n")
        }
        return w.bytes
    }

    /// Compares the origin's answer to a HEAD or conditional GET with the stored entry (RFC 9111
    /// §4.3.4, §4.3.5). A 304 is `unchanged`; after a conditional GET anything else is the new
    /// response (`changed`). A `200` to a HEAD is `unchanged` when it does not contradict the
    /// stored response (`storedHead`, when given, for the fields `EntryFacts` does not keep):
    /// - a `Content-Length` it carries equals the stored one (a value that does not parse as one
    ///   length contradicts), and a `Content-Type`, `Content-Encoding` or `Content-Language` it
    ///   carries is the stored one (an update must not relabel the stored bytes), and
    /// - a strong ETag equal to the stored one; else a `Last-Modified` equal to the stored one;
    ///   else, when it carries no validator, only when the stored response has none either.
    /// Everything else is `changed`: another status (a 404 or 410 says the representation is gone,
    /// a 204 that it is empty), a different or new validator, an answer without validators for a
    /// stored response that has one (it confirms nothing the stored one could be checked by), a
    /// different length.
    ///
    /// Weak ETags are never "equal" here; when both tags have the same opaque value but one is weak,
    /// Last-Modified decides.
    public static func outcome(entry: EntryFacts, response: ResponseHead, method: RevalidationMethod,
                               storedHead: ResponseHead? = nil) -> RevalidationOutcome {
        if response.status == 304 { return .unchanged }
        guard response.status == 200, method == .head else { return .changed }
        let headers = response.headers
        // The parser made every Content-Length field and list member agree (`declaredContentLength`).
        if let storedLength = entry.contentLength, let received = response.declaredContentLength,
           storedLength != received {
            return .changed
        }
        if let storedHead, relabels(storedHead.headers, headers) { return .changed }
        let receivedTag = headers.firstValueBytes("etag")
        if let receivedTag {
            guard let stored = entry.etag else { return .changed }
            switch EntityTag.compare(stored, receivedTag) {
            case .strongMatch: return .unchanged
            case .different: return .changed
            case .weakMatch: break
            }
        }
        // Present but not a date is as different as another date.
        if let received = headers.withFirstValue("last-modified", { HTTPDate.parse($0, now: entry.responseTime) }) {
            guard let storedDate = entry.lastModified, let receivedDate = received, storedDate == receivedDate else {
                return .changed
            }
            return .unchanged
        }
        // No validator to compare: it may update only a stored response that has none either (its
        // length, media type, coding and language, when it carries them, were compared above).
        return receivedTag == nil && entry.etag == nil && entry.lastModified == nil ? .unchanged : .changed
    }

    /// Whether `update` gives the stored bytes another media type, content coding or language.
    private static func relabels(_ stored: HeaderBlock, _ update: HeaderBlock) -> Bool {
        relabels(stored, update, "content-type") || relabels(stored, update, "content-encoding")
            || relabels(stored, update, "content-language")
    }

    /// Whether `update` has a `name` field whose first value is not the stored one's (compared
    /// trimmed and without case: media types, codings and language tags ignore it). In place: a
    /// revalidation should not allocate for this.
    private static func relabels(_ stored: HeaderBlock, _ update: HeaderBlock, _ name: StaticString) -> Bool {
        guard let u = update.firstIndex(of: name) else { return false }
        guard let s = stored.firstIndex(of: name) else { return true }
        return update.withBytes(update.fields[u].value) { a in
            stored.withBytes(stored.fields[s].value) { b in !sameTrimmedIgnoringCase(a, b) }
        }
    }

    /// RFC 9111 §3.2: the stored head with every field the update carries replaced by the update's,
    /// except framing and hop-by-hop fields (Content-Length, Transfer-Encoding, Connection and the
    /// fields it lists, Keep-Alive, …) and Content-Range; fields in `omitFields` left out. Returns
    /// the serialized head (status line of the stored response + fields + CRLF), ready to store.
    ///
    /// Replaced fields take the place of the stored field of that name; fields new to the stored
    /// head follow the stored ones, in the update's order. `Age` is never kept (it is written per
    /// response served), from either side.
    public static func freshenedHead(stored: ResponseHead, update: ResponseHead, omitFields: [[UInt8]]) -> [UInt8] {
        let old = stored.headers
        let new = update.headers
        var w = MessageWriter(capacity: old.storage.count + new.storage.count)
        HeadSerialization.appendStatusLine(of: stored, to: &w)

        // What each update field may do (0 nothing, 1 replace or join the stored ones, 2 written),
        // and its name's signature, so that most pairs of names are told apart by one compare.
        // On the stack: a revalidation should not allocate for bookkeeping.
        withUnsafeTemporaryAllocation(of: (use: UInt8, name: UInt32).self, capacity: new.count) { update in
            let newListsOthers = new.connectionListsOtherFields
            for i in 0..<new.count {
                // Content-Encoding describes the stored bytes themselves: an update cannot relabel them.
                let updatable = !HeadSerialization.isNeverStored(new, at: i, connectionListsOtherFields: newListsOthers)
                    && !new.nameEquals(at: i, "content-range")
                    && !new.nameEquals(at: i, "content-encoding") && !new.nameIsListed(at: i, in: omitFields)
                update[i] = (updatable ? 1 : 0, new.nameSignature(at: i))
            }
            let oldListsOthers = old.connectionListsOtherFields
            for i in 0..<old.count {
                if old.isHopByHop(at: i, connectionListsOtherFields: oldListsOthers) || old.nameEquals(at: i, "age")
                    || old.nameIsListed(at: i, in: omitFields) {
                    continue
                }
                // The first stored field of the name takes all of the update's values; later ones go.
                var replaced = false
                let name = old.nameSignature(at: i)
                for j in 0..<new.count where update[j].use != 0 && update[j].name == name
                    && old.nameEquals(at: i, fieldAt: j, of: new) {
                    replaced = true
                    if update[j].use == 1 {
                        w.appendField(at: j, of: new)
                        update[j].use = 2
                    }
                }
                if !replaced { w.appendField(at: i, of: old) }
            }
            for j in 0..<new.count where update[j].use == 1 {
                w.appendField(at: j, of: new)
            }
        }
        w.append("\r\n")
        return w.bytes
    }
}
