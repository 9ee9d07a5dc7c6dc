import EventLoop

/// A byte pump between two streams (CONNECT tunnels, upgraded connections). Each direction stops
/// reading when the other side's output backs up, and a FIN on one side becomes a write shutdown on
/// the other (half-close), so protocols that signal "done sending" keep working.
final class Tunnel {
    private let a: Stream
    private let b: Stream
    private var aEnded = false
    private var bEnded = false
    private var onClose: ((Tunnel) -> Void)?
    private var sides: [TunnelSide] = []
    /// Output bytes beyond which the sending side stops reading.
    private let highWater = 1 << 20
    /// Bytes relayed from `a` to `b`, and from `b` to `a`, for the access log.
    private(set) var bytesFromA = 0
    private(set) var bytesFromB = 0

    init(_ a: Stream, _ b: Stream, onClose: @escaping (Tunnel) -> Void) {
        self.a = a
        self.b = b
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

    fileprivate func readable(isA: Bool) {
        if isA { pump(from: a, to: b) } else { pump(from: b, to: a) }
    }

    fileprivate func drained(isA: Bool) {
        // `isA` drained: the other side may read again.
        let (reader, ended) = isA ? (b, bEnded) : (a, aEnded)
        if !ended, !reader.isClosed, !reader.isReading { reader.enableReading() }
        if aEnded && bEnded { finishIfFlushed() }
    }

    fileprivate func event(isA: Bool, _ event: StreamEvent) {
        switch event {
        case .endOfStream:
            let (from, to) = isA ? (a, b) : (b, a)
            pump(from: from, to: to)
            if isA { aEnded = true } else { bEnded = true }
            to.shutdownWriteWhenFlushed()
            if aEnded && bEnded { finishIfFlushed() }
        case .connected:
            break
        case .error, .timeout:
            close()
        }
    }

    private func pump(from: Stream, to: Stream) {
        let n = from.input.count
        if n > 0 {
            if from === a { bytesFromA += n } else { bytesFromB += n }
            to.output.moveAll(from: from.input)
        }
        if to.output.count > highWater { from.disableReading() }
    }

    private func finishIfFlushed() {
        if a.output.count == 0 && b.output.count == 0 { close() }
    }

    func close() {
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
