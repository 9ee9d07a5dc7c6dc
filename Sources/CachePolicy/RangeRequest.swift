import HTTPWire

public enum RangeDecision: Sendable, Equatable {
    /// Serve the whole stored body (no Range, or If-Range does not match, or not bytes).
    case full
    /// 206 with `Content-Range: bytes start-end/length` (inclusive end).
    case single(start: Int, end: Int)
    /// 416 with `Content-Range: bytes */length`.
    case unsatisfiable
    /// Several ranges: let the origin answer.
    case passToOrigin
}

public enum RangeRequest {
    /// RFC 9110 §14: a single `bytes=` range (first-last, first-, -suffix) over a stored body of
    /// `length` bytes, honouring `If-Range` (strong ETag or exact Last-Modified date).
    ///
    /// Only GET requests for a stored 200 are answered with parts. A malformed Range is ignored
    /// (§14.2: whole body); an If-Range that is a weak ETag never matches (§13.1.5).
    public static func decide(request: RequestHead, length: Int, entry: EntryFacts) -> RangeDecision {
        guard request.method == .get, entry.status == 200 else { return .full }
        let headers = request.headers
        guard let rangeIndex = headers.firstIndex(of: "range") else { return .full }
        if headers.has("if-range"), !ifRangeMatches(headers, entry) { return .full }
        return headers.withBytes(headers.fields[rangeIndex].value) { decide($0, length: length) }
    }

    /// Whether a ranged miss should fill the cache: the whole object is fetched (without the
    /// client's `Range`), stored, and the client's one range answered from it as it streams, so the
    /// next ranged request is a hit (RFC 9111 §3.4 lets a cache answer ranges from a whole response).
    /// Only a GET with one well-formed `bytes=` range and no conditionals or `If-Range`; several
    /// ranges or anything unusual go to the origin as they are.
    public static func fillsCache(_ request: RequestHead, facts: RequestFacts) -> Bool {
        guard request.method == .get, facts.hasRange, !facts.hasConditionals, !facts.hasPreconditions else { return false }
        let headers = request.headers
        guard !headers.has("if-range"), let rangeIndex = headers.firstIndex(of: "range") else { return false }
        // Judged against an unknown, very large length: one satisfiable-looking spec is what counts.
        switch headers.withBytes(headers.fields[rangeIndex].value, { decide($0, length: Int.max / 2) }) {
        case .single: return true
        case .full, .unsatisfiable, .passToOrigin: return false
        }
    }

    private static func ifRangeMatches(_ headers: HeaderBlock, _ entry: EntryFacts) -> Bool {
        headers.withFirstValue("if-range") { value -> Bool in
            if (value.count >= 1 && value[0] == asciiQuote) || EntityTag.isWeak(value) {
                guard let stored = entry.etag, EntityTag.isStrong(value) else { return false }
                return stored.withUnsafeBytes { EntityTag.compare($0, value) == .strongMatch }
            }
            guard let date = HTTPDate.parse(value, now: entry.responseTime), let lastModified = entry.lastModified else {
                return false
            }
            return date == lastModified
        } ?? false
    }

    /// `bytes=` followed by one or more range specs, in `p`.
    static func decide(_ p: UnsafeRawBufferPointer, length: Int) -> RangeDecision {
        let n = p.count
        // range-unit is case-insensitive (RFC 9110 §14.1); optional whitespace before "=" is not allowed.
        guard n > 6, equalsIgnoringCase(p, 0, 6, "bytes="), length >= 0 else { return .full }
        var specs = 0
        var malformed = false
        var single: RangeDecision = .unsatisfiable
        forEachListElement(p, 6, n) { s, e in
            specs += 1
            guard let spec = parseSpec(p, s, e) else {
                malformed = true
                return false
            }
            single = satisfy(spec, length: length)
            return true
        }
        if malformed || specs == 0 { return .full }
        if specs > 1 { return .passToOrigin }
        return single
    }

    private enum Spec {
        case fromTo(Int, Int?)
        case suffix(Int)
    }

    /// `first-pos "-" [ last-pos ]` or `"-" suffix-length`; nil when malformed or last < first.
    private static func parseSpec(_ p: UnsafeRawBufferPointer, _ s: Int, _ e: Int) -> Spec? {
        var dash = s
        while dash < e, p[dash] != 0x2D { dash += 1 }
        guard dash < e else { return nil }
        if dash == s {
            guard let suffix = parseSaturatingInt(p, s + 1, e) else { return nil }
            return .suffix(suffix)
        }
        guard let first = parseSaturatingInt(p, s, dash) else { return nil }
        if dash + 1 == e { return .fromTo(first, nil) }
        guard let last = parseSaturatingInt(p, dash + 1, e), last >= first else { return nil }
        return .fromTo(first, last)
    }

    /// §14.1.1: a range is satisfiable when it starts inside the body; the end is clipped to it.
    private static func satisfy(_ spec: Spec, length: Int) -> RangeDecision {
        guard length > 0 else { return .unsatisfiable }
        switch spec {
        case .fromTo(let first, let last):
            guard first < length else { return .unsatisfiable }
            return .single(start: first, end: min(last ?? (length - 1), length - 1))
        case .suffix(let suffix):
            guard suffix > 0 else { return .unsatisfiable }
            return .single(start: max(0, length - suffix), end: length - 1)
        }
    }
}
