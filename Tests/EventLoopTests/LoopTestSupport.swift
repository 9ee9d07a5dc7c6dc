import Glibc
@testable import EventLoop

/// A connected pair of non-blocking Unix sockets, for streams and splices driven by a real loop.
func socketPair(_ type: __socket_type = SOCK_STREAM) -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    let rc = socketpair(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
    precondition(rc == 0)
    return (fds[0], fds[1])
}

/// A connected pair of non-blocking TCP sockets over loopback, for what Unix sockets lack (TCP
/// options, urgent data, acknowledged bytes): the accepted end, and the connecting peer, whose
/// receive buffer is `peerReceiveBuffer` when given (set before connecting, so the window follows).
func tcpPair(peerReceiveBuffer: Int32? = nil) -> (accepted: Int32, peer: Int32) {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    precondition(listener >= 0)
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
            precondition(bind(listener, sa, length) == 0 && listen(listener, 1) == 0)
            precondition(getsockname(listener, sa, &length) == 0)
        }
    }
    let peer = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    precondition(peer >= 0)
    if var size = peerReceiveBuffer {
        _ = setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
    withUnsafePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
            precondition(connect(peer, sa, length) == 0)
        }
    }
    let accepted = accept(listener, nil, nil)
    precondition(accepted >= 0)
    for fd in [accepted, peer] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    return (accepted, peer)
}

/// Runs `loop` until something stops it, or `seconds` have passed.
func runLoop(_ loop: EventLoop, atMost seconds: Double) {
    let guardTimer = Timer(loop: loop) { loop.stop() }
    guardTimer.schedule(after: seconds)
    loop.run()
    guardTimer.cancel()
}

/// Records what a stream reports; stops the loop when `until` says so.
final class StreamRecorder: StreamDelegate {
    let loop: EventLoop
    var received: [UInt8] = []
    var drained = 0
    var events: [StreamEvent] = []
    var consume = true
    var until: (StreamRecorder) -> Bool = { _ in false }

    init(loop: EventLoop) { self.loop = loop }

    func streamReadable(_ stream: Stream) {
        if consume {
            received += stream.input.copyBytes()
            stream.input.drain(stream.input.count)
        }
        check()
    }
    func streamDrained(_ stream: Stream) { drained += 1; check() }
    func stream(_ stream: Stream, event: StreamEvent) { events.append(event); check() }
    func check() { if until(self) { loop.stop() } }
}

/// Everything a non-blocking socket holds now.
func readAll(_ fd: Int32) -> [UInt8] {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { return out }
        out += chunk[0..<n]
    }
}

/// TCP_NOTSENT_LOWAT as a socket reports it; 0 when unset (the kernel's default is "no limit").
func unsentLimit(of fd: Int32) -> Int32 {
    var value: Int32 = -1
    var len = socklen_t(MemoryLayout<Int32>.size)
    guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_NOTSENT_LOWAT, &value, &len) == 0 else { return -1 }
    return value
}

func urgentDataInline(_ fd: Int32) -> Bool {
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &value, &length) == 0 && value != 0
}
