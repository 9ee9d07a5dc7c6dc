/// The proxy's users: an htpasswd-style file, one `user:hash` per line (`#` comments and blank
/// lines allowed). Only slow, salted hashes are accepted: bcrypt (`htpasswd -B`), SHA-crypt
/// (`openssl passwd -5` / `-6`), yescrypt and scrypt. Apache's MD5 (`$apr1$`), `{SHA}`, crypt(3)
/// DES and plain text are refused with the line that holds them, rather than silently accepted.
struct UsersFile: Sendable, Equatable {
    /// User name → stored hash.
    var hashes: [String: String]

    struct Problem: Error, Equatable, CustomStringConvertible {
        var line: Int
        var message: String
        var description: String { "line \(line): \(message)" }
    }

    static let acceptedPrefixes = ["$2a$", "$2b$", "$2y$", "$5$", "$6$", "$y$", "$7$"]

    static func parse(_ text: String) throws(Problem) -> UsersFile {
        var hashes: [String: String] = [:]
        var number = 0
        // "\r\n" is one Character in Swift, so both line ends are named.
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            number += 1
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) || line.first == "#" { continue }
            guard let colon = line.firstIndex(of: ":") else {
                throw Problem(line: number, message: "expected user:hash")
            }
            let user = String(line[..<colon])
            // htpasswd files may carry extra colon-separated fields after the hash.
            let hash = String(line[line.index(after: colon)...].prefix { $0 != ":" })
            guard !user.isEmpty else { throw Problem(line: number, message: "empty user name") }
            guard hashes[user] == nil else { throw Problem(line: number, message: "user \(user) appears twice") }
            guard acceptedPrefixes.contains(where: { hash.hasPrefix($0) }) else {
                throw Problem(line: number, message: "user \(user): \(scheme(of: hash)) hashes are not accepted; "
                              + "use bcrypt (htpasswd -B) or SHA-crypt (openssl passwd -6)")
            }
            hashes[user] = hash
        }
        return UsersFile(hashes: hashes)
    }

    private static func scheme(of hash: String) -> String {
        if hash.hasPrefix("$apr1$") { return "Apache MD5 ($apr1$)" }
        if hash.hasPrefix("$1$") { return "MD5-crypt ($1$)" }
        if hash.hasPrefix("{SHA}") { return "unsalted SHA-1 ({SHA})" }
        if hash.isEmpty { return "empty" }
        return "unrecognised or plain-text"
    }
}

/// `Proxy-Authorization: Basic <base64(user:password)>`, decoded.
struct BasicCredentials: Equatable {
    var user: String
    var password: String

    /// nil when the value is not a well-formed Basic credential.
    static func parse(_ value: some Collection<UInt8>) -> BasicCredentials? {
        let bytes = Array(value)
        var i = 0
        while i < bytes.count, bytes[i] == 0x20 { i += 1 }
        let scheme = Array("basic".utf8)
        guard bytes.count >= i + 6 else { return nil }
        for (k, c) in scheme.enumerated() where bytes[i + k] | 0x20 != c { return nil }
        i += 5
        guard bytes[i] == 0x20 else { return nil }
        while i < bytes.count, bytes[i] == 0x20 { i += 1 }
        var end = bytes.count
        while end > i, bytes[end - 1] == 0x20 { end -= 1 }
        guard let decoded = base64Decode(bytes[i..<end]), let colon = decoded.firstIndex(of: 0x3A) else { return nil }
        return BasicCredentials(user: String(decoding: decoded[..<colon], as: UTF8.self),
                                password: String(decoding: decoded[(colon + 1)...], as: UTF8.self))
    }

    /// Standard base64 with padding; nil on any other byte or a bad length.
    static func base64Decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count % 4 == 0, !text.isEmpty else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 4 * 3)
        var quad: UInt32 = 0
        var filled = 0
        var padding = 0
        for (offset, c) in text.enumerated() {
            let v: UInt32
            switch c {
            case 0x41...0x5A: v = UInt32(c - 0x41)
            case 0x61...0x7A: v = UInt32(c - 0x61 + 26)
            case 0x30...0x39: v = UInt32(c - 0x30 + 52)
            case 0x2B: v = 62
            case 0x2F: v = 63
            case 0x3D:
                // Padding only in the last two places.
                guard offset >= text.count - 2 else { return nil }
                padding += 1
                v = 0
            default: return nil
            }
            if padding > 0, c != 0x3D { return nil }
            quad = quad << 6 | v
            filled += 1
            if filled == 4 {
                out.append(UInt8(quad >> 16 & 0xFF))
                out.append(UInt8(quad >> 8 & 0xFF))
                out.append(UInt8(quad & 0xFF))
                quad = 0
                filled = 0
            }
        }
        out.removeLast(padding)
        return out
    }
}
