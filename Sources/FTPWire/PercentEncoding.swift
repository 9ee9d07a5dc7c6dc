/// Percent-decoding of URL parts and percent-encoding of path segments (RFC 3986 §2.1).
enum PercentEncoding {
    /// `bytes` with each `%XX` replaced by its byte; nil when a `%` is not followed by two hex digits.
    static func decode(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var k = bytes.startIndex
        while k < bytes.endIndex {
            let b = bytes[k]
            guard b == 0x25 else {
                out.append(b)
                k += 1
                continue
            }
            guard k + 2 < bytes.endIndex, let high = hexDigitValue(bytes[k + 1]), let low = hexDigitValue(bytes[k + 2])
            else { return nil }
            out.append(high << 4 | low)
            k += 3
        }
        return out
    }

    /// Appends one path segment for an `ftp://` URL: unreserved characters and `!$&()*+,=:@` as
    /// they are, everything else as `%XX`, so `/`, `;`, `?`, `#`, `%`, quotes, spaces, controls and
    /// non-ASCII bytes can never change what the URL means or leave an HTML attribute.
    static func appendSegment(_ segment: [UInt8], to out: inout [UInt8]) {
        for b in segment {
            if isLeftAsIs(b) {
                out.append(b)
            } else {
                out.append(0x25)
                out.append(hexDigits[Int(b >> 4)])
                out.append(hexDigits[Int(b & 0x0F)])
            }
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    private static func isLeftAsIs(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        // - . _ ~ ! $ & ( ) * + , = : @
        case 0x2D, 0x2E, 0x5F, 0x7E, 0x21, 0x24, 0x26, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x3D, 0x3A, 0x40: return true
        default: return false
        }
    }
}
