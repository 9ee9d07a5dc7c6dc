import EventLoop
import Glibc

/// A byte pump between two streams (CONNECT tunnels, upgraded connections). Each direction stops
/// reading when the other side's output backs up, and a FIN on one side becomes a write shutdown on
/// the other (half-close), so protocols that signal "done sending" keep working.
///
/// Between two plain sockets, a direction that carries bulk (one read of `bulkRead` bytes or more)
/// moves on to splice(2) (`SocketSplice`) once what it buffered is written, in order: its bytes then
/// never enter user space. Small exchanges stay here, where they cost one call each way, not two.
final class Tunnel {
    private let a: Stream
    private let b: Stream
    private let loop: EventLoop
    private var aEnded = false
    private var bEnded = false
    private var onClose: ((Tunnel) -> Void)?
    private var sides: [TunnelSide] = []
    /// Output bytes beyond which the sending side stops reading.
    private let highWater: Int
    /// A tunnel's `highWater` unless its client's side asks for less (an HTTP/2 stream, whose
    /// connection carries up to `http2.max_concurrent_streams` of them).
    static let defaultHighWater = 1 << 20
    /// A read at least this large makes its direction splice; nil: never (TLS on either side, or
    /// splice(2) refused once).
    private var bulkRead: Int?
    /// Per direction (0: from `a`, 1: from `b`): waiting for its buffered bytes to be written
    /// before splicing, and its splice once started (kept after it ends, for its byte count).
    private var spliceWanted = [false, false]
    private var splices: [SocketSplice?] = [nil, nil]
    /// Bytes relayed through the streams' buffers from `a` to `b`, and from `b` to `a`.
    private var bufferedFromA = 0
    private var bufferedFromB = 0

    /// Bytes relayed from `a` to `b`, and from `b` to `a`, for the access log.
    var bytesFromA: Int { bufferedFromA + (splices[0]?.bytes ?? 0) }
    var bytesFromB: Int { bufferedFromB + (splices[1]?.bytes ?? 0) }

    /// `LARDER_TEST_TUNNEL_SPLICE`: `off` keeps every tunnel in user space, `always` splices from the
    /// first byte; otherwise bulk directions splice after a 64 KiB read. For tests and measurements.
    static let defaultBulkRead: Int? = {
        switch getenv("LARDER_TEST_TUNNEL_SPLICE").map({ String(cString: $0) }) {
        case "off": return nil
        case "always": return 0
        default: return 64 * 1024
        }
    }()

    init(_ a: Stream, _ b: Stream, loop: EventLoop, highWater: Int = Tunnel.defaultHighWater,
         bulkRead: Int? = Tunnel.defaultBulkRead, onClose: @escaping (Tunnel) -> Void) {
        self.a = a
        self.b = b
        self.loop = loop
        self.highWater = highWater
        self.bulkRead = a.isPlainSocket && b.isPlainSocket ? bulkRead : nil
        self.onClose = onClose
    }

    func start() {
        let sa = TunnelSide(tunnel: self, isA: true)
        let sb = TunnelSide(tunnel: self, isA: false)
        sides = [sa, sb]
        a.delegate = sa
        b.delegate = sb
        a.setTimeouts(read: nil, write: nil)
        b.setTimeouts(read: nil, write: nil)
        a.setWriteLowWatermark(highWater / 2)
        b.setWriteLowWatermark(highWater / 2)
        a.enableReading()
        b.enableReading()
        pump(from: a, to: b)
        pump(from: b, to: a)
    }

    /// Whether the direction from `a` (or from `b`) moves by splice(2) now, or did until it ended.
    func isSpliced(fromA: Bool) -> Bool { splices[fromA ? 0 : 1] != nil }

    fileprivate func readable(isA: Bool) {
        if isA { pump(from: a, to: b) } else { pump(from: b, to: a) }
    }

    fileprivate func drained(isA: Bool) {
        // `isA` drained: the other side may read again, or splice once nothing of it is left here.
        let d = isA ? 1 : 0
        let (reader, ended) = isA ? (b, bEnded) : (a, aEnded)
        if spliceWanted[d] {
            spliceIfFlushed(d)
        } else if splices[d] == nil, !ended, !reader.isClosed, !reader.isReading {
            reader.enableReading()
        }
        if aEnded && bEnded { finishIfFlushed() }
    }

    fileprivate func event(isA: Bool, _ event: StreamEvent) {
        switch event {
        case .endOfStream:
            let (from, to) = isA ? (a, b) : (b, a)
            pump(from: from, to: to)
            if isA { aEnded = true } else { bEnded = true }
            spliceWanted[isA ? 0 : 1] = false
            to.shutdownWriteWhenFlushed()
            if aEnded && bEnded { finishIfFlushed() }
        case .connected:
            break
        case .error, .timeout:
            close()
        }
    }

    private func pump(from: Stream, to: Stream) {
        let d = from === a ? 0 : 1
        let n = from.input.count
        if n > 0 {
            if d == 0 { bufferedFromA += n } else { bufferedFromB += n }
            to.output.moveAll(from: from.input)
        }
        if let bulkRead, n >= bulkRead, splices[d] == nil { spliceWanted[d] = true }
        if spliceWanted[d] {
            spliceIfFlushed(d)
        } else if to.output.count > highWater {
            from.disableReading()
        }
    }

    /// Direction `d` moves on to splice(2) once everything it buffered is written; until then its
    /// source is not read, so no byte can overtake another.
    private func spliceIfFlushed(_ d: Int) {
        let (from, to) = d == 0 ? (a, b) : (b, a)
        guard from.input.count == 0, to.output.count == 0 else {
            from.disableReading()
            return
        }
        spliceWanted[d] = false
        guard !from.isClosed, !to.isClosed,
              let splice = SocketSplice(loop: loop, from: from.fileDescriptor, to: to.fileDescriptor,
                                        onEnd: { [unowned self] in self.spliceEnded(d, $0) }) else {
            bulkRead = nil  // no pipe to be had
            return from.enableReading()
        }
        from.disableReading()
        splices[d] = splice
        splice.start()
    }

    private func spliceEnded(_ d: Int, _ end: SocketSplice.End) {
        switch end {
        case .finished:
            if d == 0 { aEnded = true } else { bEnded = true }
            if aEnded && bEnded { finishIfFlushed() }
        case .failed:
            close()
        case .unsupported:
            // Nothing moved: the tunnel carries on through the streams.
            splices[d] = nil
            bulkRead = nil
            (d == 0 ? a : b).enableReading()
        }
    }

    private func finishIfFlushed() {
        if a.output.count == 0 && b.output.count == 0 { close() }
    }

    func close() {
        // The splices watch the streams' sockets: stopped before the streams close them.
        for s in splices { s?.close() }
        spliceWanted = [false, false]
        a.close()
        b.close()
        sides.removeAll()
        let c = onClose
        onClose = nil
        c?(self)
    }
}

private final class TunnelSide: StreamDelegate {
    unowned let tunnel: Tunnel
    let isA: Bool
    init(tunnel: Tunnel, isA: Bool) { self.tunnel = tunnel; self.isA = isA }
    func streamReadable(_ stream: Stream) { tunnel.readable(isA: isA) }
    func streamDrained(_ stream: Stream) { tunnel.drained(isA: isA) }
    func stream(_ stream: Stream, event: StreamEvent) { tunnel.event(isA: isA, event) }
}
