/// An `ftp://[user[:password]@]host[:port]/path[;type=a|i|d]` request target in absolute form
/// (RFC 1738 §3.2), parsed and checked before anything reaches an FTP server.
///
/// Refused (nil): another scheme, bytes outside printable ASCII, a fragment (`#`) or query (`?`;
/// a name holding one arrives as `%23` / `%3F`), more than one `@`, a bad `%` escape, an empty or
/// malformed host, a port outside 1–65535, an unknown typecode, and any user, password or path
/// segment whose decoded bytes hold a control byte (CR, LF, NUL, below 0x20, DEL), which could
/// otherwise end an FTP command early.
///
/// Paths: the gateway sends one path per command, the decoded segments joined with `/`
/// (`commandPath`), without a leading slash. That is RFC 1738's meaning, where the path names
/// directories below the login directory, reached one CWD at a time: joining the segments reaches
/// the same file with one command instead of one per directory (and no working directory to
/// restore when the connection is reused). `ftp://host/%2Fetc/motd` therefore names `/etc/motd`,
/// the absolute path, as RFC 1738 says it should.
public struct FTPURL: Sendable, Equatable {
    /// RFC 1738's `;type=` typecode. The gateway always transfers in binary; only `d` (a directory)
    /// changes what is fetched.
    public enum TypeCode: Sendable, Equatable {
        case ascii, image, directory
    }

    /// The decoded user name, when the URL has userinfo.
    public let user: [UInt8]?
    /// The decoded password, when the userinfo has a `:`.
    public let password: [UInt8]?
    /// The host in lowercase; an IPv6 address without its brackets.
    public let host: [UInt8]
    /// Whether `host` is a bracketed IPv6 address in the URL.
    public let isIPv6: Bool
    /// The control connection's port; 21 when the URL names none.
    public let port: Int
    /// The decoded path segments; a trailing empty segment (a path ending in `/`) is not kept.
    public let segments: [[UInt8]]
    /// The `;type=` typecode, when the URL has one.
    public let typeCode: TypeCode?
    /// The path ends in `/`, is empty, or has `;type=d`: the URL names a directory, answered with a listing.
    public let isDirectory: Bool

    /// Parses a request target; nil when it is not an acceptable `ftp://` URL (see the type's comment).
    public init?(_ target: UnsafeRawBufferPointer) {
        self.init(Array(target))
    }

    /// As `init?(_:)` for a URL written as text.
    public init?(_ text: String) {
        self.init(Array(text.utf8))
    }

    /// As `init?(_:)` for a URL in an array.
    public init?(_ target: [UInt8]) {
        let scheme = "ftp://"
        guard target.count > scheme.utf8.count, equalsIgnoringCase(target.prefix(scheme.utf8.count), scheme),
              target.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x23 && $0 != 0x3F }) else { return nil }
        let authorityStart = scheme.utf8.count
        let pathStart = target[authorityStart...].firstIndex(of: 0x2F) ?? target.count
        var hostStart = authorityStart
        var user: [UInt8]?
        var password: [UInt8]?
        let ats = target[authorityStart..<pathStart].indices.filter { target[$0] == 0x40 }
        if let at = ats.first {
            guard ats.count == 1 else { return nil }
            let userinfo = target[authorityStart..<at]
            guard userinfo.allSatisfy(Self.isUserinfoByte) else { return nil }
            let colon = userinfo.firstIndex(of: 0x3A) ?? at
            guard let name = PercentEncoding.decode(target[authorityStart..<colon]), !name.isEmpty,
                  !name.contains(where: isControlByte) else { return nil }
            user = name
            if colon < at {
                guard let secret = PercentEncoding.decode(target[(colon + 1)..<at]),
                      !secret.contains(where: isControlByte) else { return nil }
                password = secret
            }
            hostStart = at + 1
        }
        guard let server = Self.hostAndPort(target[hostStart..<pathStart]),
              let path = Self.path(target[pathStart...]) else { return nil }
        self.user = user
        self.password = password
        self.host = server.host
        self.isIPv6 = server.isIPv6
        self.port = server.port
        self.segments = path.segments
        self.typeCode = path.typeCode
        self.isDirectory = path.segments.isEmpty || path.endsInSlash || path.typeCode == .directory
    }

    /// The path the gateway sends in SIZE, MDTM, RETR and CWD: the decoded segments joined with
    /// `/`, relative to the login directory (see the type's comment). Empty for the login directory.
    public var commandPath: [UInt8] { Self.joined(segments) }

    /// The path as a person reads it (`/pub/file.txt`, `/pub/` for a directory): decoded, so not
    /// for use in a URL.
    public var displayPath: [UInt8] {
        var out: [UInt8] = [0x2F]
        out += Self.joined(segments)
        if isDirectory, !segments.isEmpty { out.append(0x2F) }
        return out
    }

    /// `host[:port]` as written in a URL: IPv6 in brackets, the port only when it is not 21.
    public var authority: String {
        let name = String(decoding: host, as: UTF8.self)
        let bracketed = isIPv6 ? "[\(name)]" : name
        return port == 21 ? bracketed : "\(bracketed):\(port)"
    }

    /// The URL without credentials, in one spelling (host lowercased, default port left out,
    /// segments re-encoded, a directory ending in `/` instead of `;type=d`, binary and ASCII
    /// typecodes dropped since every transfer is binary): for cache keys, logs and links, where a
    /// password must never appear.
    public var withoutCredentials: String { link(to: segments, directory: isDirectory) }

    /// The absolute URL, without credentials, of `segments` on this URL's server; a directory's
    /// ends in `/`.
    public func link(to segments: [[UInt8]], directory: Bool) -> String {
        var out = Array("ftp://\(authority)/".utf8)
        for (index, segment) in segments.enumerated() {
            if index > 0 { out.append(0x2F) }
            PercentEncoding.appendSegment(segment, to: &out)
        }
        if directory, !segments.isEmpty { out.append(0x2F) }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: - Parsing

    private static func joined(_ segments: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        for (index, segment) in segments.enumerated() {
            if index > 0 { out.append(0x2F) }
            out += segment
        }
        return out
    }

    /// RFC 3986 `userinfo`: unreserved, sub-delims, `:` and percent escapes.
    private static func isUserinfoByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        // - . _ ~ ! $ & ' ( ) * + , ; = : %
        case 0x2D, 0x2E, 0x5F, 0x7E, 0x21, 0x24, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x3B, 0x3D, 0x3A, 0x25:
            return true
        default: return false
        }
    }

    /// `host [ ":" port ]`: a DNS name or IPv4 address (letters, digits, `-`, `.`, `_`, `~`, at
    /// most 253 bytes) or an IPv6 address in brackets (hex digits, `:` and `.`; no zone).
    private static func hostAndPort(_ bytes: ArraySlice<UInt8>) -> (host: [UInt8], isIPv6: Bool, port: Int)? {
        var portStart: Int?
        let host: ArraySlice<UInt8>
        let isIPv6 = bytes.first == 0x5B
        if isIPv6 {
            guard let close = bytes.firstIndex(of: 0x5D) else { return nil }
            host = bytes[(bytes.startIndex + 1)..<close]
            guard host.count >= 2, host.count <= 45, host.contains(0x3A),
                  host.allSatisfy({ hexDigitValue($0) != nil || $0 == 0x3A || $0 == 0x2E }) else { return nil }
            if close + 1 < bytes.endIndex {
                guard bytes[close + 1] == 0x3A else { return nil }
                portStart = close + 2
            }
        } else {
            let colon = bytes.firstIndex(of: 0x3A) ?? bytes.endIndex
            host = bytes[bytes.startIndex..<colon]
            guard !host.isEmpty, host.count <= 253, host.allSatisfy(isHostByte) else { return nil }
            if colon < bytes.endIndex { portStart = colon + 1 }
        }
        var port = 21
        if let portStart, portStart < bytes.endIndex {
            guard bytes.endIndex - portStart <= 5, let value = decimalValue(bytes[portStart...], limit: 65_535),
                  value >= 1 else { return nil }
            port = value
        }
        return (host.map(lowercased), isIPv6, port)
    }

    private static func isHostByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E: return true
        default: return false
        }
    }

    /// The path after the authority: decoded segments, the typecode, and whether the path ended in `/`.
    private static func path(_ bytes: ArraySlice<UInt8>) -> (segments: [[UInt8]], typeCode: TypeCode?, endsInSlash: Bool)? {
        guard !bytes.isEmpty else { return ([], nil, true) }
        var raw = bytes.dropFirst().split(separator: 0x2F, omittingEmptySubsequences: false)
        var typeCode: TypeCode?
        if let last = raw.last, let found = Self.typeCode(last) {
            typeCode = found.code
            raw[raw.count - 1] = last.dropLast(found.length)
        } else if let last = raw.last, containsTypeParameter(last) {
            return nil  // `;type=` with a code RFC 1738 does not define
        }
        let endsInSlash = raw.last?.isEmpty ?? true
        if endsInSlash { raw.removeLast() }
        var segments: [[UInt8]] = []
        segments.reserveCapacity(raw.count)
        for piece in raw {
            guard let segment = PercentEncoding.decode(piece), !segment.contains(where: isControlByte) else { return nil }
            segments.append(segment)
        }
        return (segments, typeCode, endsInSlash)
    }

    /// `;type=a`, `;type=i` or `;type=d` (any case) ending a segment: the code and the suffix's length.
    private static func typeCode(_ segment: ArraySlice<UInt8>) -> (code: TypeCode, length: Int)? {
        guard segment.count >= 7, equalsIgnoringCase(segment.suffix(7).prefix(6), ";type=") else { return nil }
        switch lowercased(segment[segment.endIndex - 1]) {
        case 0x61: return (.ascii, 7)
        case 0x69: return (.image, 7)
        case 0x64: return (.directory, 7)
        default: return nil
        }
    }

    private static func containsTypeParameter(_ segment: ArraySlice<UInt8>) -> Bool {
        let length = 6  // ";type="
        guard segment.count >= length else { return false }
        return (segment.startIndex...(segment.endIndex - length)).contains {
            equalsIgnoringCase(segment[$0..<($0 + length)], ";type=")
        }
    }
}
