import HTTPWire

/// When a preset's lifetime may apply. A preset gives lifetimes to responses that say nothing
/// about caching, which is how registries answer package files; it must never be what makes a
/// response shareable that would not be without it. A personal page reached at a path a preset
/// matches (`/account.php/pool/main/x.deb`, web cache deception) would otherwise be kept a year
/// and served to the next client. So a guarded override yields (the response is judged by its own
/// fields alone) when:
/// - the request carries `Cookie` or `Authorization`: the answer may be that user's;
/// - the response sets a cookie, or says `no-cache`, `must-revalidate`, `proxy-revalidate`,
///   `private`, or an explicit lifetime of zero (`max-age=0`, `s-maxage=0`, `Expires` not after
///   `Date`): the origin asked for exactly what the lifetime would undo;
/// - a forced lifetime (a preset's artifacts: packages, archives, blobs) meets an HTML page, which
///   is never such an artifact and is what a site answers for a path it does not have.
/// An index's client reload (`max-age=0` on the request, `ignore_reload`) is a request-side rule
/// and not touched here.
public enum SharingGuard {
    /// `override` as it applies to this exchange: unchanged when it is not guarded or every check
    /// passes, nil when it must yield. `requestHeaders` is nil where no client request is at hand
    /// (a stored entry freshened by a revalidation answer): the response-side checks still apply.
    public static func applicable(_ override: FreshnessOverride?, requestHeaders: HeaderBlock?,
                                  response: ResponseHead) -> FreshnessOverride? {
        guard let override, override.guarded else { return override }
        return refusal(override, requestHeaders: requestHeaders, response: response) == nil ? override : nil
    }

    /// Why a guarded override yields, nil when it applies (for tests and logs).
    public static func refusal(_ override: FreshnessOverride, requestHeaders: HeaderBlock?,
                               response: ResponseHead) -> Refusal? {
        if let request = requestHeaders {
            if request.has("cookie") { return .requestCookie }
            if request.has("authorization") { return .requestAuthorization }
        }
        let headers = response.headers
        if headers.has("set-cookie") { return .setCookie }
        let d = CacheDirectives.parse(headers, isRequest: false)
        if d.noCache || d.mustRevalidate || d.proxyRevalidate || d.private { return .responseDirective }
        if d.maxAge == 0 || d.sMaxAge == 0 { return .responseDirective }
        if d.maxAge == nil, d.sMaxAge == nil, let expires = EntryFacts.expiresValue(headers, responseTime: nil) {
            let date = headers.withFirstValue("date") { HTTPDate.parse($0) } ?? nil
            if let expires, let date, expires <= date { return .responseDirective }
            if expires == nil { return .responseDirective }   // invalid: already expired (RFC 9111 §5.3)
        }
        if override.forcedLifetime != nil, isPage(headers) { return .htmlForArtifact }
        return nil
    }

    public enum Refusal: Sendable, Equatable {
        case requestCookie, requestAuthorization, setCookie, responseDirective, htmlForArtifact
    }

    /// `text/html` or `application/xhtml+xml`, parameters aside.
    private static func isPage(_ headers: HeaderBlock) -> Bool {
        headers.withFirstValue("content-type") { value in
            var start = 0
            while start < value.count, value[start] == 0x20 || value[start] == 0x09 { start += 1 }
            return startsWithLowered(value, start, "text/html") || startsWithLowered(value, start, "application/xhtml+xml")
        } ?? false
    }

    private static func startsWithLowered(_ p: UnsafeRawBufferPointer, _ start: Int, _ word: StaticString) -> Bool {
        let end = start + word.utf8CodeUnitCount
        return end <= p.count && equalsIgnoringCase(p, start, end, word)
    }
}
