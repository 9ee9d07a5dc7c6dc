import EventLoop
import HTTP2
import HTTPWire

/// An https origin that chose `h2` by ALPN: one TLS connection, one nghttp2 client session, and a
/// stream per request. Each request's task gets an in-memory `Stream` and does over it exactly
/// what it does over an HTTP/1.1 connection (the same framing checks, timeouts, desync guards and
/// retries): the request it writes is read here and sent as HEADERS and DATA, and the answer comes
/// back written as HTTP/1.1 (`Connection: close`, so each memory stream carries one exchange and
/// the pool never keeps it idle). The pool counts each stream as a connection, so the per-host
/// limit counts streams.
final class H2OriginConnection: StreamDelegate, H2ClientSessionDelegate, MemoryStreamPeer {
    unowned(unsafe) let session: Session
    let key: OriginKey
    private let socket: Stream
    private let h2: H2ClientSession
    private var exchanges: [ObjectIdentifier: H2OriginExchange] = [:]
    private var byStream: [Int32: H2OriginExchange] = [:]
    private var closed = false
    private var idle: Timer?

    static let socketHighWater = 256 * 1024
    private static let requestLimits = HeadLimits(maxHeadBytes: 1 << 20, maxHeaderCount: 10_000, maxRequestLineBytes: 1 << 20)

    init(session: Session, key: OriginKey, socket: Stream) throws(H2SessionError) {
        self.session = session
        self.key = key
        self.socket = socket
        h2 = try H2ClientSession()
    }

    func start() {
        h2.delegate = self
        socket.delegate = self
        socket.setWriteLowWatermark(H2OriginConnection.socketHighWater / 4)
        socket.enableReading()
        flush()
    }

    /// A stream for one more request, if the origin takes one now.
    func openStream() -> Stream? {
        guard !closed, h2.acceptsStreams, h2.openStreams + exchanges.count < 4_096 else { return nil }
        idle?.cancel()
        let stream = Stream.inMemory(loop: session.loop, peer: self)
        exchanges[ObjectIdentifier(stream)] = H2OriginExchange(stream: stream)
        return stream
    }

    var acceptsStreams: Bool { !closed && h2.acceptsStreams }

    /// Some request is still on it.
    var isBusy: Bool { !exchanges.isEmpty }

    // MARK: - The socket

    func streamReadable(_ stream: Stream) {
        let input = socket.input
        var failure: H2SessionError?
        while input.count > 0, failure == nil {
            failure = input.withFirstSegment { bytes -> H2SessionError? in
                do throws(H2SessionError) { try h2.receive(bytes) } catch { return error }
                return nil
            }
            if failure == nil { input.drain(input.withFirstSegment { $0.count }) }
        }
        if failure != nil { return close() }
        flush()
    }

    func streamDrained(_ stream: Stream) { flush() }

    func stream(_ stream: Stream, event: StreamEvent) {
        if event != .connected { close() }
    }

    private func flush() {
        guard !closed else { return }
        let output = socket.output
        do throws(H2SessionError) {
            try h2.send { bytes in
                output.append(bytes)
                return output.count < H2OriginConnection.socketHighWater
            }
        } catch {
            return close()
        }
        if !h2.isAlive { close() }
    }

    /// The connection is over (the origin ended it, an error, idle): every open exchange hears
    /// an error, as from a reset socket.
    func close() {
        guard !closed else { return }
        closed = true
        idle?.cancel()
        idle = nil
        for ex in exchanges.values { ex.stream.peerAborted() }
        exchanges.removeAll()
        byStream.removeAll()
        h2.delegate = nil
        if let tls = Optional(socket), tls.isTLS { session.tls.rememberSession(of: tls, origin: key.description) }
        socket.close()
        session.h2ConnectionClosed(self)
    }

    private func noteIdle() {
        guard exchanges.isEmpty, !closed else { return }
        if idle == nil { idle = Timer(loop: session.loop) { [unowned self] in self.close() } }
        idle?.schedule(after: session.configuration.idleConnectionTimeout)
    }

    // MARK: - Requests, from the tasks' memory streams

    func memoryStreamHasOutput(_ stream: Stream) {
        guard let ex = exchanges[ObjectIdentifier(stream)] else {
            stream.output.drain(stream.output.count)
            return
        }
        if ex.id == nil {
            guard submit(ex) else { return }
        }
        if let id = ex.id { h2.resume(id) }
        flush()
    }

    /// Reads the request head the task wrote and submits it; false while it is incomplete.
    private func submit(_ ex: H2OriginExchange) -> Bool {
        let output = ex.stream.output
        var head = RequestHead()
        let parsed: Int?
        do {
            // A small prefix first: a request's body may already be queued behind its head.
            var window = 4_096
            while true {
                let take = min(window, output.count)
                let got = try output.withContiguousPrefix(maxBytes: take) { bytes throws(HTTPWireError) in
                    try RequestParser.parse(bytes, into: &head, limits: H2OriginConnection.requestLimits)
                }
                if got != nil || take == output.count || window >= 1 << 20 {
                    parsed = got
                    break
                }
                window = min(window * 8, 1 << 20)
            }
        } catch {
            ex.stream.peerAborted()
            return false
        }
        guard let length = parsed else { return false }
        output.drain(length)
        ex.stream.peerTook(length)
        head.removeFieldsNominatedByConnection()
        var fields: [(name: [UInt8], value: [UInt8])] = []
        var authority: [UInt8] = []
        var regular: [(name: [UInt8], value: [UInt8])] = []
        head.headers.storage.withUnsafeBytes { all in
            for f in head.headers.fields {
                let name = all[f.name.start..<(f.name.start + f.name.count)].map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
                let value = Array(all[f.value.start..<(f.value.start + f.value.count)])
                switch name {
                case H2OriginConnection.host: authority = value
                case H2OriginConnection.connection, H2OriginConnection.keepAlive, H2OriginConnection.proxyConnection,
                     H2OriginConnection.transferEncoding, H2OriginConnection.upgrade, H2OriginConnection.te:
                    continue
                default: regular.append((name, value))
                }
            }
        }
        let method = head.headers.storage.withUnsafeBytes { Array($0[head.methodRange.start..<(head.methodRange.start + head.methodRange.count)]) }
        let target = head.headers.storage.withUnsafeBytes { Array($0[head.target.start..<(head.target.start + head.target.count)]) }
        fields.append((H2OriginConnection.methodName, method))
        fields.append((H2OriginConnection.schemeName, H2OriginConnection.https))
        fields.append((H2OriginConnection.authorityName, authority))
        fields.append((H2OriginConnection.pathName, target))
        fields += regular
        ex.requestFraming = head.framing
        ex.isHead = head.method == .head
        let hasBody: Bool
        switch head.framing {
        case .contentLength(let n): hasBody = n > 0; ex.requestRemaining = n
        case .chunked: hasBody = true
        default: hasBody = false
        }
        guard let id = h2.request(fields, hasBody: hasBody) else {
            ex.stream.peerAborted()
            return false
        }
        ex.id = id
        byStream[id] = ex
        return true
    }

    func h2RequestBody(_ id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        guard let ex = byStream[id] else { return .bytes(0, end: true) }
        switch ex.requestFraming {
        case .contentLength:
            let want = min(buffer.count, ex.requestRemaining)
            let n = ex.stream.output.remove(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<want]))
            ex.stream.peerTook(n)
            ex.requestRemaining -= n
            if ex.requestRemaining == 0 { return .bytes(n, end: true) }
            return n == 0 ? .wait : .bytes(n, end: false)
        case .chunked:
            // Decoded only as the origin's windows take it: the rest waits in the task's output,
            // which holds the upload back.
            let taken: (copied: Int, drained: Int)
            do {
                taken = try ex.chunked.take(from: ex.stream.output, into: buffer)
            } catch {
                return .cut
            }
            ex.stream.peerTook(taken.drained)
            if ex.chunked.isDone { return .bytes(taken.copied, end: true) }
            return taken.copied == 0 ? .wait : .bytes(taken.copied, end: false)
        default:
            return .bytes(0, end: true)
        }
    }

    func memoryStreamConsumed(_ stream: Stream, count: Int) {
        guard let ex = exchanges[ObjectIdentifier(stream)], let id = ex.id else { return }
        let framing = min(count, ex.framingPending)
        ex.framingPending -= framing
        let body = min(count - framing, ex.bodyUnconsumed)
        ex.bodyUnconsumed -= body
        h2.consumed(id, body)
        if body > 0 { flush() }
    }

    func memoryStreamFinished(_ stream: Stream, reset: Bool) {
        guard let ex = exchanges.removeValue(forKey: ObjectIdentifier(stream)) else { return }
        if let id = ex.id {
            // (The connection's window for answer bytes the task never took opened as they came.)
            if byStream.removeValue(forKey: id) != nil, !ex.responseEnded {
                h2.reset(id, code: 0x8)  // the task gave up: CANCEL
            }
        }
        noteIdle()
        flush()
    }

    // MARK: - Answers, written into the tasks' memory streams as HTTP/1.1

    func h2Response(_ id: Int32, head: H2ResponseHead, endStream: Bool) {
        guard let ex = byStream[id] else { return }
        var text: [UInt8] = Array("HTTP/1.1 \(head.status) \(reasonPhrase(for: head.status))\r\n".utf8)
        var length: Int?
        for f in head.fields {
            if f.name == H2OriginConnection.contentLength {
                guard length == nil, let n = Int(String(decoding: f.value, as: UTF8.self)), n >= 0 else { continue }
                length = n
            }
            // nghttp2 has refused CR, LF and NUL in values and upper case in names.
            text += f.name
            text += H2OriginConnection.colonSpace
            text += f.value
            text += H2OriginConnection.crlf
        }
        let bodyless = ex.isHead || head.status == 204 || head.status == 304 || endStream
        if !bodyless, length == nil {
            text += H2OriginConnection.chunkedLine
            ex.chunkedAnswer = true
        } else if endStream, length == nil, !ex.isHead, head.status != 204, head.status != 304 {
            text += H2OriginConnection.emptyLength
        }
        text += H2OriginConnection.closeLine
        text += H2OriginConnection.crlf
        ex.headWritten = true
        ex.framingPending += text.count
        text.withUnsafeBytes { ex.stream.peerAppend($0) }
        if endStream { h2ResponseEnded(id) }
    }

    func h2ResponseBody(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let ex = byStream[id], !ex.stream.isClosed else {
            h2.consumed(id, bytes.count)  // nobody reads it
            return
        }
        guard ex.headWritten else {
            // DATA before a final head (after a 1xx only): nothing may reach the task unframed.
            h2.consumed(id, bytes.count)
            h2.reset(id, code: 0x1)
            return
        }
        ex.bodyUnconsumed += bytes.count
        if ex.chunkedAnswer {
            let size = Array((String(bytes.count, radix: 16) + "\r\n").utf8)
            size.withUnsafeBytes { ex.stream.peerAppend($0) }
            ex.stream.peerAppend(bytes)
            H2OriginConnection.crlf.withUnsafeBytes { ex.stream.peerAppend($0) }
            ex.framingPending += size.count + 2
        } else {
            ex.stream.peerAppend(bytes)
        }
    }

    func h2ResponseEnded(_ id: Int32) {
        guard let ex = byStream[id], !ex.responseEnded else { return }
        ex.responseEnded = true
        if ex.chunkedAnswer {
            H2OriginConnection.lastChunk.withUnsafeBytes { ex.stream.peerAppend($0) }
            ex.framingPending += H2OriginConnection.lastChunk.count
        }
    }

    func h2StreamClosed(_ id: Int32, errorCode: UInt32) {
        guard let ex = byStream.removeValue(forKey: id) else { return }
        // What the task has not read yet is read from its input; the stream's window is gone
        // with it, and the connection's opened as the bytes came.
        ex.bodyUnconsumed = 0
        // Cut before its end (reset by the origin, refused): the task sees a connection error.
        if !ex.responseEnded || errorCode != 0 { ex.stream.peerAborted() }
    }

    private static let host = Array("host".utf8)
    private static let connection = Array("connection".utf8)
    private static let keepAlive = Array("keep-alive".utf8)
    private static let proxyConnection = Array("proxy-connection".utf8)
    private static let transferEncoding = Array("transfer-encoding".utf8)
    private static let upgrade = Array("upgrade".utf8)
    private static let te = Array("te".utf8)
    private static let contentLength = Array("content-length".utf8)
    private static let methodName = Array(":method".utf8)
    private static let schemeName = Array(":scheme".utf8)
    private static let authorityName = Array(":authority".utf8)
    private static let pathName = Array(":path".utf8)
    private static let https = Array("https".utf8)
    private static let colonSpace = Array(": ".utf8)
    private static let crlf = Array("\r\n".utf8)
    private static let chunkedLine = Array("Transfer-Encoding: chunked\r\n".utf8)
    private static let emptyLength = Array("Content-Length: 0\r\n".utf8)
    private static let closeLine = Array("Connection: close\r\n".utf8)
    private static let lastChunk = Array("0\r\n\r\n".utf8)
}

/// One request on an `H2OriginConnection`.
final class H2OriginExchange {
    let stream: Stream
    var id: Int32?
    var requestFraming: BodyFraming = .none
    var requestRemaining = 0
    /// A chunked request body, taken out of the task's output as the origin's windows allow.
    var chunked = ChunkedPull()
    var isHead = false
    var headWritten = false
    var chunkedAnswer = false
    var responseEnded = false
    /// Bytes written into the task's input that are not the origin's body (head, chunk framing),
    /// not yet read by the task.
    var framingPending = 0
    /// Body bytes received and not yet taken by the task: their window is still closed.
    var bodyUnconsumed = 0

    init(stream: Stream) { self.stream = stream }
}
