/// A span of bytes inside a head's storage, by offset, so heads can be reused without reallocating.
public struct ByteRange: Sendable, Equatable {
    public var start: Int
    public var count: Int
    public init(start: Int, count: Int) { self.start = start; self.count = count }
    public static let empty = ByteRange(start: 0, count: 0)
}

/// One field line: its name and its value with surrounding whitespace removed.
public struct HeaderField: Sendable, Equatable {
    public var name: ByteRange
    public var value: ByteRange
    public init(name: ByteRange, value: ByteRange) { self.name = name; self.value = value }
}

/// Request methods the proxy treats specially; anything else is `.other` and passed through.
public enum HTTPMethod: Sendable, Equatable {
    case get, head, post, put, delete, connect, options, trace, patch
    case other
}

public struct HTTPVersion: Sendable, Equatable {
    public var major: UInt8
    public var minor: UInt8
    public init(major: UInt8, minor: UInt8) { self.major = major; self.minor = minor }
    public static let http10 = HTTPVersion(major: 1, minor: 0)
    public static let http11 = HTTPVersion(major: 1, minor: 1)
}

/// How a message body is delimited (RFC 9112 §6.3).
public enum BodyFraming: Sendable, Equatable {
    /// No body at all (also: HEAD responses, 1xx, 204, 304).
    case none
    /// Exactly this many bytes.
    case contentLength(Int)
    /// Chunked transfer coding, final coding.
    case chunked
    /// Responses only: the body runs until the connection closes.
    case untilClose
}
