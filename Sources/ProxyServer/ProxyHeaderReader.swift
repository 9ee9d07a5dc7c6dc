import EventLoop
import Glibc
import HTTPWire

/// The stage before a client connection on a `proxy_protocol` listener: reads the load balancer's
/// PROXY protocol header, and only the header, off the socket, then names the real client.
///
/// Bytes are peeked and only the header's are taken, so whatever follows it (the start of a
/// request, a TLS ClientHello) stays in the socket for the connection that reads it next.
final class ProxyHeaderReader {
    enum Outcome {
        /// The header's client, or the socket's own peer for LOCAL, UNKNOWN and non-IP headers.
        case client(SocketAddress)
        case failed(String)
        /// Shutdown came first.
        case abandoned
    }

    let fd: Int32
    /// The load balancer.
    let peer: SocketAddress
    let tls: Bool
    private var watch: SocketWatch?
    private var deadline: Timer?
    /// Header bytes already taken from the socket (a header split across several reads).
    private var taken: [UInt8] = []
    private var finish: ((ProxyHeaderReader, Outcome) -> Void)?

    init(fd: Int32, peer: SocketAddress, tls: Bool) {
        self.fd = fd
        self.peer = peer
        self.tls = tls
    }

    /// Waits up to `timeout` seconds for a whole header; `finish` runs once, on the loop.
    func start(loop: EventLoop, timeout: Double, finish: @escaping (ProxyHeaderReader, Outcome) -> Void) {
        self.finish = finish
        let t = Timer(loop: loop) { [unowned self] in
            self.end(.failed("no complete PROXY protocol header within \(timeout) s (limits.client_header_timeout)"))
        }
        t.schedule(after: timeout)
        deadline = t
        watch = SocketWatch(loop: loop, socket: fd) { [unowned self] in self.readable() }
        // The header often came with the connection: one look now saves a loop turn.
        readable()
    }

    private func readable() {
        guard let peeked = SocketWatch.peek(fd, max: ProxyProtocolHeader.maxLength - taken.count) else {
            return end(.failed("closed before a complete PROXY protocol header"))
        }
        guard !peeked.isEmpty else { return }
        switch ProxyProtocolHeader.parse(taken + peeked) {
        case .needMore:
            // Every byte so far is the header's: take them, so the socket reports only new ones.
            guard SocketWatch.discard(fd, count: peeked.count) else { return end(.failed("socket failed")) }
            taken += peeked
        case .invalid(let why):
            end(.failed(why))
        case .parsed(let header):
            guard SocketWatch.discard(fd, count: header.length - taken.count) else { return end(.failed("socket failed")) }
            let client = header.source.flatMap { SocketAddress(addressBytes: $0.address, port: $0.port) } ?? peer
            end(.client(client))
        }
    }

    /// Stops watching; the socket is handed on or closed by `finish`.
    private func end(_ outcome: Outcome) {
        watch?.cancel()
        deadline?.cancel()
        guard let f = finish else { return }
        finish = nil
        f(self, outcome)
    }

    /// Shutdown: the socket is closed unread.
    func abandon() {
        end(.abandoned)
    }
}
