import EventLoop
import Glibc
import LarderConfig
import Locking

/// The addresses this process listens on (proxy and admin), so requests and tunnels aimed at
/// Larder itself are refused. A wildcard listener (0.0.0.0, ::) is reached through any local
/// address, so the interfaces' addresses are collected when one is registered.
final class OwnListeners: Sendable {
    private struct Entry {
        var bytes: [UInt8]
        var port: Int
        var wildcard: Bool
    }

    private struct State {
        var entries: [Entry] = []
        var localAddresses: [[UInt8]] = []
    }

    private let state = Locked(State())

    /// After a listener is bound (its real port known).
    func add(_ address: SocketAddress) {
        let bytes = AddressRange.unmapped(address.addressBytes)
        let wildcard = bytes.allSatisfy { $0 == 0 }
        let locals = wildcard ? OwnListeners.interfaceAddresses() : []
        state.withLock { s in
            s.entries.append(Entry(bytes: bytes, port: address.port, wildcard: wildcard))
            if wildcard, s.localAddresses.isEmpty { s.localAddresses = locals }
        }
    }

    func contains(_ address: [UInt8], port: Int) -> Bool {
        let target = AddressRange.unmapped(address)
        // 0.0.0.0 and :: as destinations mean this host.
        let unspecified = target.allSatisfy { $0 == 0 }
        let loopback = AddressRange.loopback.contains { $0.contains(target) }
        return state.withLock { s in
            s.entries.contains { e in
                guard e.port == port else { return false }
                if unspecified || e.bytes == target { return true }
                return e.wildcard && (loopback || s.localAddresses.contains(target))
            }
        }
    }

    /// The addresses of this machine's interfaces.
    static func interfaceAddresses() -> [[UInt8]] {
        var out: [[UInt8]] = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return out }
        defer { freeifaddrs(list) }
        var cursor = list
        while let entry = cursor {
            if let sa = entry.pointee.ifa_addr {
                switch Int32(sa.pointee.sa_family) {
                case AF_INET:
                    let a = UnsafeRawPointer(sa).load(as: sockaddr_in.self).sin_addr
                    out.append(withUnsafeBytes(of: a) { Array($0) })
                case AF_INET6:
                    let a = UnsafeRawPointer(sa).load(as: sockaddr_in6.self).sin6_addr
                    out.append(withUnsafeBytes(of: a) { Array($0) })
                default: break
                }
            }
            cursor = entry.pointee.ifa_next
        }
        return out
    }
}
