/// Reads where to warm through: `http://HOST:PORT`, `HOST:PORT`, `http://USER:PASSWORD@HOST:PORT`,
/// IPv6 as `[::1]:3128`. A wildcard listener address (`0.0.0.0`, `::`) is reached on loopback.
/// Pure; nil for anything else (an https proxy, no port, garbage).
public enum WarmProxyAddress {
    public static func parse(_ text: String) -> WarmProxy? {
        var rest = Substring(text)
        if rest.lowercased().hasPrefix("http://") { rest = rest.dropFirst(7) } else if rest.contains("://") { return nil }
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...] == "/" else { return nil }
            rest = rest[..<slash]
        }
        var authorization: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = percentDecoded(rest[..<at])
            rest = rest[rest.index(after: at)...]
            guard let credentials, credentials.contains(":") else { return nil }
            authorization = "Basic " + base64(Array(credentials.utf8))
        }
        let host: Substring
        let portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            guard after.hasPrefix(":") else { return nil }
            portText = after.dropFirst()
        } else {
            guard let colon = rest.lastIndex(of: ":"), !rest[..<colon].contains(":") else { return nil }
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        }
        guard !host.isEmpty, let port = UInt16(portText),
              host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":") }) else {
            return nil
        }
        let reachable = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : String(host)
        return WarmProxy(host: reachable, port: port, authorization: authorization)
    }

    static func percentDecoded(_ s: Substring) -> String? {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            guard b == 0x25 else { out.append(b); continue }
            guard bytes.count >= 2, let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            out.append(v)
            bytes = bytes.dropFirst(2)
        }
        return String(validating: out, as: UTF8.self)
    }

    static func base64(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            let b0 = bytes[i], b1 = n > 1 ? bytes[i + 1] : 0, b2 = n > 2 ? bytes[i + 2] : 0
            out.append(table[Int(b0 >> 2)])
            out.append(table[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(n > 1 ? table[Int((b1 & 0x0F) << 2 | b2 >> 6)] : 0x3D)
            out.append(n > 2 ? table[Int(b2 & 0x3F)] : 0x3D)
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
