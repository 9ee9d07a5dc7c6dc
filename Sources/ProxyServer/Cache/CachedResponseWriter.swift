import CachePolicy
import HTTPWire

/// Heads for responses served from the cache. A stored head is the status line and end-to-end
/// fields as they will be sent (Content-Length included); each response adds `Age`,
/// `Cache-Status`, `Via` and connection management.
enum CachedResponseWriter {
    static func full(storedHead: [UInt8], age: Int64, cacheStatus: CacheStatusField,
                     keepAlive: Bool, clientVersion: HTTPVersion, viaName: [UInt8], personal: [UInt8] = [],
                     into w: inout MessageWriter) {
        w.append(withoutBlankLine(storedHead))
        trailer(age: age, cacheStatus: cacheStatus, keepAlive: keepAlive,
                clientVersion: clientVersion, viaName: viaName, personal: personal, into: &w)
    }

    /// 304 to a client whose conditional the stored entry satisfies: the fields RFC 9110 §15.4.5
    /// requires, taken from the stored head.
    static func notModified(storedHead: ResponseHead, age: Int64, cacheStatus: CacheStatusField,
                            keepAlive: Bool, clientVersion: HTTPVersion, viaName: [UInt8], personal: [UInt8] = [],
                            into w: inout MessageWriter) {
        w.append("HTTP/1.1 304 Not Modified\r\n")
        let headers = storedHead.headers
        for i in 0..<headers.count
        where headers.nameEquals(at: i, "cache-control") || headers.nameEquals(at: i, "content-location")
            || headers.nameEquals(at: i, "date") || headers.nameEquals(at: i, "etag")
            || headers.nameEquals(at: i, "expires") || headers.nameEquals(at: i, "vary")
            || headers.nameEquals(at: i, "last-modified") {
            w.appendField(at: i, of: headers)
        }
        trailer(age: age, cacheStatus: cacheStatus, keepAlive: keepAlive,
                clientVersion: clientVersion, viaName: viaName, personal: personal, into: &w)
    }

    /// 206 for one range of the stored body.
    static func partial(storedHead: ResponseHead, start: Int, end: Int, length: Int, age: Int64,
                        cacheStatus: CacheStatusField, keepAlive: Bool, clientVersion: HTTPVersion,
                        viaName: [UInt8], personal: [UInt8] = [], into w: inout MessageWriter) {
        w.append("HTTP/1.1 206 Partial Content\r\n")
        let headers = storedHead.headers
        for i in 0..<headers.count
        where !headers.nameEquals(at: i, "content-length") && !headers.nameEquals(at: i, "content-range") {
            w.appendField(at: i, of: headers)
        }
        w.append("Content-Range: bytes ")
        w.appendDecimal(start)
        w.append("-")
        w.appendDecimal(end)
        w.append("/")
        w.appendDecimal(length)
        w.append("\r\nContent-Length: ")
        w.appendDecimal(end - start + 1)
        w.append("\r\n")
        trailer(age: age, cacheStatus: cacheStatus, keepAlive: keepAlive,
                clientVersion: clientVersion, viaName: viaName, personal: personal, into: &w)
    }

    /// 416 for a range outside the stored body.
    static func unsatisfiable(length: Int, cacheStatus: CacheStatusField, keepAlive: Bool,
                              clientVersion: HTTPVersion, viaName: [UInt8], into w: inout MessageWriter) {
        w.append("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */")
        w.appendDecimal(length)
        w.append("\r\nContent-Length: 0\r\n")
        trailer(age: nil, cacheStatus: cacheStatus, keepAlive: keepAlive,
                clientVersion: clientVersion, viaName: viaName, into: &w)
    }

    /// `personal`: complete field lines for this response only (a revalidation answer's `Set-Cookie`
    /// for the client whose request triggered it), never stored.
    private static func trailer(age: Int64?, cacheStatus: CacheStatusField, keepAlive: Bool,
                                clientVersion: HTTPVersion, viaName: [UInt8], personal: [UInt8] = [],
                                into w: inout MessageWriter) {
        w.append(personal)
        if let age {
            w.append("Age: ")
            w.appendDecimal(Int(min(age, Int64(Int32.max))))
            w.append("\r\n")
        }
        ResponseHeadWriter.appendCacheStatus(cacheStatus, into: &w)
        w.append("Via: 1.1 ")
        w.append(viaName)
        w.append("\r\n")
        ResponseHeadWriter.appendConnection(keepAlive: keepAlive, clientVersion: clientVersion, into: &w)
        w.append("\r\n")
    }

    /// A stored head parsed for its fields (revalidation, 304 and 206 only; hits send the bytes).
    static func parse(_ bytes: [UInt8]) -> ResponseHead? { StoredHead.parse(bytes) }

    /// The stored head without a final empty line, should it carry one (its last four bytes read
    /// directly: a generic compare against a stored suffix cost about 150 instructions a hit).
    static func withoutBlankLine(_ head: [UInt8]) -> ArraySlice<UInt8> {
        let n = head.count
        let endsBlank = n >= 4 && head[n - 4] == 13 && head[n - 3] == 10 && head[n - 2] == 13 && head[n - 1] == 10
        return endsBlank ? head[..<(n - 2)] : head[...]
    }
}

extension MessageWriter {
    mutating func append(_ slice: ArraySlice<UInt8>) {
        slice.withUnsafeBytes { append($0) }
    }
}
