import HTTPWire

/// RFC 9213 targeted cache control: fields such as `CDN-Cache-Control` that an origin addresses to
/// the caches in front of it. A cache with a target list uses the first listed field present with
/// a non-empty value, instead of `Cache-Control` and `Expires`, for its own freshness and
/// storability; the fields themselves reach clients unchanged.
public enum TargetedCacheControl {
    /// The head the cache's decisions read: `response` with its `Cache-Control` and `Expires` fields
    /// replaced by the chosen targeted field's value as `Cache-Control`. Nil when no listed field
    /// applies (decide on `response` itself). `targets` are lower-case field names, in order.
    public static func policyHead(of response: ResponseHead, targets: [[UInt8]]) -> ResponseHead? {
        guard !targets.isEmpty, let chosen = chosenValue(response.headers, targets: targets) else { return nil }
        let headers = response.headers
        var w = MessageWriter(capacity: headers.storage.count + 32)
        HeadSerialization.appendStatusLine(of: response, to: &w)
        for i in 0..<headers.count
        where !headers.nameEquals(at: i, "cache-control") && !headers.nameEquals(at: i, "expires") {
            w.appendField(at: i, of: headers)
        }
        w.append("Cache-Control: ")
        w.append(chosen)
        w.append("\r\n\r\n")
        return StoredHead.parse(w.bytes)
    }

    /// The value of the first listed field present with a non-empty value (all its lines, joined
    /// as one list).
    static func chosenValue(_ headers: HeaderBlock, targets: [[UInt8]]) -> [UInt8]? {
        for target in targets {
            var value: [UInt8] = []
            headers.storage.withUnsafeBytes { all in
                for field in headers.fields where field.name.count == target.count {
                    let name = UnsafeRawBufferPointer(rebasing: all[field.name.start..<field.name.start + field.name.count])
                    guard equalsLowercased(name, target) else { continue }
                    let v = trimmed(UnsafeRawBufferPointer(rebasing: all[field.value.start..<field.value.start + field.value.count]))
                    guard !v.isEmpty else { continue }
                    if !value.isEmpty { value.append(contentsOf: Array(", ".utf8)) }
                    value.append(contentsOf: v)
                }
            }
            if !value.isEmpty { return value }
        }
        return nil
    }

    private static func equalsLowercased(_ a: UnsafeRawBufferPointer, _ lower: [UInt8]) -> Bool {
        for i in 0..<a.count {
            var b = a[i]
            if b >= 65 && b <= 90 { b += 32 }
            if b != lower[i] { return false }
        }
        return true
    }

    private static func trimmed(_ v: UnsafeRawBufferPointer) -> [UInt8] {
        var s = 0
        var e = v.count
        while s < e, v[s] == 32 || v[s] == 9 { s += 1 }
        while e > s, v[e - 1] == 32 || v[e - 1] == 9 { e -= 1 }
        return Array(v[s..<e])
    }
}
