import HTTPWire

/// Variants chosen by language (RFC 9110 §12.5.4, RFC 9111 §4.1): a response that varies on
/// `Accept-Language` alone and names one of the languages its request ranked highest is the variant
/// for every request that ranks that language highest, whatever else it lists or in what order. It
/// is stored under a key for that language rather than for the request's whole field, and a
/// request that misses its own key looks for its top languages' keys.
///
/// Only fields made entirely of well-formed language ranges and weights take part, at most
/// `maxElements` of them (`*`, a malformed element or a longer list: the request's own key only),
/// so a client can neither put bytes of its choosing under a shared key nor make the parse costly.
public enum LanguageVariant {
    static let fieldName: [UInt8] = Array("accept-language".utf8)
    /// Fields with more elements than this take no part.
    public static let maxElements = 32
    /// At most this many top languages are looked for on a miss.
    public static let maxLookups = 4

    /// Whether `varyFields` (lower-case names) select by `Accept-Language` alone.
    public static func applies(to varyFields: [[UInt8]]) -> Bool {
        varyFields.count == 1 && varyFields[0] == fieldName
    }

    /// The key `response` is stored under instead of the request's own, or nil.
    public static func storedKey(varyFields: [[UInt8]], request: HeaderBlock, response: HeaderBlock) -> [UInt8]? {
        guard applies(to: varyFields), let language = contentLanguage(response),
              let top = highestRanked(request), top.contains(language) else { return nil }
        return key(for: language)
    }

    /// The keys to look for when `request` missed its own: its top languages' (equal weights say
    /// each is as acceptable as the others, RFC 9110 §12.4.2), at most `maxLookups`.
    public static func lookupKeys(request: HeaderBlock) -> [[UInt8]] {
        (highestRanked(request) ?? []).prefix(maxLookups).map(key(for:))
    }

    /// `accept-language NUL SOH "=" language NUL`: a request's own key holds no SOH but alone, for
    /// an absent field (`CacheKey.secondary`), so the two never meet.
    static func key(for language: [UInt8]) -> [UInt8] {
        fieldName + [0x00, 0x01, 0x3D] + language + [0x00]
    }

    /// The one language tag of a single `Content-Language` field, lower-cased; nil for none, several
    /// or anything that is not a plain tag (letters, digits, `-`).
    static func contentLanguage(_ headers: HeaderBlock) -> [UInt8]? {
        headers.withOnlyValue("content-language") { v -> [UInt8]? in
            var s = 0, e = v.count
            while s < e, isOWS(v[s]) { s += 1 }
            while e > s, isOWS(v[e - 1]) { e -= 1 }
            let tag = v[s..<e]
            let plain = !tag.isEmpty && tag.count <= 64 && tag.allSatisfy { isAlpha($0) || isDigit($0) || $0 == 0x2D }
            return plain ? tag.map(asciiLower) : nil
        } ?? nil
    }

    /// The language ranges of `Accept-Language` with the highest `q` above 0, lower-cased, in the
    /// order sent. Nil when the field is absent, has an element that is not a language range with
    /// an optional weight, has `*` (which could rank any language as high), or has more than
    /// `maxElements` elements.
    static func highestRanked(_ headers: HeaderBlock) -> [[UInt8]]? {
        var best = 0
        var ranges: [[UInt8]] = []
        var elements = 0
        var usable = true
        headers.storage.withUnsafeBytes { all in
            for f in headers.fields
            where usable && equalsIgnoringCase(all, f.name.start, f.name.start + f.name.count, "accept-language") {
                forEachListElement(all, f.value.start, f.value.start + f.value.count) { s, e in
                    elements += 1
                    var rangeEnd = s
                    while rangeEnd < e, all[rangeEnd] != 0x3B { rangeEnd += 1 }
                    var trimmed = rangeEnd
                    while trimmed > s, isOWS(all[trimmed - 1]) { trimmed -= 1 }
                    let range = all[s..<trimmed]
                    guard elements <= maxElements, !range.isEmpty, range.count <= 64,
                          range.allSatisfy({ isAlpha($0) || isDigit($0) || $0 == 0x2D }),
                          let q = weight(all, rangeEnd, e) else {
                        usable = false
                        return false
                    }
                    if q == 0 { return true }
                    if q > best {
                        best = q
                        ranges.removeAll()
                    }
                    let lowered = range.map(asciiLower)
                    if q == best, !ranges.contains(lowered) { ranges.append(lowered) }
                    return true
                }
            }
        }
        return usable && elements > 0 ? ranges : nil
    }

    /// The `q` of the parameters in `p[start..<end]` (`; q=0.5`), in thousandths: 1000 when there is
    /// none, nil when malformed (RFC 9110 §12.4.2: `0[.ddd]` or `1[.000]`).
    static func weight(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int? {
        var i = start
        while i < end, p[i] != 0x3B { i += 1 }
        guard i < end else { return 1000 }
        i += 1
        while i < end, isOWS(p[i]) { i += 1 }
        guard i + 2 <= end, p[i] | 0x20 == 0x71, p[i + 1] == 0x3D else { return nil }  // "q="
        i += 2
        var e = end
        while e > i, isOWS(p[e - 1]) { e -= 1 }
        guard i < e, p[i] == 0x30 || p[i] == 0x31 else { return nil }
        let whole = Int(p[i] - 0x30)
        var thousandths = 0
        var digits = 0
        var j = i + 1
        if j < e {
            guard p[j] == 0x2E else { return nil }
            j += 1
            while j < e {
                guard isDigit(p[j]), digits < 3 else { return nil }
                thousandths = thousandths * 10 + Int(p[j] - 0x30)
                digits += 1
                j += 1
            }
        }
        while digits < 3 {
            thousandths *= 10
            digits += 1
        }
        let q = whole * 1000 + thousandths
        return q <= 1000 ? q : nil
    }
}
