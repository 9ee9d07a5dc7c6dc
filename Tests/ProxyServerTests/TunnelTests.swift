import Glibc
import Testing
import EventLoop
@testable import ProxyServer

/// A tunnel between two real socket pairs on the real loop: a small direction and a bulk one, each
/// ending with a half-close, relayed in user space or by splice(2) as `bulkRead` says.
@Suite struct TunnelTests {
    private func pair() -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
        precondition(rc == 0)
        return (fds[0], fds[1])
    }

    /// One end of the test: sends `outgoing`, then shuts down its sending side; keeps what arrives.
    final class Peer {
        let fd: Int32
        let outgoing: [UInt8]
        var sent = 0
        var received: [UInt8] = []
        var sawEnd = false
        init(fd: Int32, outgoing: [UInt8]) { self.fd = fd; self.outgoing = outgoing }

        func step() {
            while sent < outgoing.count {
                let n = outgoing[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                sent += n
                if sent == outgoing.count { shutdown(fd, Int32(SHUT_WR)) }
            }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while !sawEnd {
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n > 0 { received += chunk[0..<n] } else { sawEnd = n == 0; break }
            }
        }
    }

    @Test(arguments: [64 * 1024, 0, nil] as [Int?])
    func bothDirectionsArriveWhole(bulkRead: Int?) {
        let loop = EventLoop()
        let (client, clientSide) = pair()
        let (originSide, origin) = pair()
        defer { close(client); close(origin) }
        let small = Array("small request".utf8)
        let bulk = (0..<(2 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 10) }
        let clientPeer = Peer(fd: client, outgoing: small)
        let originPeer = Peer(fd: origin, outgoing: bulk)
        var closes = 0
        let tunnel = Tunnel(Stream(loop: loop, acceptedSocket: clientSide), Stream(loop: loop, acceptedSocket: originSide),
                            loop: loop, bulkRead: bulkRead) { _ in closes += 1 }
        var spliced: [Bool] = []
        let driver = Timer(loop: loop, repeating: true) {
            clientPeer.step()
            originPeer.step()
            if spliced.isEmpty, clientPeer.received.count == bulk.count {
                spliced = [tunnel.isSpliced(fromA: true), tunnel.isSpliced(fromA: false)]
            }
            if closes > 0, clientPeer.sawEnd, originPeer.sawEnd { loop.stop() }
        }
        driver.schedule(after: 0.001)
        tunnel.start()
        let guardTimer = Timer(loop: loop) { loop.stop() }
        guardTimer.schedule(after: 10)
        loop.run()
        driver.cancel()
        guardTimer.cancel()
        #expect(closes == 1)
        #expect(clientPeer.received == bulk)
        #expect(originPeer.received == small)
        #expect(tunnel.bytesFromA == small.count)
        #expect(tunnel.bytesFromB == bulk.count)
        // A 64 KiB read makes only the bulk direction splice; 0 splices both; nil neither.
        switch bulkRead {
        case 0: #expect(spliced == [true, true])
        case nil: #expect(spliced == [false, false])
        default: #expect(spliced == [false, true])
        }
    }
}
