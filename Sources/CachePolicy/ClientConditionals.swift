import HTTPWire

public enum ClientConditionals {
    /// Whether a GET/HEAD request's `If-None-Match` (weak comparison; `*` matches) or, without it,
    /// `If-Modified-Since` (Last-Modified not later) is satisfied by the stored entry, so the cache
    /// answers 304 (RFC 9110 §13.1, §13.2.2).
    ///
    /// Only for stored 2xx responses (§13.2.1). Without Last-Modified, If-Modified-Since compares the
    /// entry's Date (the time it was received when it had none), as RFC 9111 §4.3.2 says. An invalid
    /// date is ignored.
    public static func notModified(request: RequestHead, entry: EntryFacts) -> Bool {
        guard request.method == .get || request.method == .head, entry.status >= 200, entry.status < 300 else {
            return false
        }
        let headers = request.headers
        if headers.has("if-none-match") {
            guard let stored = entry.etag else {
                return headers.storage.withUnsafeBytes { all in anyNoneMatchIsStar(headers, all) }
            }
            return stored.withUnsafeBytes { storedTag in
                headers.storage.withUnsafeBytes { all in noneMatchList(headers, all, matches: storedTag) }
            }
        }
        guard let since = headers.withFirstValue("if-modified-since", { HTTPDate.parse($0, now: entry.responseTime) }) ?? nil
        else { return false }
        return (entry.lastModified ?? entry.dateValue) <= since
    }

    /// Whether any If-None-Match element is `*` or weakly matches `storedTag`.
    private static func noneMatchList(_ headers: HeaderBlock, _ all: UnsafeRawBufferPointer,
                                      matches storedTag: UnsafeRawBufferPointer) -> Bool {
        var matched = false
        for field in headers.fields
        where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, "if-none-match") {
            forEachListElement(all, field.value.start, field.value.start + field.value.count) { s, e in
                let element = UnsafeRawBufferPointer(rebasing: all[s..<e])
                if (e - s == 1 && all[s] == 0x2A) || EntityTag.compare(element, storedTag) != .different {
                    matched = true
                    return false
                }
                return true
            }
            if matched { break }
        }
        return matched
    }

    private static func anyNoneMatchIsStar(_ headers: HeaderBlock, _ all: UnsafeRawBufferPointer) -> Bool {
        for field in headers.fields
        where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, "if-none-match")
            && field.value.count == 1 && all[field.value.start] == 0x2A {
            return true
        }
        return false
    }
}
