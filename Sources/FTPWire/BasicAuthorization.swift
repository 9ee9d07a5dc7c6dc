/// `Authorization: Basic` (RFC 7617): the credentials a client sends after the gateway's 401,
/// decoded from base64 `user:password`.
public enum BasicAuthorization {
    /// Whether the field value's scheme is `Basic` (any case).
    public static func isBasic(_ value: [UInt8]) -> Bool {
        let start = value.firstIndex { $0 != ftpSP && $0 != ftpHTAB } ?? value.endIndex
        let scheme = value[start...].prefix { $0 != ftpSP && $0 != ftpHTAB }
        return equalsIgnoringCase(scheme, "basic")
    }

    /// The credentials in a `Basic` field value; nil when the scheme is not Basic, the token is not
    /// base64, there is no `:`, the user is empty, or either part holds a control byte.
    public static func credentials(_ value: [UInt8]) -> FTPCredentials? {
        guard isBasic(value) else { return nil }
        let trimmed = trimmedBlanks(value[...])
        let token = trimmedBlanks(trimmed.drop { $0 != ftpSP && $0 != ftpHTAB })
        guard let decoded = base64Decode(token), let colon = decoded.firstIndex(of: 0x3A) else { return nil }
        return FTPCredentials(user: Array(decoded[..<colon]), password: Array(decoded[(colon + 1)...]))
    }

    /// Standard base64 (RFC 4648 §4); the `=` padding may be left out, but nothing else may appear.
    static func base64Decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        var body = text
        var padding = 0
        while body.last == 0x3D, padding < 2 {
            body.removeLast()
            padding += 1
        }
        guard !body.isEmpty, body.count % 4 != 1, padding == 0 || (body.count + padding) % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(body.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for c in body {
            guard let value = sextet(c) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return out
    }

    private static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x41...0x5A: return c - 0x41
        case 0x61...0x7A: return c - 0x61 + 26
        case 0x30...0x39: return c - 0x30 + 52
        case 0x2B: return 62
        case 0x2F: return 63
        default: return nil
        }
    }
}
