import CachePolicy
import HTTPWire

/// Heads for responses served from the cache. A stored head is the status line and end-to-end
/// fields as they will be sent (Content-Length included); each response adds `Age`,
/// `Cache-Status`, `Via` and connection management.
enum CachedResponseWriter {
    static func full(storedHead: [UInt8], age: Int64, cacheStatus: [UInt8], keepAlive: Bool,
                     clientVersion: HTTPVersion, viaName: [UInt8], into w: inout MessageWriter) {
        w.append(withoutBlankLine(storedHead))
        trailer(age: age, cacheStatus: cacheStatus, keepAlive: keepAlive, clientVersion: clientVersion,
                viaName: viaName, into: &w)
    }

    /// 304 to a client whose conditional the stored entry satisfies: the fields RFC 9110 §15.4.5
    /// requires, taken from the stored head.
    static func notModified(storedHead: [UInt8], age: Int64, cacheStatus: [UInt8], keepAlive: Bool,
                            clientVersion: HTTPVersion, viaName: [UInt8], into w: inout MessageWriter) {
        w.append("HTTP/1.1 304 Not Modified\r\n")
        forEachStoredField(storedHead) { name, line in
            if ["cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified"].contains(name) {
                w.append(line)
            }
        }
        trailer(age: age, cacheStatus: cacheStatus, keepAlive: keepAlive, clientVersion: clientVersion,
                viaName: viaName, into: &w)
    }

    /// 206 for one range of the stored body.
    static func partial(storedHead: [UInt8], start: Int, end: Int, length: Int, age: Int64, cacheStatus: [UInt8],
                        keepAlive: Bool, clientVersion: HTTPVersion, viaName: [UInt8], into w: inout MessageWriter) {
        w.append("HTTP/1.1 206 Partial Content\r\n")
        forEachStoredField(storedHead) { name, line in
            if name != "content-length" && name != "content-range" { w.append(line) }
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
        trailer(age: age, cacheStatus: cacheStatus, keepAlive: keepAlive, clientVersion: clientVersion,
                viaName: viaName, into: &w)
    }

    /// 416 for a range outside the stored body.
    static func unsatisfiable(length: Int, cacheStatus: [UInt8], keepAlive: Bool, clientVersion: HTTPVersion,
                              viaName: [UInt8], into w: inout MessageWriter) {
        w.append("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */")
        w.appendDecimal(length)
        w.append("\r\nContent-Length: 0\r\n")
        trailer(age: nil, cacheStatus: cacheStatus, keepAlive: keepAlive, clientVersion: clientVersion,
                viaName: viaName, into: &w)
    }

    private static func trailer(age: Int64?, cacheStatus: [UInt8], keepAlive: Bool, clientVersion: HTTPVersion,
                                viaName: [UInt8], into w: inout MessageWriter) {
        if let age {
            w.append("Age: ")
            w.appendDecimal(Int(min(age, Int64(Int32.max))))
            w.append("\r\n")
        }
        w.append("Cache-Status: ")
        w.append(cacheStatus)
        w.append("\r\nVia: 1.1 ")
        w.append(viaName)
        w.append("\r\n")
        if !keepAlive {
            w.append("Connection: close\r\n")
        } else if clientVersion == .http10 {
            w.append("Connection: keep-alive\r\n")
        }
        w.append("\r\n")
    }

    /// The stored head without a final empty line, should it carry one.
    private static func withoutBlankLine(_ head: [UInt8]) -> ArraySlice<UInt8> {
        let n = head.count
        if n >= 4, head[n - 4] == 13, head[n - 3] == 10, head[n - 2] == 13, head[n - 1] == 10 {
            return head[..<(n - 2)]
        }
        return head[...]
    }

    /// Each field line after the status line, with its lowercased name (rare paths only: 304, 206).
    private static func forEachStoredField(_ head: [UInt8], _ body: (String, ArraySlice<UInt8>) -> Void) {
        let text = withoutBlankLine(head)
        var lineStart = text.startIndex
        var first = true
        var i = text.startIndex
        while i < text.endIndex {
            if text[i] == 10 {
                let line = text[lineStart...i]
                if !first, let colon = line.firstIndex(of: UInt8(ascii: ":")) {
                    body(String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased(), line)
                }
                first = false
                lineStart = i + 1
            }
            i += 1
        }
    }
}

extension MessageWriter {
    mutating func append(_ slice: ArraySlice<UInt8>) {
        slice.withUnsafeBytes { append($0) }
    }
}
