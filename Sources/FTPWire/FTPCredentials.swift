/// The user name and password the gateway logs in with.
///
/// Neither may hold a control byte (CR, LF, NUL, below 0x20, DEL): they are sent as USER and PASS
/// arguments, where a line break would start a command of the client's choosing.
public struct FTPCredentials: Sendable, Equatable {
    /// The USER argument.
    public let user: [UInt8]
    /// The PASS argument, possibly empty.
    public let password: [UInt8]

    /// Nil for an empty user name or a control byte in either part.
    public init?(user: [UInt8], password: [UInt8]) {
        guard !user.isEmpty, FTPCommand.isSafeArgument(user), FTPCommand.isSafeArgument(password) else { return nil }
        self.user = user
        self.password = password
    }

    /// `anonymous` / `larder@`: the login for URLs and requests without credentials (RFC 1738
    /// §3.2.1 asks for `anonymous` and a password that names the client, here the proxy).
    public static let anonymous = FTPCredentials(trusted: Array("anonymous".utf8), Array("larder@".utf8))

    /// Whether this is an anonymous login (`anonymous` or `ftp`, any case), which a 530 does not
    /// answer with a challenge the client could meet.
    public var isAnonymous: Bool { equalsIgnoringCase(user, "anonymous") || equalsIgnoringCase(user, "ftp") }

    /// The login for a request: the URL's user and password when it has both; otherwise an
    /// `Authorization: Basic` field for the same user (or for any user when the URL names none),
    /// which is how a client answers the gateway's 401; otherwise the URL's user with an empty
    /// password (`larder@` for an anonymous user); otherwise anonymous.
    ///
    /// `authorization` is the field's value. Nil when it is a Basic field that does not decode to
    /// acceptable credentials: the gateway refuses the request rather than log in as someone else.
    /// Other schemes are not for the FTP server and are ignored.
    public static func forRequest(url: FTPURL, authorization: [UInt8]?) -> FTPCredentials? {
        if let user = url.user, let password = url.password { return FTPCredentials(user: user, password: password) }
        if let authorization, BasicAuthorization.isBasic(authorization) {
            guard let given = BasicAuthorization.credentials(authorization) else { return nil }
            if url.user == nil || url.user == given.user { return given }
        }
        guard let user = url.user else { return .anonymous }
        let named = FTPCredentials(user: user, password: [])
        if let named, named.isAnonymous { return FTPCredentials(user: user, password: anonymous.password) }
        return named
    }

    private init(trusted user: [UInt8], _ password: [UInt8]) {
        self.user = user
        self.password = password
    }
}
