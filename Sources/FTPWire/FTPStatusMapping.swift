/// An HTTP status code and its reason phrase.
public struct HTTPStatus: Sendable, Equatable {
    public let code: Int
    public let reason: String

    /// A status and its reason phrase.
    public init(_ code: Int, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    // The statuses the gateway answers with.
    public static let ok = HTTPStatus(200, "OK")
    public static let partialContent = HTTPStatus(206, "Partial Content")
    public static let movedPermanently = HTTPStatus(301, "Moved Permanently")
    public static let notModified = HTTPStatus(304, "Not Modified")
    public static let badRequest = HTTPStatus(400, "Bad Request")
    public static let unauthorized = HTTPStatus(401, "Unauthorized")
    public static let notFound = HTTPStatus(404, "Not Found")
    public static let rangeNotSatisfiable = HTTPStatus(416, "Range Not Satisfiable")
    public static let badGateway = HTTPStatus(502, "Bad Gateway")
    public static let serviceUnavailable = HTTPStatus(503, "Service Unavailable")
}

/// What an FTP failure reply means for the HTTP client, by its RFC 959 §4.2 meaning.
///
/// - 550 (file unavailable: not found, no access) → 404: the client asked for something it
///   cannot have, and asking again will not help.
/// - 530, 532 (not logged in, need an account) → 401, so the client can send credentials.
/// - 421, 425, 426 (service closing, data connection failed or aborted) → 502: the server failed.
/// - 450, 451, 452 (file busy, local error, no storage: transient by their 4yz class) → 503, which
///   says trying later may work.
/// - 552 (storage allocation exceeded) is about storing files and means nothing the client could
///   act on for a download → 502, as is every other code, including unexpected 1yz–3yz replies.
public enum FTPStatusMapping {
    /// The status for a failure reply `code` (see the table above).
    public static func status(forReplyCode code: Int) -> HTTPStatus {
        switch code {
        case 550: return .notFound
        case 530, 532: return .unauthorized
        case 450, 451, 452: return .serviceUnavailable
        default: return .badGateway
        }
    }

    /// The error body for `reply`: the server's own words (see `FTPReply.text`), at most
    /// `maxBytes` plus a final LF.
    public static func body(for reply: FTPReply, maxBytes: Int = 4_096) -> [UInt8] {
        reply.text(maxBytes: maxBytes) + [ftpLF]
    }
}
