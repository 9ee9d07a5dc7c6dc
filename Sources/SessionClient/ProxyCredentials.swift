/// A user and password for the parent proxy, sent as `Proxy-Authorization: Basic` (RFC 7617) on
/// every CONNECT and every request Larder sends it. Printing one shows the user only, so a value
/// that ends up in a log line or an error never carries the password.
public struct ProxyCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let user: String
    /// `Basic base64(user:password)`: the password is kept only in this encoded form.
    public let authorization: String

    public init(user: String, password: String) {
        self.user = user
        authorization = "Basic " + ProxyCredentials.base64(Array((user + ":" + password).utf8))
    }

    public var description: String { "\(user):(password hidden)" }
    public var debugDescription: String { description }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// `user:password` on the first line that is not empty or a `#` comment; the password runs
    /// to the end of the line (it may hold colons). Control characters are refused anywhere (a
    /// line break in a header value would split it), and so is a colon in the user name, which
    /// Basic cannot carry (RFC 7617 §2). Errors never quote the text.
    public static func parse(_ text: String) throws(ParseError) -> ProxyCredentials {
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        guard let line = lines.first(where: { line in
            let t = line.drop(while: { $0 == " " || $0 == "\t" })
            return !t.isEmpty && !t.hasPrefix("#")
        }) else {
            throw ParseError(description: "no `user:password` line")
        }
        let content = line.hasSuffix("\r") ? line.dropLast() : line
        guard let colon = content.firstIndex(of: ":") else {
            throw ParseError(description: "expected `user:password`, found no colon")
        }
        let user = String(content[..<colon])
        let password = String(content[content.index(after: colon)...])
        guard !user.isEmpty else { throw ParseError(description: "the user name is empty") }
        let control = { (s: String) in s.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }
        guard !control(user), !control(password) else {
            throw ParseError(description: "control characters are not allowed in credentials")
        }
        return ProxyCredentials(user: user, password: password)
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 with padding.
    static func base64(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = UInt32(bytes[i])
            let b1 = n > 1 ? UInt32(bytes[i + 1]) : 0
            let b2 = n > 2 ? UInt32(bytes[i + 2]) : 0
            let v = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(v >> 18 & 63)])
            out.append(alphabet[Int(v >> 12 & 63)])
            out.append(n > 1 ? alphabet[Int(v >> 6 & 63)] : UInt8(ascii: "="))
            out.append(n > 2 ? alphabet[Int(v & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
