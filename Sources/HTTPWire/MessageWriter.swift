/// Builds heads and chunk framing into reusable bytes without `String`.
///
/// The bytes live in a buffer of its own rather than an array: a head is some twenty small
/// appends, and `Array.append(contentsOf:)` costs about a hundred instructions each where a
/// capacity check and a `memcpy` cost a fifth of that. Copies share the buffer until one of them
/// writes (copy on write), as an array would.
public struct MessageWriter: @unchecked Sendable {
    @usableFromInline var storage: WriterStorage
    @usableFromInline var written = 0

    public init(capacity: Int = 1_024) {
        storage = WriterStorage(capacity: Swift.max(capacity, 16))
    }

    /// Bytes written so far.
    @inlinable public var count: Int { written }

    /// A copy of the bytes written (for callers that keep them).
    public var bytes: [UInt8] { withBytes { Array($0) } }

    /// The bytes written, valid only inside `body`.
    @inlinable public func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(view)
    }

    @usableFromInline var view: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage.base, count: written) }

    /// The buffer's size: what the writer holds before it has to grow.
    public var capacity: Int { storage.capacity }

    /// Empties the writer, keeping its capacity.
    public mutating func reset() { written = 0 }

    /// Drops what was written after the first `count` bytes, keeping the capacity.
    public mutating func truncate(to count: Int) {
        precondition(count >= 0 && count <= written, "truncated to more than was written")
        written = count
    }

    // The appends are inlinable: a head is some twenty of them, and a call for each (most of them
    // a few bytes of a literal, copied by a `memcpy` call of its own) showed in the instruction gates.

    @inlinable @inline(__always)
    public mutating func append(_ text: StaticString) {
        if text.hasPointerRepresentation {
            append(UnsafeRawPointer(text.utf8Start), count: text.utf8CodeUnitCount)
        } else {
            text.withUTF8Buffer { append(UnsafeRawBufferPointer($0)) }
        }
    }
    @inlinable @inline(__always)
    public mutating func append(_ raw: UnsafeRawBufferPointer) {
        guard let base = raw.baseAddress else { return }
        append(base, count: raw.count)
    }
    @inlinable
    public mutating func append(_ raw: [UInt8]) { raw.withUnsafeBytes { append($0) } }
    /// Not `append(_: String)`: with both overloads a literal would pick `String` (the default
    /// literal type) and pay for a string copy on every call.
    public mutating func appendString(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }
    @inlinable @inline(__always)
    public mutating func append(byte: UInt8) {
        reserve(1)
        storage.base.storeBytes(of: byte, toByteOffset: written, as: UInt8.self)
        written &+= 1
    }

    @inlinable @inline(__always)
    mutating func append(_ source: UnsafeRawPointer, count n: Int) {
        guard n > 0 else { return }
        reserve(n)
        (storage.base + written).copyMemory(from: source, byteCount: n)
        written &+= n
    }

    /// Room for `n` more bytes in a buffer this writer alone holds.
    @inlinable @inline(__always)
    mutating func reserve(_ n: Int) {
        let needed = written &+ n
        if _slowPath(!isKnownUniquelyReferenced(&storage) || needed > storage.capacity) { grow(to: needed) }
    }

    @usableFromInline mutating func grow(to needed: Int) {
        storage = storage.copy(count: written, capacity: Swift.max(needed, storage.capacity * 2))
    }

    /// Decimal digits of `value`, with a leading `-` when negative.
    public mutating func appendDecimal(_ value: Int) {
        if value < 0 { append(byte: 0x2D) }
        appendDigits(value.magnitude, radix: 10)
    }

    /// Lowercase hex digits of `value` (no prefix); `value` must not be negative.
    public mutating func appendHex(_ value: Int) {
        precondition(value >= 0, "appendHex of a negative value")
        appendDigits(value.magnitude, radix: 16)
    }

    /// Writes the digits in place, last first, after counting them.
    @inline(__always) private mutating func appendDigits(_ value: UInt, radix: UInt) {
        var digits = 1
        var rest = value / radix
        while rest > 0 { digits &+= 1; rest /= radix }
        reserve(digits)
        var at = storage.base + written + digits
        rest = value
        repeat {
            let d = UInt8(truncatingIfNeeded: rest % radix)
            at -= 1
            at.storeBytes(of: d < 10 ? 0x30 &+ d : 0x61 &+ (d &- 10), as: UInt8.self)
            rest /= radix
        } while rest > 0
        written &+= digits
    }

    /// `name: value\r\n`.
    public mutating func appendField(_ name: StaticString, _ value: StaticString) {
        append(name)
        append(": ")
        append(value)
        append("\r\n")
    }
    /// Copies field `index` of `headers` as it arrived: `name: value\r\n`.
    public mutating func appendField(at index: Int, of headers: HeaderBlock) {
        let field = headers.fields[index]
        headers.storage.withUnsafeBytes { all in
            let nameEnd = field.name.start + field.name.count
            let valueEnd = field.value.start + field.value.count
            // Most lines arrive as exactly `name: value\r\n`: copied in one piece.
            if field.value.start == nameEnd + 2, all[nameEnd] == 0x3A, all[nameEnd + 1] == 0x20,
               valueEnd + 2 <= all.count, all[valueEnd] == 0x0D, all[valueEnd + 1] == 0x0A {
                append(UnsafeRawBufferPointer(rebasing: all[field.name.start..<(valueEnd + 2)]))
                return
            }
            append(UnsafeRawBufferPointer(rebasing: all[field.name.start..<nameEnd]))
            append(": ")
            append(UnsafeRawBufferPointer(rebasing: all[field.value.start..<valueEnd]))
            append("\r\n")
        }
    }

    /// `HTTP/1.1 <status> <reason>\r\n`.
    public mutating func appendStatusLine(_ status: Int, reason: StaticString) {
        append("HTTP/1.1 ")
        appendDecimal(status)
        append(" ")
        append(reason)
        append("\r\n")
    }

    /// Chunked coding: `<hex size>\r\n` before a chunk of `size` bytes (size > 0).
    public mutating func appendChunkHeader(size: Int) {
        appendHex(size)
        append("\r\n")
    }
}

/// The bytes of a `MessageWriter`: one allocation, freed with the last writer that shares it.
@usableFromInline final class WriterStorage {
    @usableFromInline let base: UnsafeMutableRawPointer
    @usableFromInline let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    func copy(count: Int, capacity: Int) -> WriterStorage {
        let fresh = WriterStorage(capacity: capacity)
        if count > 0 { fresh.base.copyMemory(from: base, byteCount: count) }
        return fresh
    }
}

/// Fixed framing bytes of the chunked coding.
public enum ChunkedFraming {
    /// Follows each chunk's data.
    public static let chunkEnd: StaticString = "\r\n"
    /// The last chunk with an empty trailer section.
    public static let lastChunk: StaticString = "0\r\n\r\n"
}

/// The reason phrase we write for a status code we generate (unknown codes get "Unknown").
/// Phrases are those of RFC 9110 §15 (and RFC 8297, RFC 6585, RFC 7725, RFC 4918 where they define the code).
public func reasonPhrase(for status: Int) -> StaticString {
    switch status {
    case 100: return "Continue"
    case 101: return "Switching Protocols"
    case 102: return "Processing"
    case 103: return "Early Hints"
    case 200: return "OK"
    case 201: return "Created"
    case 202: return "Accepted"
    case 203: return "Non-Authoritative Information"
    case 204: return "No Content"
    case 205: return "Reset Content"
    case 206: return "Partial Content"
    case 300: return "Multiple Choices"
    case 301: return "Moved Permanently"
    case 302: return "Found"
    case 303: return "See Other"
    case 304: return "Not Modified"
    case 305: return "Use Proxy"
    case 306: return "Unused"
    case 307: return "Temporary Redirect"
    case 308: return "Permanent Redirect"
    case 400: return "Bad Request"
    case 401: return "Unauthorized"
    case 402: return "Payment Required"
    case 403: return "Forbidden"
    case 404: return "Not Found"
    case 405: return "Method Not Allowed"
    case 406: return "Not Acceptable"
    case 407: return "Proxy Authentication Required"
    case 408: return "Request Timeout"
    case 409: return "Conflict"
    case 410: return "Gone"
    case 411: return "Length Required"
    case 412: return "Precondition Failed"
    case 413: return "Content Too Large"
    case 414: return "URI Too Long"
    case 415: return "Unsupported Media Type"
    case 416: return "Range Not Satisfiable"
    case 417: return "Expectation Failed"
    case 418: return "I'm a teapot"
    case 421: return "Misdirected Request"
    case 422: return "Unprocessable Content"
    case 423: return "Locked"
    case 424: return "Failed Dependency"
    case 425: return "Too Early"
    case 426: return "Upgrade Required"
    case 428: return "Precondition Required"
    case 429: return "Too Many Requests"
    case 431: return "Request Header Fields Too Large"
    case 451: return "Unavailable For Legal Reasons"
    case 500: return "Internal Server Error"
    case 501: return "Not Implemented"
    case 502: return "Bad Gateway"
    case 503: return "Service Unavailable"
    case 504: return "Gateway Timeout"
    case 505: return "HTTP Version Not Supported"
    case 511: return "Network Authentication Required"
    default: return "Unknown"
    }
}
