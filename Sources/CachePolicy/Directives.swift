import HTTPWire

/// The Cache-Control directives of one message (all its Cache-Control fields combined), RFC 9111 §5.2.
/// Requests also honour `Pragma: no-cache` when they carry no Cache-Control (§5.4).
public struct CacheDirectives: Sendable, Equatable {
    public var maxAge: Int64?
    public var sMaxAge: Int64?
    /// Request `max-stale`: `.some(nil)` without a value (any staleness), `.some(n)` with one.
    public var maxStale: Int64??
    public var minFresh: Int64?
    public var noCache = false
    /// Response `no-cache="a, b"`: the named fields must not be served without revalidation.
    public var noCacheFields: [[UInt8]] {
        get { fieldLists?.noCache ?? [] }
        set { fieldLists = FieldLists.make(noCache: newValue, private: privateFields) }
    }
    public var noStore = false
    public var noTransform = false
    public var onlyIfCached = false
    public var mustRevalidate = false
    public var proxyRevalidate = false
    public var mustUnderstand = false
    public var `public` = false
    public var `private` = false
    /// Response `private="a, b"`: a shared cache stores the response without the named fields.
    public var privateFields: [[UInt8]] {
        get { fieldLists?.private ?? [] }
        set { fieldLists = FieldLists.make(noCache: noCacheFields, private: newValue) }
    }
    public var immutable = false
    public var staleWhileRevalidate: Int64?
    public var staleIfError: Int64?
    /// A freshness directive was repeated with different values or had an invalid value; the
    /// response is then treated as stale (RFC 9111 §4.2.1).
    public var conflictingFreshness = false
    /// The two lists of field names, boxed, and only where a response names fields: every
    /// request's facts are copied a few times, and two arrays in them cost two reference counts
    /// per copy, where no box costs none.
    private var fieldLists: FieldLists?

    public init() {}

    /// Parses every Cache-Control field of `headers` (and Pragma for requests).
    ///
    /// Directive names are case-insensitive; arguments may be tokens or quoted strings (§5.2).
    /// `max-age` and `s-maxage` without a valid delta-seconds read as 0 and set
    /// `conflictingFreshness`, as do repeats with different values (the smallest is kept: the most
    /// restrictive, §4.2.1). Other numeric directives with an invalid value are ignored; repeats keep
    /// the most restrictive value. Values above 2^31 are clamped (§1.2.2). Unknown directives are ignored.
    public static func parse(_ headers: HeaderBlock, isRequest: Bool) -> CacheDirectives {
        var directives = CacheDirectives()
        var sawCacheControl = false
        var pragmaNoCache = false
        headers.storage.withUnsafeBytes { all in
            for field in headers.fields {
                let nameStart = field.name.start
                let nameEnd = nameStart + field.name.count
                let valueStart = field.value.start
                let valueEnd = valueStart + field.value.count
                if field.name.count == 13, equalsIgnoringCase(all, nameStart, nameEnd, "cache-control") {
                    sawCacheControl = true
                    directives.parseField(all, valueStart, valueEnd, isRequest: isRequest)
                } else if isRequest, field.name.count == 6, equalsIgnoringCase(all, nameStart, nameEnd, "pragma"),
                          listContains(all, valueStart, valueEnd, "no-cache") {
                    pragmaNoCache = true
                }
            }
        }
        // RFC 9111 §5.4: Pragma counts only when the request has no Cache-Control at all.
        if pragmaNoCache, !sawCacheControl { directives.noCache = true }
        return directives
    }

    /// One directive's argument, as found.
    private struct Argument {
        var start: Int
        var end: Int
        var quoted: Bool
        /// Well-formed: a token or a closed quoted string, nothing but whitespace after it.
        var valid: Bool
    }

    private mutating func parseField(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int, isRequest: Bool) {
        var i = start
        while i < end {
            while i < end, isOWS(p[i]) || p[i] == asciiComma { i += 1 }
            if i >= end { return }
            let nameStart = i
            while i < end, isTchar(p[i]) { i += 1 }
            let nameEnd = i
            while i < end, isOWS(p[i]) { i += 1 }
            var argument: Argument?
            if i < end, p[i] == asciiEquals {
                i += 1
                while i < end, isOWS(p[i]) { i += 1 }
                if i < end, p[i] == asciiQuote {
                    if let close = quotedStringEnd(p, i, end) {
                        argument = Argument(start: i + 1, end: close - 1, quoted: true, valid: true)
                        i = close
                    } else {
                        argument = Argument(start: i + 1, end: end, quoted: true, valid: false)
                        i = end
                    }
                } else {
                    let valueStart = i
                    while i < end, isTchar(p[i]) { i += 1 }
                    argument = Argument(start: valueStart, end: i, quoted: false, valid: i > valueStart)
                }
            }
            while i < end, isOWS(p[i]) { i += 1 }
            var wellFormed = nameEnd > nameStart
            if i < end, p[i] != asciiComma {
                // Junk after the directive: skip to the next element, quote-aware.
                wellFormed = false
                while i < end, p[i] != asciiComma {
                    i = p[i] == asciiQuote ? (quotedStringEnd(p, i, end) ?? end) : i + 1
                }
            }
            if nameEnd == nameStart { continue }
            if !wellFormed { argument?.valid = false }
            apply(p, nameStart, nameEnd, argument, isRequest: isRequest)
        }
    }

    private mutating func apply(_ p: UnsafeRawBufferPointer, _ s: Int, _ e: Int, _ argument: Argument?,
                                isRequest: Bool) {
        switch e - s {
        case 6:
            if equalsIgnoringCase(p, s, e, "public") { `public` = true }
        case 7:
            if equalsIgnoringCase(p, s, e, "max-age") {
                maxAge = mergeFreshness(maxAge, Self.seconds(p, argument))
            } else if equalsIgnoringCase(p, s, e, "private") {
                if isRequest || !appendFieldNames(p, argument, to: &privateFields) { `private` = true }
            }
        case 8:
            if equalsIgnoringCase(p, s, e, "s-maxage") {
                sMaxAge = mergeFreshness(sMaxAge, Self.seconds(p, argument))
            } else if equalsIgnoringCase(p, s, e, "no-cache") {
                if isRequest || !appendFieldNames(p, argument, to: &noCacheFields) { noCache = true }
            } else if equalsIgnoringCase(p, s, e, "no-store") {
                noStore = true
            }
        case 9:
            if equalsIgnoringCase(p, s, e, "max-stale") {
                mergeMaxStale(p, argument)
            } else if equalsIgnoringCase(p, s, e, "min-fresh") {
                if let value = Self.seconds(p, argument) { minFresh = max(minFresh ?? 0, value) }
            } else if equalsIgnoringCase(p, s, e, "immutable") {
                immutable = true
            }
        case 12:
            if equalsIgnoringCase(p, s, e, "no-transform") { noTransform = true }
        case 14:
            if equalsIgnoringCase(p, s, e, "only-if-cached") {
                onlyIfCached = true
            } else if equalsIgnoringCase(p, s, e, "stale-if-error") {
                if let value = Self.seconds(p, argument) { staleIfError = min(staleIfError ?? value, value) }
            }
        case 15:
            if equalsIgnoringCase(p, s, e, "must-revalidate") {
                mustRevalidate = true
            } else if equalsIgnoringCase(p, s, e, "must-understand") {
                mustUnderstand = true
            }
        case 16:
            if equalsIgnoringCase(p, s, e, "proxy-revalidate") { proxyRevalidate = true }
        case 22:
            if equalsIgnoringCase(p, s, e, "stale-while-revalidate"), let value = Self.seconds(p, argument) {
                staleWhileRevalidate = min(staleWhileRevalidate ?? value, value)
            }
        default:
            break
        }
    }

    /// The delta-seconds argument, nil when missing or invalid (RFC 9111 §5.2 accepts it quoted too).
    private static func seconds(_ p: UnsafeRawBufferPointer, _ argument: Argument?) -> Int64? {
        guard let argument, argument.valid else { return nil }
        return parseDeltaSeconds(p, argument.start, argument.end)
    }

    /// RFC 9111 §4.2.1: an invalid or repeated-and-different freshness directive makes the response
    /// stale; keep the smallest value (0 for an invalid one) and flag it.
    private mutating func mergeFreshness(_ current: Int64?, _ new: Int64?) -> Int64 {
        guard let new else {
            conflictingFreshness = true
            return 0
        }
        guard let current else { return new }
        if current != new { conflictingFreshness = true }
        return min(current, new)
    }

    /// `max-stale` alone allows any staleness; with a value, that much. Repeats: the most restrictive.
    private mutating func mergeMaxStale(_ p: UnsafeRawBufferPointer, _ argument: Argument?) {
        let new: Int64?
        if argument == nil {
            new = nil
        } else if let value = Self.seconds(p, argument) {
            new = value
        } else {
            return  // an invalid value allows nothing
        }
        switch maxStale {
        case .none: maxStale = .some(new)
        case .some(.none): maxStale = .some(new)
        case .some(.some(let current)): maxStale = .some(min(current, new ?? current))
        }
    }

    /// Appends the lowercased field names of a qualified `private="…"` / `no-cache="…"` (also the
    /// token form) to `list`. Returns false when there is no usable list: the directive then
    /// applies unqualified, the stricter reading.
    private func appendFieldNames(_ p: UnsafeRawBufferPointer, _ argument: Argument?, to list: inout [[UInt8]]) -> Bool {
        guard let argument else { return false }
        guard argument.valid else { return false }
        var appended = false
        var name: [UInt8] = []
        var i = argument.start
        func flush() {
            if !name.isEmpty {
                if !list.contains(name) { list.append(name) }
                appended = true
                name.removeAll()
            }
        }
        while i < argument.end {
            var b = p[i]
            if argument.quoted, b == asciiBackslash, i + 1 < argument.end {
                i += 1
                b = p[i]
            } else if b == asciiComma {
                flush()
                i += 1
                continue
            }
            if !isOWS(b) { name.append(asciiLower(b)) }
            i += 1
        }
        flush()
        return appended
    }
}

/// `CacheDirectives`' field-name lists: immutable, replaced whole when one changes.
private final class FieldLists: Sendable, Equatable {
    let noCache: [[UInt8]]
    let `private`: [[UInt8]]

    private init(noCache: [[UInt8]], private: [[UInt8]]) {
        self.noCache = noCache
        self.private = `private`
    }

    /// Nil when both are empty, so that directives without lists compare equal however they got so.
    static func make(noCache: [[UInt8]], private: [[UInt8]]) -> FieldLists? {
        noCache.isEmpty && `private`.isEmpty ? nil : FieldLists(noCache: noCache, private: `private`)
    }

    static func == (a: FieldLists, b: FieldLists) -> Bool { a.noCache == b.noCache && a.private == b.private }
}
