/// Bounds on what the head parsers accept; exceeding one is a named error, never unbounded memory.
public struct HeadLimits: Sendable, Equatable {
    /// Whole head, start line to the empty line inclusive.
    public var maxHeadBytes: Int
    /// Number of header field lines.
    public var maxHeaderCount: Int
    /// Request line including CRLF; longer means `requestLineTooLong` (414).
    public var maxRequestLineBytes: Int

    public init(maxHeadBytes: Int = 65_536, maxHeaderCount: Int = 100, maxRequestLineBytes: Int = 8_192) {
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxRequestLineBytes = maxRequestLineBytes
    }
}
