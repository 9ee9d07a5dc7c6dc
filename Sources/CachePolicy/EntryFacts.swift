import HTTPWire

/// What the cache keeps about a stored response to decide later uses without re-reading its
/// headers: times, computed freshness, the directives that matter, validators. Computed once when
/// the response is stored (or freshened); every later decision is arithmetic on these numbers.
public struct EntryFacts: Sendable, Equatable {
    public var status: Int
    /// When the request that produced the response was sent, and when the response head arrived
    /// (RFC 9111 §4.2.3 request_time / response_time), seconds since the epoch.
    public var requestTime: Int64
    public var responseTime: Int64
    /// The response's Date (response_time when missing or invalid).
    public var dateValue: Int64
    /// RFC 9111 §4.2.3 corrected_initial_age.
    public var correctedInitialAge: Int64
    /// RFC 9111 §4.2.1 freshness_lifetime (after any override); 0 means stale at once.
    public var freshnessLifetime: Int64
    /// Whether the lifetime is heuristic (§4.2.2), for Cache-Status detail.
    public var heuristic: Bool
    /// Response `no-cache` without field names: revalidate on every use.
    public var noCache: Bool
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage`: never served stale (§4.2.4, §5.2.2.2).
    public var mustRevalidate: Bool
    /// RFC 5861 windows in seconds (0 when absent).
    public var staleWhileRevalidate: Int64
    public var staleIfError: Int64
    /// The ETag field value as sent (`"x"` or `W/"x"`), if any.
    public var etag: [UInt8]?
    public var lastModified: Int64?
    /// Content-Length of the stored representation (the body length for a stored GET).
    public var contentLength: Int?
    /// Lowercased field names from Vary; `varyStar` for `Vary: *` (such entries never match).
    public var varyFields: [[UInt8]]
    public var varyStar: Bool

    public init(status: Int, requestTime: Int64, responseTime: Int64, dateValue: Int64, correctedInitialAge: Int64,
                freshnessLifetime: Int64, heuristic: Bool, noCache: Bool, mustRevalidate: Bool,
                staleWhileRevalidate: Int64, staleIfError: Int64, etag: [UInt8]?, lastModified: Int64?,
                contentLength: Int?, varyFields: [[UInt8]], varyStar: Bool) {
        self.status = status; self.requestTime = requestTime; self.responseTime = responseTime
        self.dateValue = dateValue; self.correctedInitialAge = correctedInitialAge
        self.freshnessLifetime = freshnessLifetime; self.heuristic = heuristic; self.noCache = noCache
        self.mustRevalidate = mustRevalidate; self.staleWhileRevalidate = staleWhileRevalidate
        self.staleIfError = staleIfError; self.etag = etag; self.lastModified = lastModified
        self.contentLength = contentLength; self.varyFields = varyFields; self.varyStar = varyStar
    }

    /// Computes the facts of `response`, received at `responseTime` for a request sent at `requestTime`.
    /// `bodyLength` is the stored body's length when known (it wins over a missing Content-Length).
    public static func make(response: ResponseHead, requestTime: Int64, responseTime: Int64, bodyLength: Int?,
                            settings: PolicySettings, override: FreshnessOverride?) -> EntryFacts {
        let headers = response.headers
        let directives = CacheDirectives.parse(headers, isRequest: false)
        let date = headers.withFirstValue("date") { HTTPDate.parse($0, now: responseTime) } ?? nil
        let dateValue = date ?? responseTime
        let lastModified = headers.withFirstValue("last-modified") { HTTPDate.parse($0, now: responseTime) } ?? nil

        // RFC 9111 §4.2.3, term by term.
        let ageValue = ageValue(headers)
        let apparentAge = max(0, responseTime - dateValue)
        let responseDelay = responseTime - requestTime
        let correctedAgeValue = (ageValue ?? 0) + responseDelay
        let correctedInitialAge = max(apparentAge, correctedAgeValue)

        var (lifetime, heuristic) = freshnessLifetime(
            status: response.status, headers: headers, directives: directives, dateValue: dateValue,
            lastModified: lastModified, responseTime: responseTime, settings: settings, override: override)
        if let override {
            if let forced = override.forcedLifetime, !directives.noCache {
                lifetime = forced
                heuristic = false
            }
            if let maximum = override.maximumLifetime { lifetime = min(lifetime, maximum) }
        }

        var contentLength = bodyLength
        if contentLength == nil {
            contentLength = headers.withFirstValue("content-length") { parseSaturatingInt($0, 0, $0.count) } ?? nil
        }
        let vary = varyFields(headers)
        return EntryFacts(
            status: response.status, requestTime: requestTime, responseTime: responseTime, dateValue: dateValue,
            correctedInitialAge: correctedInitialAge, freshnessLifetime: max(0, lifetime), heuristic: heuristic,
            noCache: directives.noCache,
            mustRevalidate: directives.mustRevalidate || directives.proxyRevalidate || directives.sMaxAge != nil,
            staleWhileRevalidate: directives.staleWhileRevalidate ?? 0, staleIfError: directives.staleIfError ?? 0,
            etag: headers.firstValueBytes("etag"), lastModified: lastModified, contentLength: contentLength,
            varyFields: vary.fields, varyStar: vary.star)
    }

    /// RFC 9111 §4.2.1 (explicit) and §4.2.2 (heuristic) freshness lifetime, before any override
    /// other than `defaultLifetime`.
    static func freshnessLifetime(status: Int, headers: HeaderBlock, directives: CacheDirectives, dateValue: Int64,
                                  lastModified: Int64?, responseTime: Int64, settings: PolicySettings,
                                  override: FreshnessOverride?) -> (lifetime: Int64, heuristic: Bool) {
        if directives.conflictingFreshness { return (0, false) }
        if let sMaxAge = directives.sMaxAge { return (sMaxAge, false) }
        if let maxAge = directives.maxAge { return (maxAge, false) }
        if let expires = expiresValue(headers, responseTime: responseTime) {
            // Invalid dates (such as "0") and repeated, differing Expires count as already expired.
            guard let expires else { return (0, false) }
            return (max(0, expires - dateValue), false)
        }
        guard Storability.isHeuristicallyCacheable(status) || directives.public else { return (0, false) }
        if let lastModified {
            let interval = max(0, dateValue - lastModified)
            let fraction = Double(interval) * settings.heuristicFraction
            let lifetime = fraction >= Double(settings.heuristicCap) ? settings.heuristicCap : Int64(max(0, fraction))
            return (lifetime, true)
        }
        if let defaultLifetime = override?.defaultLifetime { return (defaultLifetime, true) }
        return (0, false)
    }

    /// nil without Expires; `.some(nil)` when it is invalid or repeated with different values.
    /// `responseTime` dates two-digit years (see `HTTPDate.parse(_:now:)`).
    static func expiresValue(_ headers: HeaderBlock, responseTime: Int64?) -> Int64?? {
        var result: Int64?? = .none
        headers.storage.withUnsafeBytes { all in
            for field in headers.fields
            where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, "expires") {
                let value = UnsafeRawBufferPointer(rebasing: all[field.value.start..<(field.value.start + field.value.count)])
                let parsed = responseTime.map { HTTPDate.parse(value, now: $0) } ?? HTTPDate.parse(value)
                switch result {
                case .none: result = .some(parsed)
                case .some(let previous) where previous != parsed: result = .some(nil)
                default: break
                }
            }
        }
        return result
    }

    /// RFC 9111 §5.1 age_value: the first member of the first Age field (a list on one line, or
    /// several Age lines, are read as one list); nil when that member is not delta-seconds, so an
    /// invalid Age is ignored rather than let later members stand in for it.
    static func ageValue(_ headers: HeaderBlock) -> Int64? {
        headers.storage.withUnsafeBytes { all -> Int64? in
            var found = false
            var value: Int64?
            for field in headers.fields
            where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, "age") {
                forEachListElement(all, field.value.start, field.value.start + field.value.count) { s, e in
                    found = true
                    value = parseDeltaSeconds(all, s, e)
                    return false
                }
                if found { break }
            }
            return value
        }
    }

    /// Lowercased names listed in every Vary field, without repeats; `star` when `*` is among them.
    static func varyFields(_ headers: HeaderBlock) -> (fields: [[UInt8]], star: Bool) {
        var fields: [[UInt8]] = []
        var star = false
        headers.storage.withUnsafeBytes { all in
            for field in headers.fields
            where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, "vary") {
                forEachListElement(all, field.value.start, field.value.start + field.value.count) { s, e in
                    if e - s == 1, all[s] == 0x2A {
                        star = true
                    } else {
                        let name = all[s..<e].map(asciiLower)
                        if !fields.contains(name) { fields.append(name) }
                    }
                    return true
                }
            }
        }
        return (fields, star)
    }

    /// RFC 9111 §4.2.3 current_age at `now`. A clock that stepped back never makes an entry younger
    /// than it arrived (resident_time is at least 0).
    @inline(__always)
    public func currentAge(now: Int64) -> Int64 {
        correctedInitialAge + max(0, now - responseTime)
    }

    /// freshness_lifetime > current_age.
    @inline(__always)
    public func isFresh(now: Int64) -> Bool { freshnessLifetime > currentAge(now: now) }

    /// Seconds of freshness left at `now` (negative when stale), for Cache-Status `ttl`.
    @inline(__always)
    public func timeToLive(now: Int64) -> Int64 { freshnessLifetime - currentAge(now: now) }
}

extension EntryFacts {
    /// Whether these facts, of an older copy of an entry, are never fresher than `newer`'s (a
    /// freshened head's): whenever the older copy could be served without asking the origin (fresh,
    /// or stale within its stale-while-revalidate or stale-if-error), the newer could too, and both
    /// revalidate with the same validators. The older copy can then stand on disk for a while
    /// without ever allowing what the newer head forbids.
    public func neverFresherThan(_ newer: EntryFacts) -> Bool {
        // Its age is at least the newer one's at any moment: same or older response, no younger start.
        correctedInitialAge - responseTime >= newer.correctedInitialAge - newer.responseTime
            && freshnessLifetime <= newer.freshnessLifetime
            && (noCache || !newer.noCache) && (mustRevalidate || !newer.mustRevalidate)
            && staleWhileRevalidate <= newer.staleWhileRevalidate && staleIfError <= newer.staleIfError
            && status == newer.status && etag == newer.etag && lastModified == newer.lastModified
            && varyStar == newer.varyStar && varyFields == newer.varyFields
    }
}
