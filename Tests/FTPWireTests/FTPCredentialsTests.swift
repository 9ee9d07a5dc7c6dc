import Testing
import FTPWire

@Suite("FTPCredentials and Authorization: Basic")
struct FTPCredentialsTests {
    @Test("Basic decodes to user and password", arguments: [
        ("Basic YWxpY2U6c2VjcmV0", "alice", "secret"),
        ("basic YWxpY2U6c2VjcmV0", "alice", "secret"),
        ("  BASIC   YWxpY2U6c2VjcmV0  ", "alice", "secret"),
        ("Basic YWxpY2U6", "alice", ""),  // "alice:"
        ("Basic YWxpY2U6YTpi", "alice", "a:b"),  // "alice:a:b": the first colon splits
        ("Basic YWxpY2U6c2VjcmV0MQ==", "alice", "secret1"),
        ("Basic YWxpY2U6c2VjcmV0MQ", "alice", "secret1"),  // padding left out
        ("Basic w7w6w6k=", "\u{00FC}", "\u{00E9}"),  // UTF-8 "ü:é"
    ])
    func decodes(_ field: String, _ user: String, _ password: String) throws {
        let decoded = try #require(BasicAuthorization.credentials(wire(field)))
        #expect(decoded.user == wire(user))
        #expect(decoded.password == wire(password))
    }

    @Test("Basic refuses", arguments: [
        "Bearer YWxpY2U6c2VjcmV0",  // another scheme
        "Basic",  // no token
        "Basic YWxpY2U",  // "alice": no colon
        "Basic OnNlY3JldA==",  // ":secret": empty user
        "Basic YWxp!2U6c2VjcmV0",  // not base64
        "Basic YWxpY2U6c2VjcmV0M",  // a length base64 cannot have
        "Basic YWxpY2U6c2VjcmV0MQ=",  // wrong padding
        "Basic YWxpY2U6cw0KREVMRSB4",  // "alice:s\r\nDELE x"
        "Basic YQo6Yg==",  // "a\n:b"
        "Basic YTpiAA==",  // "a:b\0"
        "Basic YTpifw==",  // "a:b" DEL
    ])
    func refuses(_ field: String) {
        #expect(BasicAuthorization.credentials(wire(field)) == nil)
    }

    @Test("credentials with a control byte cannot be made", arguments: controlBytes)
    func controls(_ byte: UInt8) {
        #expect(FTPCredentials(user: wire("a") + [byte], password: wire("b")) == nil)
        #expect(FTPCredentials(user: wire("a"), password: [byte] + wire("b")) == nil)
    }

    @Test("which login a request uses", arguments: [
        // (URL, Authorization, user, password)
        ("ftp://host/x", nil, "anonymous", "larder@"),
        ("ftp://alice:pw@host/x", nil, "alice", "pw"),
        ("ftp://alice:pw@host/x", "Basic Ym9iOm90aGVy", "alice", "pw"),  // the URL's pair wins
        ("ftp://host/x", "Basic Ym9iOm90aGVy", "bob", "other"),
        ("ftp://bob@host/x", "Basic Ym9iOm90aGVy", "bob", "other"),  // the 401 answered
        ("ftp://alice@host/x", "Basic Ym9iOm90aGVy", "alice", ""),  // a field for someone else is not used
        ("ftp://alice@host/x", nil, "alice", ""),
        ("ftp://anonymous@host/x", nil, "anonymous", "larder@"),
        ("ftp://FTP@host/x", nil, "FTP", "larder@"),
        ("ftp://host/x", "Bearer abc", "anonymous", "larder@"),  // not for the FTP server
    ] as [(String, String?, String, String)])
    func forRequest(_ target: String, _ authorization: String?, _ user: String, _ password: String) throws {
        let login = try #require(FTPCredentials.forRequest(url: url(target), authorization: authorization.map(wire)))
        #expect(login.user == wire(user))
        #expect(login.password == wire(password))
    }

    @Test("a Basic field that does not decode refuses the request")
    func badBasicRefuses() {
        #expect(FTPCredentials.forRequest(url: url("ftp://host/x"), authorization: wire("Basic !!!")) == nil)
        #expect(FTPCredentials.forRequest(url: url("ftp://host/x"), authorization: wire("Basic YTpiDQpRVUlU")) == nil)
    }

    @Test("anonymous")
    func anonymous() {
        #expect(FTPCredentials.anonymous.user == wire("anonymous"))
        #expect(FTPCredentials.anonymous.password == wire("larder@"))
        #expect(FTPCredentials.anonymous.isAnonymous)
        #expect(!credentials("alice", "x").isAnonymous)
    }
}
