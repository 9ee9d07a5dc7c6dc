import Glibc

/// `/etc/hosts`: names to addresses, read once when a resolver starts (as evdns does). Lines are
/// `address name [alias…]`, `#` starts a comment; names are matched case-insensitively.
/// Addresses have port 0.
public enum HostsFile {
    public static func parse(_ text: String) -> [String: [SocketAddress]] {
        var table: [String: [SocketAddress]] = [:]
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let content = line.prefix { $0 != "#" }
            let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let address = SocketAddress(ipLiteral: String(fields[0]), port: 0) else { continue }
            for name in fields.dropFirst() {
                table[name.lowercased(), default: []].append(address)
            }
        }
        return table
    }

    /// The table of the file at `path`; without one, `localhost` alone, as evdns has it.
    public static func load(_ path: String = "/etc/hosts") -> [String: [SocketAddress]] {
        guard let text = readFile(path) else {
            return parse("127.0.0.1 localhost\n::1 localhost\n")
        }
        return parse(text)
    }

    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while bytes.count < 4 << 20 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
