@preconcurrency import CLibevent
import Glibc

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, CustomStringConvertible {
    var storage = sockaddr_storage()
    var length: socklen_t = 0

    init(_ addr: UnsafePointer<sockaddr>, length: socklen_t) {
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: addr, count: Int(length)))
        }
        self.length = length
    }

    /// Parses a numeric IPv4 or IPv6 address (no brackets); nil if `host` is a name.
    public init?(ipLiteral host: String, port: Int) {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            self.init(ipv4: v4, port: port)
            return
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            self.init(ipv6: v6, port: port)
            return
        }
        return nil
    }

    /// `v4`, its address already set, with the family and `port` filled in.
    private init(ipv4 v4: sockaddr_in, port: Int) {
        var v4 = v4
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: v4) { dst.copyMemory(from: $0) } }
        length = socklen_t(MemoryLayout<sockaddr_in>.size)
    }

    /// `v6`, its address already set, with the family and `port` filled in.
    private init(ipv6 v6: sockaddr_in6, port: Int) {
        var v6 = v6
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: v6) { dst.copyMemory(from: $0) } }
        length = socklen_t(MemoryLayout<sockaddr_in6>.size)
    }

    /// The address of a bound or connected socket.
    public static func local(of fd: Int32) -> SocketAddress? { named(fd, getsockname) }

    /// The address a connected socket's peer has.
    public static func peer(of fd: Int32) -> SocketAddress? { named(fd, getpeername) }

    private static func named(_ fd: Int32,
                              _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32)
        -> SocketAddress? {
        var ss = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &ss) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &len) }
        }
        guard rc == 0 else { return nil }
        return withUnsafePointer(to: &ss) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: len) }
        }
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafePointer(to: storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// The same address with another port.
    public func withPort(_ port: Int) -> SocketAddress {
        var copy = self
        let p = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        withUnsafeMutableBytes(of: &copy.storage) { raw in
            if isIPv6 {
                raw.storeBytes(of: p, toByteOffset: MemoryLayout<sockaddr_in6>.offset(of: \sockaddr_in6.sin6_port)!, as: in_port_t.self)
            } else {
                raw.storeBytes(of: p, toByteOffset: MemoryLayout<sockaddr_in>.offset(of: \sockaddr_in.sin_port)!, as: in_port_t.self)
            }
        }
        return copy
    }

    public var isIPv6: Bool { Int32(storage.ss_family) == AF_INET6 }

    public var port: Int {
        withUnsafeBytes(of: storage) { raw in
            if isIPv6 { return Int(UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)) }
            return Int(UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port))
        }
    }

    /// The numeric host, without brackets.
    public var host: String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        withUnsafeBytes(of: storage) { raw in
            if isIPv6 {
                var a = raw.load(as: sockaddr_in6.self).sin6_addr
                _ = inet_ntop(AF_INET6, &a, &buf, socklen_t(buf.count))
            } else {
                var a = raw.load(as: sockaddr_in.self).sin_addr
                _ = inet_ntop(AF_INET, &a, &buf, socklen_t(buf.count))
            }
        }
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The address in network order: 4 bytes for IPv4, 16 for IPv6.
    public var addressBytes: [UInt8] {
        withUnsafeBytes(of: storage) { raw in
            if isIPv6 {
                let a = raw.load(as: sockaddr_in6.self).sin6_addr
                return withUnsafeBytes(of: a) { Array($0) }
            }
            let a = raw.load(as: sockaddr_in.self).sin_addr
            return withUnsafeBytes(of: a) { Array($0) }
        }
    }

    /// Whether both name the same host, an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) being the
    /// IPv4 address it carries.
    public func sameHost(as other: SocketAddress) -> Bool {
        func unmapped(_ b: [UInt8]) -> [UInt8] {
            b.count == 16 && b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xFF && b[11] == 0xFF ? Array(b[12...]) : b
        }
        return unmapped(addressBytes) == unmapped(other.addressBytes)
    }
}

extension SocketAddress {
    /// An address from its bytes in network order (4 for IPv4, 16 for IPv6); nil for any other length.
    public init?(addressBytes bytes: [UInt8], port: Int) {
        switch bytes.count {
        case 4:
            var v4 = sockaddr_in()
            withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: bytes) }
            self.init(ipv4: v4, port: port)
        case 16:
            var v6 = sockaddr_in6()
            withUnsafeMutableBytes(of: &v6.sin6_addr) { $0.copyBytes(from: bytes) }
            self.init(ipv6: v6, port: port)
        default:
            return nil
        }
    }
}
