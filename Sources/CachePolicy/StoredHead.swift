import HTTPWire

/// The head to store for a new response: status line and end-to-end fields, without hop-by-hop
/// fields, framing (Transfer-Encoding; Content-Length is rewritten to `bodyLength`), `Age`,
/// `Set-Cookie` (a shared cache never hands one client's cookie to another; RFC 9111 §3.1 lets a
/// cache drop fields), and `omitFields`. Serialized, ready to be sent after adding `Age`.
public enum StoredHead {
    /// Content-Length comes last; a 204 gets none (RFC 9110 §8.6 forbids it there).
    public static func make(response: ResponseHead, bodyLength: Int, omitFields: [[UInt8]]) -> [UInt8] {
        let headers = response.headers
        var w = MessageWriter(capacity: headers.storage.count + 32)
        HeadSerialization.appendStatusLine(of: response, to: &w)
        let listsOthers = headers.connectionListsOtherFields
        for i in 0..<headers.count
        where !HeadSerialization.isNeverStored(headers, at: i, connectionListsOtherFields: listsOthers)
            && !headers.nameIsListed(at: i, in: omitFields) {
            w.appendField(at: i, of: headers)
        }
        if response.status != 204 {
            w.append("Content-Length: ")
            w.appendDecimal(bodyLength)
            w.append("\r\n")
        }
        w.append("\r\n")
        return w.bytes
    }
}

extension StoredHead {
    /// A stored (or rebuilt) head parsed for its fields; the final empty line may be left out.
    public static func parse(_ bytes: [UInt8]) -> ResponseHead? {
        var full = bytes
        let ends = full.count >= 4 && full[(full.count - 4)...].elementsEqual([13, 10, 13, 10])
        if !ends { full.append(contentsOf: [13, 10]) }
        var head = ResponseHead()
        let parsed = full.withUnsafeBytes { raw -> Int? in
            do throws(HTTPWireError) {
                return try ResponseParser.parse(raw, into: &head, requestMethod: .get,
                                                limits: HeadLimits(maxHeadBytes: 1 << 20, maxHeaderCount: 1_000))
            } catch {
                return nil
            }
        }
        return parsed == nil ? nil : head
    }
}
