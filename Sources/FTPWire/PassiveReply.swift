/// The port a PASV reply names, and whether the host it named was another than the control
/// connection's: the host itself is never handed out.
///
/// The gateway always opens the data connection to the control connection's address. A server (or
/// anything between) that names another host in `227` would otherwise make the gateway connect
/// where it says: the FTP bounce, a way to reach hosts behind the proxy. The flag is for logging.
public struct PassivePort: Sendable, Equatable {
    /// 1...65535.
    public let port: Int
    /// The reply named an address other than the control connection's (false when the caller
    /// passed no address to compare with). Often only a server behind NAT naming its inside address.
    public let namedOtherHost: Bool

    /// A port as read from a 227 reply.
    public init(port: Int, namedOtherHost: Bool) {
        self.port = port
        self.namedOtherHost = namedOtherHost
    }
}

extension FTPReply {
    /// The port of a `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)` reply (RFC 959 §4.1.2): the
    /// first six comma-separated numbers anywhere in its text, parentheses or not, each 0–255,
    /// giving a port 1–65535. Nil for another code or no such numbers.
    ///
    /// `controlIPv4` is the control connection's peer address (most significant byte first), to
    /// compare the named host with.
    public func passivePort(controlIPv4: UInt32?) -> PassivePort? {
        guard code == 227 else { return nil }
        for line in lines {
            var k = 0
            while k < line.count {
                if isDecimal(line[k]), k == 0 || !isDecimal(line[k - 1]), let numbers = Self.sixNumbers(line, from: k) {
                    let port = numbers[4] << 8 | numbers[5]
                    guard port >= 1 else { return nil }
                    let named = UInt32(numbers[0]) << 24 | UInt32(numbers[1]) << 16 | UInt32(numbers[2]) << 8 | UInt32(numbers[3])
                    return PassivePort(port: port, namedOtherHost: controlIPv4.map { $0 != named } ?? false)
                }
                k += 1
            }
        }
        return nil
    }

    /// The port of a `229 Entering Extended Passive Mode (|||port|)` reply (RFC 2428 §3): the
    /// first `(` followed by the same delimiter three times, the port (1–65535), the delimiter and
    /// `)`. The delimiter may be any of 33–126 except a digit (which could not be told from the
    /// port). Nil for another code or no such text.
    public var extendedPassivePort: Int? {
        guard code == 229 else { return nil }
        for line in lines {
            for open in line.indices where line[open] == 0x28 {
                if let port = Self.extendedPort(line, open: open) { return port }
            }
        }
        return nil
    }

    /// `n,n,n,n,n,n` at `start`, each 1–3 digits and at most 255.
    private static func sixNumbers(_ line: [UInt8], from start: Int) -> [Int]? {
        var numbers: [Int] = []
        var k = start
        while numbers.count < 6 {
            if !numbers.isEmpty {
                guard k < line.count, line[k] == 0x2C else { return nil }
                k += 1
            }
            let digitsStart = k
            while k < line.count, isDecimal(line[k]), k - digitsStart < 4 { k += 1 }
            guard k - digitsStart <= 3, let value = decimalValue(line[digitsStart..<k], limit: 255) else { return nil }
            numbers.append(value)
        }
        if k < line.count, isDecimal(line[k]) { return nil }
        return numbers
    }

    private static func extendedPort(_ line: [UInt8], open: Int) -> Int? {
        guard open + 4 < line.count else { return nil }
        let delimiter = line[open + 1]
        guard delimiter >= 33, delimiter <= 126, !isDecimal(delimiter),
              line[open + 2] == delimiter, line[open + 3] == delimiter else { return nil }
        var k = open + 4
        let digitsStart = k
        while k < line.count, isDecimal(line[k]), k - digitsStart < 6 { k += 1 }
        guard k - digitsStart <= 5, let port = decimalValue(line[digitsStart..<k], limit: 65_535), port >= 1,
              k + 1 < line.count, line[k] == delimiter, line[k + 1] == 0x29 else { return nil }
        return port
    }
}
