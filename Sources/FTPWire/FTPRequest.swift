/// One byte range of a file, `start-` or `start-end` (inclusive), as a client's single Range
/// asks for it; which Range fields qualify is the caller's decision.
public struct FTPByteRange: Sendable, Equatable {
    /// The first byte wanted.
    public let start: Int
    /// The last byte wanted; nil for "to the end".
    public let end: Int?

    /// Nil for a negative start or an end before the start.
    public init?(start: Int, end: Int? = nil) {
        guard start >= 0, end.map({ $0 >= start }) ?? true else { return nil }
        self.start = start
        self.end = end
    }
}

/// What the gateway's session is asked to do: one GET or HEAD of an `ftp://` URL.
public struct FTPRequest: Sendable {
    /// The HTTP methods the gateway serves; anything else is refused before a session starts.
    public enum Method: Sendable, Equatable {
        case get, head
    }

    public var method: Method
    /// The target; its credentials are not used here (see `credentials`).
    public var url: FTPURL
    /// The login (see `FTPCredentials.forRequest`); unused on a reused connection.
    public var credentials: FTPCredentials
    /// A single range to serve with REST, GET only (HEAD ignores ranges, RFC 9110 §14.2).
    public var range: FTPByteRange?
    /// The control connection is already logged in with these credentials and in binary mode
    /// (it came from the pool): no greeting, login or TYPE.
    public var isReusedConnection: Bool
    /// The caller's clock, only to date LIST entries that show a time instead of a year.
    public var now: Int64?
    /// `If-Modified-Since`, read (`HTTPDate.parse`): a GET of a file not modified since is
    /// answered `304` after its MDTM, without a transfer (a cache revalidating with a conditional
    /// GET).
    public var ifModifiedSince: Int64?

    /// A request; `now` is optional because only LIST dates need it.
    public init(method: Method, url: FTPURL, credentials: FTPCredentials, range: FTPByteRange? = nil,
                isReusedConnection: Bool = false, now: Int64? = nil) {
        self.method = method
        self.url = url
        self.credentials = credentials
        self.range = range
        self.isReusedConnection = isReusedConnection
        self.now = now
    }
}
