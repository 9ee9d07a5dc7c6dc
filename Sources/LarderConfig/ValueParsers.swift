import Glibc
import HTTPWire

/// Parsers for the value syntaxes the configuration accepts. Each throws a message that completes
/// "key: …" in an error line, so it names what was expected and what was found.
public struct ValueError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

extension ConfigLoader {
    /// `host:port`, `[v6]:port`; port 0 asks the kernel for a free one.
    /// `10.0.0.0/8`, `192.168.1.7`, `::1/128`, `fd00::/8`.
    public static func parseAddressRange(_ text: String) throws(ValueError) -> AddressRange {
        let t = text.trimmingSpaces()
        let parts = t.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = addressBytes(String(parts[0])) else {
            throw ValueError("expected an address or network like 10.0.0.0/8 or ::1/128, got \"\(t)\"")
        }
        var prefix = bytes.count * 8
        if parts.count == 2 {
            guard let p = Int(parts[1]), (0...bytes.count * 8).contains(p) else {
                throw ValueError("prefix length in \"\(t)\" must be 0...\(bytes.count * 8)")
            }
            prefix = p
        }
        return AddressRange(bytes: bytes, prefixLength: prefix)
    }

    /// The bytes of a numeric IPv4 (4) or IPv6 (16) address, as `inet_pton` reads it (no brackets,
    /// no zone); nil for anything else, names included.
    public static func addressBytes(_ literal: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 { return withUnsafeBytes(of: v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, literal, &v6) == 1 { return withUnsafeBytes(of: v6) { Array($0) } }
        return nil
    }

    /// A network (`169.254.0.0/16`, `fe80::/10`, one address) or a host pattern.
    public static func parseDestinationPattern(_ text: String) throws(ValueError) -> DestinationPattern {
        let t = text.trimmingSpaces()
        if let range = try? parseAddressRange(String(t)) { return .network(range) }
        if t.first?.isNumber == true, t.contains("/") || t.allSatisfy({ $0.isNumber || $0 == "." }) {
            throw ValueError("\"\(t)\" is neither a network like 10.0.0.0/8 nor a host name")
        }
        return .host(try parseHostPattern(String(t)))
    }

    /// `example.com`, `*.example.com` (any subdomain), `*` (any host) or an IPv6 address (`HostPattern`).
    public static func parseHostPattern(_ text: String) throws(ValueError) -> HostPattern {
        do throws(HostPatternError) {
            return try HostPattern(parsing: String(text.trimmingSpaces()))
        } catch {
            throw ValueError(error.description)
        }
    }

    /// One host as a `Host` field names it: a name (`larder.internal`, lowercased) or an IP address
    /// (`10.0.0.5`, `fd00::1` or `[fd00::1]`, kept without brackets); no port, no wildcard.
    public static func parseHostName(_ text: String) throws(ValueError) -> String {
        let t = text.trimmingSpaces().lowercased()
        let unbracketed = t.hasPrefix("[") && t.hasSuffix("]") ? String(t.dropFirst().dropLast()) : t
        if addressBytes(unbracketed) != nil { return unbracketed }
        guard !t.isEmpty, t.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }) else {
            throw ValueError("expected a host name or IP address without port or wildcard, got \"\(text)\"")
        }
        return t
    }

    public static func parseEndpoint(_ text: String) throws(ValueError) -> Endpoint {
        let t = text.trimmingSpaces()
        let host: Substring
        let portText: Substring
        if t.hasPrefix("[") {
            guard let close = t.firstIndex(of: "]") else {
                throw ValueError("expected [IPv6]:PORT, got \"\(text)\"")
            }
            host = t[t.index(after: t.startIndex)..<close]
            let rest = t[t.index(after: close)...]
            guard rest.hasPrefix(":") else { throw ValueError("expected [IPv6]:PORT, got \"\(text)\"") }
            portText = rest.dropFirst()
        } else {
            guard let colon = t.lastIndex(of: ":"), !t[..<colon].contains(":") else {
                throw ValueError("expected HOST:PORT, got \"\(text)\"")
            }
            host = t[..<colon]
            portText = t[t.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }) else {
            throw ValueError("expected HOST:PORT with a host name or address, got \"\(text)\"")
        }
        guard let port = Int(portText), (0...65_535).contains(port) else {
            throw ValueError("port must be a number from 0 to 65535, got \"\(portText)\"")
        }
        return Endpoint(host: String(host), port: port)
    }

    /// `http://host[:port]` or `https://host[:port]`, optionally with a trailing `/`; no path.
    public static func parseOriginURL(_ text: String) throws(ValueError) -> OriginURL {
        let t = text.trimmingSpaces()
        let scheme: URIScheme
        let rest: Substring
        if t.lowercased().hasPrefix("http://") {
            scheme = .http; rest = t.dropFirst(7)
        } else if t.lowercased().hasPrefix("https://") {
            scheme = .https; rest = t.dropFirst(8)
        } else {
            throw ValueError("expected http://HOST[:PORT] or https://HOST[:PORT], got \"\(text)\"")
        }
        var authority = rest
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.isEmpty, !authority.contains("/"), !authority.contains("@"),
              !authority.contains("?"), !authority.contains("#") else {
            throw ValueError("expected an origin without path, user or query, got \"\(text)\"")
        }
        let defaultPort = scheme.defaultPort
        if authority.hasPrefix("[") {
            guard authority.contains("]") else { throw ValueError("unclosed [ in \"\(text)\"") }
            if authority.hasSuffix("]") {
                return OriginURL(scheme: scheme, host: String(authority.dropFirst().dropLast()), port: defaultPort)
            }
        } else if !authority.contains(":") {
            return OriginURL(scheme: scheme, host: String(authority).lowercased(), port: defaultPort)
        }
        let e = try parseEndpoint(String(authority))
        guard e.port != 0 else { throw ValueError("port 0 is not a valid origin port in \"\(text)\"") }
        return OriginURL(scheme: scheme, host: e.host.lowercased(), port: e.port)
    }

    /// A number of seconds, or a number with a unit: `ms`, `s`, `m`, `h`, `d` (`30s`, `1.5m`, `500ms`).
    public static func parseDuration(_ text: String) throws(ValueError) -> Double {
        let t = text.trimmingSpaces().lowercased()
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3_600), ("d", 86_400)]
        var number = Substring(t)
        var scale = 1.0
        for (suffix, factor) in units where t.hasSuffix(suffix) {
            number = t.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number.trimmingSpaces()), value.isFinite, value >= 0 else {
            throw ValueError("expected a duration such as 30s, 500ms, 5m, 1h or 7d, got \"\(text)\"")
        }
        return value * scale
    }

    /// A byte count, or a number with a unit: `KiB`/`MiB`/`GiB` (also `K`, `M`, `G`) are powers of
    /// 1024, `KB`/`MB`/`GB` powers of 1000.
    public static func parseByteSize(_ text: String) throws(ValueError) -> Int {
        let t = text.trimmingSpaces()
        let units: [(String, Double)] = [
            ("KiB", 1_024), ("MiB", 1_048_576), ("GiB", 1_073_741_824), ("TiB", 1_099_511_627_776),
            ("KB", 1_000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000),
            ("K", 1_024), ("M", 1_048_576), ("G", 1_073_741_824), ("T", 1_099_511_627_776), ("B", 1),
        ]
        var number = Substring(t)
        var scale = 1.0
        for (suffix, factor) in units where t.uppercased().hasSuffix(suffix.uppercased()) {
            number = t.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number.trimmingSpaces()), value.isFinite, value >= 0,
              value * scale < 9.0e18 else {
            throw ValueError("expected a size such as 65536, 64KiB, 256MiB or 2GiB, got \"\(text)\"")
        }
        return Int(value * scale)
    }
}

extension StringProtocol {
    func trimmingSpaces() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }
}
