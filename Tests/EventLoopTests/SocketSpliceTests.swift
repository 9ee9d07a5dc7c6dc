@preconcurrency import CLibevent
import Glibc
import Testing
@testable import EventLoop

/// One spliced direction between real sockets (socketpairs), driven by the real loop; the test's
/// own ends are fed and drained from a repeating timer on the same loop.
@Suite struct SocketSpliceTests {
    private static func byte(_ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: i &* 31 &+ i >> 12) }

    @Test func bytesAndTheEndOfStreamArriveInOrder() {
        let loop = EventLoop()
        let (writer, source) = socketPair()
        let (destination, reader) = socketPair()
        defer { for fd in [writer, source, destination, reader] { close(fd) } }
        var ends: [SocketSplice.End] = []
        guard let splice = SocketSplice(loop: loop, from: source, to: destination, onEnd: { ends.append($0) }) else {
            Issue.record("no pipe")
            return
        }
        let total = 3 << 20
        var sent = 0
        var received: [UInt8] = []
        var readerSawEnd = false
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let feeder = Timer(loop: loop, repeating: true) {
            while sent < total {
                let n = min(chunk.count, total - sent)
                for i in 0..<n { chunk[i] = SocketSpliceTests.byte(sent + i) }
                let w = chunk.withUnsafeBytes { send(writer, $0.baseAddress, n, 0) }
                if w <= 0 { break }
                sent += w
            }
            if sent == total { shutdown(writer, Int32(SHUT_WR)) }
            while true {
                let r = chunk.withUnsafeMutableBytes { recv(reader, $0.baseAddress, $0.count, 0) }
                if r > 0 { received += chunk[0..<r]; continue }
                if r == 0 { readerSawEnd = true; loop.stop() }
                break
            }
        }
        feeder.schedule(after: 0.001)
        splice.start()
        runLoop(loop, atMost: 10)
        feeder.cancel()
        #expect(ends == [.finished])
        #expect(splice.bytes == total)
        #expect(readerSawEnd)
        #expect(received.count == total)
        #expect(received.indices.allSatisfy { received[$0] == SocketSpliceTests.byte($0) })
    }

    @Test func aDestinationThatWillNotTakeMoreEndsItWithAnError() {
        signal(SIGPIPE, SIG_IGN)
        let loop = EventLoop()
        let (writer, source) = socketPair()
        let (destination, reader) = socketPair()
        defer { for fd in [writer, source, destination] { close(fd) } }
        close(reader)
        var ends: [SocketSplice.End] = []
        let splice = SocketSplice(loop: loop, from: source, to: destination, onEnd: { ends.append($0); loop.stop() })
        _ = send(writer, "lost", 4, 0)
        splice?.start()
        runLoop(loop, atMost: 2)
        #expect(ends == [.failed(EPIPE)])
    }

    @Test func aSourceThatCannotSpliceIsReportedBeforeAnythingMoves() {
        // An eventfd has no splice support (EINVAL): the caller keeps relaying such ends itself.
        let loop = EventLoop()
        let source = eventfd(1, Int32(EFD_NONBLOCK))
        let (destination, reader) = socketPair()
        defer { for fd in [source, destination, reader] { close(fd) } }
        var ends: [SocketSplice.End] = []
        let splice = SocketSplice(loop: loop, from: source, to: destination, onEnd: { ends.append($0); loop.stop() })
        splice?.start()
        runLoop(loop, atMost: 2)
        #expect(ends == [.unsupported])
        #expect(splice?.bytes == 0)
        var counter: UInt64 = 0
        #expect(read(source, &counter, 8) == 8 && counter == 1)   // left for the caller
    }

    @Test func closeStopsEverythingWithoutACallback() {
        let loop = EventLoop()
        let (writer, source) = socketPair()
        let (destination, reader) = socketPair()
        defer { for fd in [writer, source, destination, reader] { close(fd) } }
        var ends: [SocketSplice.End] = []
        let splice = SocketSplice(loop: loop, from: source, to: destination, onEnd: { ends.append($0) })
        splice?.start()
        splice?.close()
        _ = send(writer, "after", 5, 0)
        shutdown(writer, Int32(SHUT_WR))
        runLoop(loop, atMost: 0.2)
        #expect(ends.isEmpty)
        var buf = [UInt8](repeating: 0, count: 16)
        #expect(recv(reader, &buf, 16, 0) == -1)   // nothing relayed, no end of stream either
    }
}
