import Glibc

/// An IPv4 or IPv6 socket address for `connect`, from a numeric host.
struct SocketAddressBytes {
    private var storage = sockaddr_storage()
    let family: Int32
    private let length: socklen_t

    init?(host: String, port: Int) {
        guard let port = UInt16(exactly: port) else { return nil }
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeBytes(of: &v4) { raw in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) } }
        } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeBytes(of: &v6) { raw in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: raw) } }
        } else {
            return nil
        }
    }

    func connect(_ fd: Int32) -> Int32 {
        var copy = storage
        return withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
        }
    }
}
