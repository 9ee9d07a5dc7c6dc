/// The HTTP answer the gateway gives the client for an FTP request: status, header fields and what
/// the body is. The caller writes the head (adding Date, Via, connection fields) and the body.
public struct FTPAnswer: Sendable, Equatable {
    /// One header field.
    public struct Field: Sendable, Equatable {
        public let name: String
        public let value: String

        /// A field; the session writes only values made of printable ASCII.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Where the body comes from.
    public enum Body: Sendable, Equatable {
        /// No body: a HEAD answer (its Content-Length, when present, is the GET's).
        case none
        /// These bytes, complete: error texts, redirects, listings.
        case bytes([UInt8])
        /// The data connection's bytes, relayed as they come; `length` is the Content-Length, nil
        /// when the server would not tell the size (then the body ends when the server closes).
        case stream(length: Int?)
    }

    public var status: HTTPStatus
    /// In the order to write them.
    public var fields: [Field]
    public var body: Body

    /// An answer as the session builds it; public so callers and tests can write their own.
    public init(status: HTTPStatus, fields: [Field], body: Body) {
        self.status = status
        self.fields = fields
        self.body = body
    }

    /// The value of the first field named `name` (any case), or nil.
    public func value(of name: String) -> String? {
        let wanted = name.lowercased()
        return fields.first { $0.name.lowercased() == wanted }?.value
    }
}
