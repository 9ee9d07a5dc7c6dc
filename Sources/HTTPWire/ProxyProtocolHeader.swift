/// The PROXY protocol header a load balancer sends before its client's bytes (HAProxy's
/// specification, versions 1 and 2): who the client really is. I/O-free; the listener's shell reads
/// bytes until `parse` stops answering `needMore`.
public enum ProxyProtocolHeader {
    /// One end of the proxied connection: 4 address bytes for IPv4, 16 for IPv6.
    public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
        public var address: [UInt8]
        public var port: Int
        public init(address: [UInt8], port: Int) { self.address = address; self.port = port }

        public var description: String {
            if address.count == 4 { return address.map(String.init).joined(separator: ".") + ":\(port)" }
            var groups: [String] = []
            for i in stride(from: 0, to: address.count, by: 2) {
                groups.append(String(Int(address[i]) << 8 | Int(address[i + 1]), radix: 16))
            }
            return "[" + groups.joined(separator: ":") + "]:\(port)"
        }
    }

    /// A whole header.
    public struct Header: Sendable, Equatable {
        public var version: Int
        /// The client; nil when the header names none (v1 `UNKNOWN`, v2 `LOCAL` such as a load
        /// balancer's own health check, or an address family other than IPv4 and IPv6): the
        /// connection's own peer is then the client.
        public var source: Endpoint?
        public var destination: Endpoint?
        /// Bytes of the header; what follows is the client's.
        public var length: Int

        public init(version: Int, source: Endpoint?, destination: Endpoint?, length: Int) {
            self.version = version
            self.source = source
            self.destination = destination
            self.length = length
        }
    }

    public enum Parse: Sendable, Equatable {
        /// Not complete yet; every byte given so far belongs to the header (none is the client's).
        case needMore
        case parsed(Header)
        case invalid(String)
    }

    /// The longest v1 line, `\r\n` included (the specification's bound).
    public static let maxVersion1Length = 107
    /// The most address and TLV bytes a v2 header may announce here; the specification allows
    /// 65535, load balancers send far fewer, and a reader must not wait for 64 KiB of nothing.
    public static let maxVersion2Payload = 1_024
    /// The most bytes a header can take: what a reader needs to look at, at most.
    public static let maxLength = 16 + maxVersion2Payload

    static let version2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    static let version1Prefix = Array("PROXY ".utf8)

    /// Reads a header at the start of `bytes`.
    public static func parse(_ bytes: [UInt8]) -> Parse {
        if bytes.isEmpty { return .needMore }
        if startsAsPrefix(bytes, of: version2Signature) { return parseVersion2(bytes) }
        if startsAsPrefix(bytes, of: version1Prefix) { return parseVersion1(bytes) }
        return .invalid("no PROXY protocol header (the connection starts with something else)")
    }

    /// Whether `bytes` and `prefix` agree on their common length.
    private static func startsAsPrefix(_ bytes: [UInt8], of prefix: [UInt8]) -> Bool {
        let n = min(bytes.count, prefix.count)
        return bytes[0..<n].elementsEqual(prefix[0..<n])
    }

    // MARK: version 1: "PROXY TCP4 10.1.2.3 10.0.0.1 51234 3128\r\n"

    private static func parseVersion1(_ bytes: [UInt8]) -> Parse {
        let cr: UInt8 = 0x0D, lf: UInt8 = 0x0A
        let window = bytes.prefix(maxVersion1Length)
        guard let crAt = window.firstIndex(of: cr) else {
            if let bare = window.firstIndex(of: lf) { return .invalid("v1 header has a bare LF at byte \(bare)") }
            return bytes.count >= maxVersion1Length ? .invalid("v1 header longer than \(maxVersion1Length) bytes") : .needMore
        }
        if let lfAt = window.firstIndex(of: lf), lfAt < crAt { return .invalid("v1 header has a bare LF at byte \(lfAt)") }
        guard crAt + 1 < bytes.count else {
            return crAt + 1 < maxVersion1Length ? .needMore : .invalid("v1 header longer than \(maxVersion1Length) bytes")
        }
        guard bytes[crAt + 1] == lf else { return .invalid("v1 header has a CR not followed by LF") }
        let length = crAt + 2
        guard length <= maxVersion1Length else { return .invalid("v1 header longer than \(maxVersion1Length) bytes") }
        let fields = bytes[0..<crAt].split(separator: 0x20, omittingEmptySubsequences: false)
        guard fields.count >= 2, fields.allSatisfy({ !$0.isEmpty }) || Array(fields[1]) == Array("UNKNOWN".utf8) else {
            return .invalid("v1 header fields must be separated by single spaces")
        }
        let proto = String(decoding: fields[1], as: UTF8.self)
        if proto == "UNKNOWN" {
            // The specification has the rest of an UNKNOWN line ignored.
            return .parsed(Header(version: 1, source: nil, destination: nil, length: length))
        }
        guard proto == "TCP4" || proto == "TCP6" else { return .invalid("v1 header names protocol \"\(printable(fields[1]))\"") }
        guard fields.count == 6 else { return .invalid("v1 \(proto) header needs 4 fields after the protocol, has \(fields.count - 2)") }
        let v4 = proto == "TCP4"
        guard let src = v4 ? ipv4(fields[2]) : ipv6(fields[2]) else {
            return .invalid("v1 header source \"\(printable(fields[2]))\" is not an \(v4 ? "IPv4" : "IPv6") address")
        }
        guard let dst = v4 ? ipv4(fields[3]) : ipv6(fields[3]) else {
            return .invalid("v1 header destination \"\(printable(fields[3]))\" is not an \(v4 ? "IPv4" : "IPv6") address")
        }
        guard let sport = port(fields[4]), let dport = port(fields[5]) else {
            return .invalid("v1 header ports must be decimal numbers from 0 to 65535 without leading zeros")
        }
        return .parsed(Header(version: 1, source: Endpoint(address: src, port: sport),
                              destination: Endpoint(address: dst, port: dport), length: length))
    }

    /// Strict dotted decimal: four numbers 0–255, no leading zeros (`010` could be read as octal).
    static func ipv4(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        let parts = text.split(separator: 0x2E, omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for part in parts {
            guard let n = decimal(part, maxDigits: 3), n <= 255 else { return nil }
            out.append(UInt8(n))
        }
        return out
    }

    static func ipv6(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count <= 45 else { return nil }
        let value: UInt128? = Array(text).withUnsafeBytes { HostPattern.ipv6Value($0) }
        guard let value else { return nil }
        return (0..<16).map { UInt8(truncatingIfNeeded: value >> (8 * (15 - $0))) }
    }

    static func port(_ text: ArraySlice<UInt8>) -> Int? {
        guard let n = decimal(text, maxDigits: 5), n <= 65_535 else { return nil }
        return n
    }

    /// Digits only, at most `maxDigits`, no leading zero unless the number is 0.
    private static func decimal(_ text: ArraySlice<UInt8>, maxDigits: Int) -> Int? {
        guard !text.isEmpty, text.count <= maxDigits, text.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        guard text.count == 1 || text.first != 0x30 else { return nil }
        return text.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    private static func printable(_ text: ArraySlice<UInt8>) -> String {
        String(text.prefix(48).map { $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 ? Character(UnicodeScalar($0)) : "?" })
    }

    // MARK: version 2: signature, version and command, family and protocol, length, addresses, TLVs

    private static func parseVersion2(_ bytes: [UInt8]) -> Parse {
        guard bytes.count >= 16 else { return .needMore }
        let versionCommand = bytes[12]
        guard versionCommand >> 4 == 2 else { return .invalid("v2 header has version \(versionCommand >> 4)") }
        let command = versionCommand & 0x0F
        guard command <= 1 else { return .invalid("v2 header has unknown command \(command)") }
        let family = bytes[13] >> 4, transport = bytes[13] & 0x0F
        guard family <= 3, transport <= 2 else { return .invalid("v2 header has unknown family/protocol 0x\(String(bytes[13], radix: 16))") }
        let payload = Int(bytes[14]) << 8 | Int(bytes[15])
        guard payload <= maxVersion2Payload else {
            return .invalid("v2 header announces \(payload) address bytes, more than \(maxVersion2Payload)")
        }
        let length = 16 + payload
        guard bytes.count >= length else { return .needMore }
        // LOCAL: the load balancer speaking for itself (a health check); addresses are ignored.
        if command == 0 { return .parsed(Header(version: 2, source: nil, destination: nil, length: length)) }
        guard transport != 2 else { return .invalid("v2 header proxies a datagram connection") }
        let body = bytes[16..<length]
        switch family {
        case 1, 2:
            guard transport == 1 else { return .invalid("v2 header proxies an unspecified protocol with addresses") }
            let size = family == 1 ? 4 : 16
            guard payload >= 2 * size + 4 else {
                return .invalid("v2 header announces \(payload) address bytes, too few for \(family == 1 ? "IPv4" : "IPv6")")
            }
            let s = body.startIndex
            let src = Array(body[s..<s + size]), dst = Array(body[s + size..<s + 2 * size])
            let sport = Int(body[s + 2 * size]) << 8 | Int(body[s + 2 * size + 1])
            let dport = Int(body[s + 2 * size + 2]) << 8 | Int(body[s + 2 * size + 3])
            // TLVs, if any, follow within the announced length; nothing here needs them.
            return .parsed(Header(version: 2, source: Endpoint(address: src, port: sport),
                                  destination: Endpoint(address: dst, port: dport), length: length))
        default:
            // UNSPEC or UNIX: no address this proxy could use; the connection's own stands.
            return .parsed(Header(version: 2, source: nil, destination: nil, length: length))
        }
    }
}
