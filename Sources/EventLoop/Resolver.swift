@preconcurrency import CLibevent
import Glibc

/// Asynchronous name resolution with libevent's evdns: /etc/hosts first, then the name servers of
/// /etc/resolv.conf (or the ones configured). Numeric addresses never touch DNS.
public final class Resolver {
    private let dns: OpaquePointer

    public enum Failure: Error, Sendable, Equatable {
        /// The name does not exist or has no address (message from evdns).
        case notFound(String)
    }

    /// A configured name server libevent would not take.
    public struct BadNameServer: Error, Sendable, CustomStringConvertible {
        public let server: String
        public var description: String { "name server \(server) is not an address libevent accepts" }
    }

    /// - Parameter nameServers: `host:port` strings to ask instead of resolv.conf's.
    public init(loop: EventLoop, nameServers: [String] = []) throws(BadNameServer) {
        dns = evdns_base_new(loop.base, 0)!
        if nameServers.isEmpty {
            _ = evdns_base_resolv_conf_parse(dns, larder_DNS_OPTIONS_ALL, "/etc/resolv.conf")
        } else {
            _ = evdns_base_load_hosts(dns, "/etc/hosts")
            for server in nameServers where evdns_base_nameserver_ip_add(dns, server) != 0 {
                evdns_base_free(dns, 0)
                throw BadNameServer(server: server)
            }
        }
        _ = evdns_base_set_option(dns, "timeout:", "3")
        _ = evdns_base_set_option(dns, "attempts:", "2")
    }

    deinit { evdns_base_free(dns, 1) }

    /// Resolves `host`; `completion` runs exactly once on the loop, possibly before this returns
    /// (numeric hosts, cached /etc/hosts entries). Cancelling suppresses the completion.
    @discardableResult
    public func resolve(host: String, port: Int,
                        _ completion: @escaping (Result<[SocketAddress], Failure>) -> Void) -> ResolveRequest {
        let request = ResolveRequest(completion: completion)
        if let literal = SocketAddress(ipLiteral: host, port: port) {
            request.finish(.success([literal]))
            return request
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        let ctx = Unmanaged.passRetained(request).toOpaque()
        let handle = evdns_getaddrinfo(dns, host, String(port), &hints, { result, list, arg in
            let request = Unmanaged<ResolveRequest>.fromOpaque(arg!).takeRetainedValue()
            request.pending = nil
            if result != 0 {
                if let list { evutil_freeaddrinfo(list) }
                let message = String(cString: evutil_gai_strerror(result))
                request.finish(.failure(.notFound(message)))
                return
            }
            var addresses: [SocketAddress] = []
            var cursor = list
            while let entry = cursor {
                if let sa = entry.pointee.ai_addr {
                    addresses.append(SocketAddress(sa, length: socklen_t(entry.pointee.ai_addrlen)))
                }
                cursor = entry.pointee.ai_next
            }
            if let list { evutil_freeaddrinfo(list) }
            // Prefer IPv4 first: loopback origins in tests and most servers listen there.
            addresses.sort { !$0.isIPv6 && $1.isIPv6 }
            request.finish(addresses.isEmpty ? .failure(.notFound("no address")) : .success(addresses))
        }, ctx)
        if !request.isFinished { request.pending = handle }
        return request
    }
}

/// An outstanding resolution.
public final class ResolveRequest {
    var pending: OpaquePointer?
    private var completion: ((Result<[SocketAddress], Resolver.Failure>) -> Void)?
    private(set) var isFinished = false

    init(completion: @escaping (Result<[SocketAddress], Resolver.Failure>) -> Void) {
        self.completion = completion
    }

    func finish(_ result: Result<[SocketAddress], Resolver.Failure>) {
        isFinished = true
        let c = completion
        completion = nil
        c?(result)
    }

    /// The completion will not run.
    public func cancel() {
        completion = nil
        if let p = pending {
            pending = nil
            evdns_getaddrinfo_cancel(p)
        }
    }
}
