import EventLoop
import HTTP2
import HTTPWire
import Logging
import SessionClient
import Statistics

/// One client connection speaking HTTP/2: the socket, nghttp2's session, and one exchange per
/// stream. Each stream's request is handed, as the HTTP/1.1 request it stands for
/// (`H2Translation`), to a `ClientConnection` of its own over an in-memory stream, so that every
/// request does over HTTP/2 exactly what it does over HTTP/1.1 (routing, access checks,
/// credentials, the cache and its policy, collapsing, ranges, purge, offline, presets, mirrors,
/// logs, statistics and limits), and the answer comes back as that connection writes it.
///
/// Against hostile clients, besides nghttp2's own checks (`H2ServerSession`): a stream's request
/// starts only once the bytes it arrived in are all read, so a HEADERS frame reset in the same
/// read costs nothing; request bodies open the windows only as their exchange takes them; each
/// stream's queued answer is bounded (`http2.stream_output`), the connection's socket output too,
/// and a stream whose client opens no window for its answer is cut like a slow reader.
final class H2Connection: StreamDelegate, H2ServerSessionDelegate, MemoryStreamPeer {
    unowned(unsafe) let worker: Worker
    let stream: Stream
    let peer: SocketAddress
    let peerAddress: [UInt8]
    /// The address's share of the per-client budgets, held by this connection and lent to its
    /// streams (one connection, whatever its streams).
    let share: ClientShare?
    let overTLS: Bool
    /// The intercepted CONNECT this connection continues, if any.
    let intercepted: InterceptedConnect?
    private let session: H2ServerSession
    private var exchanges = StreamTable<H2Exchange>()
    /// Every stream's exchange until it has closed, whatever became of its stream: a tunnel's
    /// exchange outlives the stream's bookkeeping, and each must end through its own close (its
    /// access-log line, the budgets it holds).
    private var inners: [ObjectIdentifier: ClientConnection] = [:]
    /// Exchanges whose last request left them waiting for another (`leavesExchangeReusable`):
    /// the next such stream's request goes to one of them rather than to a new exchange and
    /// in-memory stream (their buffers, timers and objects made and freed once per stream).
    private var spare: [ClientConnection] = []
    private static let maxSpare = 16
    /// Streams whose answer is complete while the client has not ended its request: reset with
    /// NO_ERROR once the answer's end is out (RFC 9113 §8.1), so none stays open for ever.
    private var answeredEarly: Set<Int32> = []
    /// Checks, every `client_idle_timeout`, for streams whose client neither takes its answer
    /// nor sends the rest of its request: each is reset (a window never opened, a body never
    /// finished), as a slow HTTP/1.1 client is cut.
    private var progress: Timer?
    /// The listener's port: a mirror path is served origin-form only for an authority naming it.
    private let localPort: Int?
    /// Requests that arrived in the bytes being read: started once the read is over, if their
    /// stream is still open.
    private var arrived: [Int32] = []
    /// The ids being started, swapped with `arrived` so that neither array is made anew per read.
    private var starting: [Int32] = []
    /// The HTTP/1.1 heads of the requests that arrived, written one after the other, until they
    /// start: one buffer for them all rather than an array per request.
    private var arrivedHeads = MessageWriter(capacity: 1_024)
    /// Where their field lines lie, so that an exchange reads a head without scanning it again.
    private var arrivedFields: [HeaderField] = []
    private var idle: Timer?
    /// The answer head being read back, reused: its buffers outlive one stream.
    private var answerHead = H2AnswerHead()
    private var draining = false
    /// The requests of one read are being started: their answers leave with its `flush`.
    private var startingArrived = false
    /// Sends what an exchange's answer head left for nghttp2, at the end of this pass of the loop:
    /// the head of an answer whose body is not there yet would otherwise wait for its body.
    private lazy var flushSoon = Timer(loop: worker.loop) { [unowned self] in self.flush() }
    /// Over TLS, sends the staged frames once this pass of the loop has read what was ready.
    private lazy var sendStagedSoon = Timer(loop: worker.loop) { [unowned self] in
        if !self.closed { self.stream.sendStaged() }
    }
    /// Sends more at the loop's next pass, once this pass's share ran out with nothing left for
    /// libevent to call back about (`turnSpent`). Apart from `flushSoon`: arming this one with a
    /// timeout would take that one off the current pass.
    private lazy var sendMoreNextPass = Timer(loop: worker.loop) { [unowned self] in self.flush() }
    private var closing = false
    private var closed = false
    /// Body bytes are moved into DATA frames rather than copied (`H2BodyRead.ready`) on a plain
    /// socket only: over TLS each piece of the output is a record of its own, and a frame's
    /// header apart from its bytes doubled the records (and halved small answers' rate).
    private let movesBodies: Bool

    /// Over TLS, bytes of large frames sent at once in this pass of the loop (`sendRecord`), which
    /// `sentPass` names (the loop's cached time, `EventLoop.now`), and whether the pass's share
    /// (`passShare`) or the room for staged and queued frames (`socketHighWater`) ran out before
    /// nghttp2 did: then the next pass sends more. Per pass, not per flush: an exchange that
    /// refills its output as each frame leaves flushes again in the same pass.
    private var sentNow = 0
    private var sentPass = -1.0
    private var turnSpent = false

    /// Socket output beyond which nghttp2 is not asked for more frames.
    static let socketHighWater = 256 * 1024
    /// Over TLS, the most a connection sends at once (`sendRecord`) in one pass of the loop: about
    /// the most the kernel's send buffer takes by default (4 MiB), so that a client that keeps up
    /// is mostly stopped by a full socket, while one that reads as fast as Larder writes cannot
    /// hold the worker for a whole body. Shares of 256 KiB and 1 MiB cost a 256 KiB answer over
    /// TLS 40 % more CPU or more (a pass of the loop and a timer per share).
    static let passShare = 4 * 1_024 * 1024

    init(worker: Worker, stream: Stream, peer: SocketAddress, share: ClientShare?, overTLS: Bool,
         intercepted: InterceptedConnect?, settings: H2Settings) throws(H2SessionError) {
        self.worker = worker
        self.stream = stream
        self.peer = peer
        peerAddress = peer.addressBytes
        self.share = share
        self.overTLS = overTLS
        self.intercepted = intercepted
        session = try H2ServerSession(settings: settings)
        localPort = SocketAddress.local(of: stream.fileDescriptor)?.port
        movesBodies = stream.isPlainSocket
    }

    /// Takes over the socket: the bytes already read (the preface, perhaps more) come first.
    func start() {
        session.delegate = self
        stream.delegate = self
        stream.setWriteLowWatermark(H2Connection.socketHighWater / 4)
        stream.setTimeouts(read: nil, write: worker.settings.clientIdleTimeout)
        let t = Timer(loop: worker.loop) { [unowned self] in self.idleTimedOut() }
        idle = t
        t.schedule(after: worker.settings.clientHeaderTimeout)
        stream.enableReading()
        readFromClient()
        flush()
    }

    // MARK: - The socket

    func streamReadable(_ stream: Stream) { readFromClient() }

    func streamDrained(_ stream: Stream) { flush() }

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected: return
        case .endOfStream: close(why: nil)
        case .error(let code): close(why: "connection error (errno \(code))")
        case .timeout: close(why: "took less than \(Stream.minimumProgress / 1024) KiB of its answers in \(worker.settings.clientIdleTimeout) s")
        }
    }

    private func readFromClient() {
        guard !closed, !closing else { return }
        let input = stream.input
        var failure: H2SessionError?
        while input.count > 0, failure == nil {
            failure = input.withFirstSegment { bytes -> H2SessionError? in
                do throws(H2SessionError) { try session.receive(bytes) } catch { return error }
                return nil
            }
            if failure == nil { input.drain(input.withFirstSegment { $0.count }) }
        }
        if let failure {
            input.drain(input.count)
            if failure.isFlood {
                protocolFailure("flooded Larder with frames it must answer (SETTINGS, PING)", code: enhanceYourCalm)
            } else {
                protocolFailure("HTTP/2 protocol error: \(failure)", code: protocolError)
            }
            return
        }
        if session.cutOffForResets {
            protocolFailure("reset, or had Larder reset, more than \(H2ServerSession.cancelledStreamLimit) of its streams before their answers (rapid reset)",
                            code: enhanceYourCalm)
            return
        }
        startArrived()
        flush()
    }

    /// Writes what nghttp2 has to send, up to the socket's high-water mark; closes once the session
    /// is over and everything is out.
    private func flush() {
        guard !closed else { return }
        guard sendFrames() else { return }
        if !answeredEarly.isEmpty { endAnsweredStreams() }
        if !session.isAlive || (draining && exchanges.isEmpty && !session.wantsWrite) || closing {
            closing = true
            stream.disableReading()
            stream.sendStaged()
            if stream.output.count == 0, session.wantsWrite {
                // Frames held back while the staged ones filled the share (a GOAWAY among them).
                guard sendFrames() else { return }
                stream.sendStaged()
            }
            if stream.output.count == 0 { close(why: nil) } else { stream.setWriteLowWatermark(0) }
        }
    }

    /// Hands what nghttp2 has to send to the socket, unless its output is backed up: each send
    /// appends a frame before it can look, so a client opening windows without reading would
    /// otherwise grow the output by a frame per read. False when the session failed (closed).
    private func sendFrames() -> Bool {
        guard !socketBackedUp else { return true }
        let output = stream.output
        let pass = worker.loop.now
        if pass != sentPass {
            sentPass = pass
            sentNow = 0
        }
        do throws(H2SessionError) {
            if movesBodies {
                try session.send { bytes in
                    output.append(bytes)
                    return output.count < H2Connection.socketHighWater
                }
            } else {
                // Over TLS, staged to leave at the end of the loop's pass (`sendStagedSoon`), with
                // the answers to the other connections read in it.
                let staged = stream.stagedOutput
                try session.send { bytes in
                    staged.append(bytes)
                    if staged.count + output.count < H2Connection.socketHighWater,
                       sentNow < H2Connection.passShare { return true }
                    turnSpent = true
                    return false
                }
                if staged.count > 0 { sendStagedSoon.fireAtNextTurn() }
            }
        } catch {
            close(why: "HTTP/2 session failed: \(error)")
            return false
        }
        if turnSpent {
            // Frames sent now or staged leave nothing for libevent to call back about once
            // written: more go at the loop's next turn, after the other connections had theirs.
            turnSpent = false
            if output.count == 0 { sendMoreNextPass.schedule(after: 0) }
        }
        return true
    }

    /// What is queued for the socket, staged or in its output, is over the high-water mark.
    private var socketBackedUp: Bool {
        stream.output.count + (movesBodies ? 0 : stream.stagedOutput.count) >= H2Connection.socketHighWater
    }

    /// Answers all out for requests the client has not ended: their streams are reset (NO_ERROR).
    private func endAnsweredStreams() {
        var reset = false
        for id in answeredEarly where session.answerSent(id) {
            answeredEarly.remove(id)
            if let ex = exchanges[id], !ex.requestEnded {
                session.reset(id, code: 0)
                reset = true
            }
        }
        if reset { _ = sendFrames() }
    }

    /// Streams waiting on their client that made too little progress since the last look are reset.
    private func checkProgress() {
        guard !closed else { return }
        for ex in exchanges.allValues {
            let (sent, received) = (ex.sent, ex.received)
            defer { (ex.lastSent, ex.lastReceived) = (sent, received) }
            guard ex.waitsOnClient,
                  !ex.progressed(sent: sent, received: received, windowClosed: session.sendWindow(ex.id) == 0)
            else { continue }
            worker.logger.notice("HTTP/2 client \(peer): stream \(ex.id) made no progress in \(worker.settings.clientIdleTimeout) s (took less than \(Stream.minimumProgress / 1024) KiB of what waits for it, or sent nothing of its unfinished request); resetting it")
            session.reset(ex.id, code: 0x8)
        }
        flush()
        if exchanges.isEmpty { progress?.cancel() }
    }

    /// Ends the connection with GOAWAY `code` (unless nghttp2 has sent one), logged and counted.
    private func protocolFailure(_ why: String, code: UInt32) {
        // The requests of this read start nowhere: their heads go now, not when the connection
        // has ended (which waits for its last answers to leave, as long as a write timeout).
        arrived.removeAll()
        releaseArrivedHeads()
        worker.stats.add(.h2ConnectionErrors)
        worker.logger.notice("HTTP/2 client \(peer): \(why); ending the connection")
        if session.isAlive { session.terminate(code: code) }
        closing = true
        flush()
    }

    private let protocolError: UInt32 = 0x1
    private let enhanceYourCalm: UInt32 = 0xB

    private func idleTimedOut() {
        guard exchanges.isEmpty else { return }
        session.goAway()
        closing = true
        flush()
    }

    /// Server shutdown: GOAWAY; the streams open now finish, then the connection closes.
    func drain() {
        draining = true
        session.goAway()
        flush()
    }

    /// Shutdown grace over.
    func forceClose() { close(why: nil) }

    private func close(why: String?) {
        guard !closed else { return }
        closed = true
        if let why { worker.logger.debug("HTTP/2 client \(peer): \(why)") }
        idle?.cancel()
        idle = nil
        progress?.cancel()
        progress = nil
        exchanges.removeAll()
        arrived.removeAll()
        releaseArrivedHeads()
        session.delegate = nil
        // Every exchange ends now, each through its own close.
        let open = inners
        inners.removeAll()
        spare.removeAll()
        for conn in open.values { conn.carrierClosed() }
        if let intercepted {
            intercepted.logTunnel(carriedBy: stream, client: Array(peer.host.utf8), worker: worker)
        }
        stream.close()
        worker.h2ConnectionClosed(self)
    }

    // MARK: - Requests (nghttp2's callbacks, inside `receive`)

    func h2Request(_ id: Int32, head: inout H2RequestHead, endStream: Bool) {
        worker.stats.add(.h2Streams)
        let form: H2Translation.TargetForm = targetForm(head)
        switch H2Translation.request(head, form: form, endStream: endStream,
                                     webSocketKey: H2Translation.randomWebSocketKey(), into: &arrivedHeads,
                                     fields: &arrivedFields) {
        case .failure(let refusal):
            worker.logger.notice("\(refusal.status) to HTTP/2 client \(peer): \(refusal.reason)")
            let ex = H2Exchange(id: id, inner: nil, request: nil)
            ex.localBody = Array((refusal.reason + "\n").utf8)
            ex.requestEnded = endStream
            exchanges[id] = ex
            watchProgress()
            _ = session.respond(id, status: refusal.status,
                                fields: [(Array("content-type".utf8), Array("text/plain; charset=utf-8".utf8)),
                                         (Array("content-length".utf8), Array(String(ex.localBody!.count).utf8))],
                                hasBody: true)
        case .success(let request) where request.leavesExchangeReusable:
            // Its exchange is chosen when it starts (`startArrived`): nothing of it is written
            // anywhere before then, so a stream reset in the same read costs nothing.
            let ex = H2Exchange(id: id, inner: nil, request: request)
            ex.requestEnded = true
            exchanges[id] = ex
            arrived.append(id)
            idle?.cancel()
            watchProgress()
        case .success(let request):
            let inner = newInner()
            let ex = H2Exchange(id: id, inner: inner, request: request)
            exchanges[id] = ex
            inner.peerTag = id
            ex.headPending = request.head.count
            arrivedHeads.withBytes { inner.peerAppend(UnsafeRawBufferPointer(rebasing: $0[request.head])) }
            forgetHead(of: request)  // written where it is read: kept no longer
            if endStream {
                ex.requestEnded = true
                if request.isConnect || request.isWebSocket { inner.peerEnded() }
            }
            arrived.append(id)
            idle?.cancel()
            watchProgress()
        }
    }

    private func watchProgress() {
        if progress == nil {
            progress = Timer(loop: worker.loop, repeating: true) { [unowned self] in self.checkProgress() }
        }
        if progress?.isPending == false { progress?.schedule(after: worker.settings.clientIdleTimeout) }
    }

    /// Origin-form where the connection or the path already says where requests go.
    private func targetForm(_ head: borrowing H2RequestHead) -> H2Translation.TargetForm {
        if intercepted != nil || worker.settings.reverseOrigin != nil { return .origin }
        let mirrors = worker.settings.mirrors
        guard !mirrors.isEmpty else { return .absolute }
        return head.withPseudoHeaders { p in
            guard p.path.first == UInt8(ascii: "/"),
                  H2Connection.port(of: p.authority, scheme: p.scheme) == localPort else { return .absolute }
            if case .notMirrored = mirrors.resolve(originForm: p.path) { return .absolute }
            return .origin
        }
    }

    /// The port an authority names (the scheme's default without one).
    static func port<Bytes: BidirectionalCollection<UInt8>>(of authority: Bytes, scheme: some Sequence<UInt8>) -> Int? {
        if let colon = authority.lastIndex(of: UInt8(ascii: ":")), authority.last != UInt8(ascii: "]") {
            let digits = authority[authority.index(after: colon)...]
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        return scheme.elementsEqual("https".utf8) ? 443 : 80
    }

    func h2RequestBody(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let ex = exchanges[id], let inner = ex.inner, let request = ex.request, !ex.innerFinished,
              !inner.isClosed else {
            // Nobody reads it: its window opens again at once.
            session.consumed(id, bytes.count)
            return
        }
        ex.received += bytes.count
        ex.unconsumed += bytes.count
        if request.chunkedBody {
            let size = Array((String(bytes.count, radix: 16) + "\r\n").utf8)
            size.withUnsafeBytes { inner.peerAppend($0) }
            inner.peerAppend(bytes)
            H2Connection.crlf.withUnsafeBytes { inner.peerAppend($0) }
            ex.headPending += size.count + 2
        } else {
            inner.peerAppend(bytes)
        }
    }

    func h2RequestEnded(_ id: Int32) {
        guard let ex = exchanges[id], let inner = ex.inner, let request = ex.request, !ex.requestEnded else { return }
        ex.requestEnded = true
        // A tunnel's half-close: the origin side sees the end, and may still answer.
        if request.isConnect || request.isWebSocket { inner.peerEnded() }
        if request.chunkedBody {
            H2Connection.lastChunk.withUnsafeBytes { inner.peerAppend($0) }
            ex.headPending += H2Connection.lastChunk.count
        }
    }

    func h2StreamClosed(_ id: Int32, errorCode: UInt32) {
        if !answeredEarly.isEmpty { answeredEarly.remove(id) }  // a hash for every stream otherwise
        guard let ex = exchanges.removeValue(forKey: id) else { return }
        if ex.inner == nil, !ex.headSent, let request = ex.request, request.head.upperBound == arrivedHeads.count {
            // Reset in the read that brought it, its head the last one written: it goes at once, so
            // that streams opened and reset in one write (each head up to the header list's
            // limit) do not pile their heads up until the read is over.
            forgetHead(of: request)
        }
        // Body bytes the exchange never took: nghttp2 does not give a closed stream's back.
        session.consumedOnConnection(ex.unconsumed)
        ex.unconsumed = 0
        if let inner = ex.inner {
            inner.peerTag = 0
            // The client cancelled, or the stream failed; a tunnel whose destination ended first
            // still waits for its client's side, which will not come now.
            if !ex.innerFinished || ex.mode == .tunnel { inner.peerAborted() }
        }
        if exchanges.isEmpty, !closing { idle?.schedule(after: worker.settings.clientIdleTimeout) }
    }

    /// Starts the exchanges of the requests that arrived, once the read is over. A request handed
    /// to a waiting exchange is read by it at once, without going through its stream, and answered
    /// at once if it can be (a hit): its answer leaves with this read's `flush`.
    private func startArrived() {
        swap(&starting, &arrived)
        startingArrived = true
        defer {
            startingArrived = false
            starting.removeAll(keepingCapacity: true)
            releaseArrivedHeads()  // every head has been read, or dropped with its stream
        }
        for id in starting {
            guard !closed, let ex = exchanges[id] else { continue }
            if ex.inner == nil, let request = ex.request {
                if let conn = takeSpare() {
                    worker.stats.add(.h2ExchangesReused)
                    ex.inner = conn.stream
                    ex.conn = conn
                    conn.stream.peerTag = ex.id
                    arrivedHeads.withBytes { heads in
                        arrivedFields.withUnsafeBufferPointer { fields in
                            conn.takeRequest(UnsafeRawBufferPointer(rebasing: heads[request.head]),
                                             methodEnd: request.methodEnd, targetEnd: request.targetEnd,
                                             fields: UnsafeBufferPointer(rebasing: fields[request.fields]))
                        }
                    }
                    // A hit whose whole answer the connection now holds (`takeAnswerBody`) is
                    // done with its exchange: back among the spares at once, so that the next
                    // request of this read is answered by the same exchange, its memory still in
                    // the processor's cache, rather than each request of a read by another one.
                    if ex.held != nil { releaseExchange(ex) }
                    continue
                }
                bind(ex, to: newInner(), request: request)
            }
            guard let inner = ex.inner else { continue }
            let conn = ClientConnection(worker: worker, stream: inner, peer: peer, overTLS: overTLS, carrier: self)
            if let intercepted { conn.intercepted = intercepted.forStream() }
            inners[ObjectIdentifier(conn)] = conn
            ex.conn = conn
            conn.start()
        }
    }

    /// Drops the head and field lines of `request`, the last written to `arrivedHeads`.
    private func forgetHead(of request: H2Translation.Request) {
        arrivedHeads.truncate(to: request.head.lowerBound)
        arrivedFields.removeSubrange(request.fields)
    }

    /// Empties `arrivedHeads` and `arrivedFields`; a read of many large heads leaves no large
    /// buffer behind.
    private func releaseArrivedHeads() {
        if arrivedHeads.capacity > H2Connection.arrivedHeadsKept {
            arrivedHeads = MessageWriter(capacity: 1_024)
        } else {
            arrivedHeads.reset()
        }
        if arrivedFields.capacity > H2Connection.arrivedFieldsKept {
            arrivedFields = []
        } else {
            arrivedFields.removeAll(keepingCapacity: true)
        }
    }

    private func bind(_ ex: H2Exchange, to inner: Stream, request: H2Translation.Request) {
        ex.inner = inner
        inner.peerTag = ex.id
        ex.headPending = request.head.count
        arrivedHeads.withBytes { inner.peerAppend(UnsafeRawBufferPointer(rebasing: $0[request.head])) }
    }

    /// The in-memory stream of a new exchange. Where DATA frames move answer bytes to the socket,
    /// a stored body is queued in pieces a frame can hold, so that frames move pieces whole.
    private func newInner() -> Stream {
        // Held by its streams, which closing drops (`close`): so an exchange's `carrier` needs no
        // weak reference, and neither does the stream.
        let inner = Stream.inMemory(loop: worker.loop, peer: self, holdingPeer: true)
        if movesBodies { inner.referencePiece = H2Connection.bodyPiece }
        return inner
    }

    /// A spare exchange still waiting for a request (one may have closed meanwhile, on its idle
    /// timeout or an error).
    private func takeSpare() -> ClientConnection? {
        while let conn = spare.popLast() {
            if conn.isBetweenRequests { return conn }
            conn.stream.peerEnded()
        }
        return nil
    }

    /// The answer to a request that left its exchange reusable is all handed over, or held whole
    /// by the connection: the exchange waits for the next stream's request if it is between
    /// requests with nothing unread or unsent, and is told the client has no more for it otherwise
    /// (it closes after its answer).
    private func releaseExchange(_ ex: H2Exchange) {
        guard let inner = ex.inner, let conn = ex.conn else { return }
        ex.inner = nil
        ex.conn = nil
        inner.peerTag = 0
        // (Its head's consumption may still be due for delivery: it opens no window, the request
        // having no body, so it may reach the next exchange on this stream.)
        if !closing, !draining, spare.count < H2Connection.maxSpare, inner.output.count == 0, conn.isBetweenRequests {
            spare.append(conn)
        } else {
            inner.peerEnded()
        }
    }

    // MARK: - Answers

    func memoryStreamHasOutput(_ inner: Stream) {
        guard let ex = exchange(of: inner) else {
            inner.output.drain(inner.output.count)  // a stream the client reset: nobody reads this
            return
        }
        if !ex.headSent {
            // A head that could not be read reset its stream: the reset goes out now, not with
            // whatever the client sends next.
            guard readHead(ex, inner) else { return flush() }
        }
        session.resume(ex.id)
        flush()
    }

    /// The exchange `inner` answers now (its `peerTag`), if its stream is still open.
    private func exchange(of inner: Stream) -> H2Exchange? {
        let id = inner.peerTag
        guard id != 0, let ex = exchanges[id], ex.inner === inner else { return nil }
        return ex
    }

    /// Reads the answer's head once it is all there and submits it; false while it is not (or the
    /// stream was reset).
    private func readHead(_ ex: H2Exchange, _ inner: Stream) -> Bool {
        guard let request = ex.request else { return false }
        let output = inner.output
        while true {
            let parsed: Int?
            do {
                parsed = try readAnswerHead(output, method: request.method)
            } catch {
                worker.logger.error("HTTP/2 stream \(ex.id) of \(peer): its answer's head could not be read back (\(error.reason))")
                session.reset(ex.id, code: 0x2)
                return false
            }
            guard let length = parsed else { return false }
            if answerHead.isInformational, !(request.isWebSocket && answerHead.status == 101) {
                output.drain(length)
                inner.peerTook(length)
                continue  // 100 Continue and 103 are HTTP/1.1's business here
            }
            let (status, mode) = answerShape(request)
            // The values are still where the head was read, at the front of the output.
            output.withContiguousPrefix(maxBytes: length) { submitHead(ex, status: status, mode: mode, values: $0) }
            output.drain(length)
            inner.peerTook(length)
            if mode == .none { answerComplete(ex) }
            return true
        }
    }

    /// An exchange's final answer head, handed over as its responder wrote it rather than through
    /// its stream (`ClientConnection.sendHead`), at the front of `bytes`: read and submitted now,
    /// without its bytes going into the stream's output and being read back out of it. Returns
    /// the head's length, the rest of `bytes` (a body written with it) being the exchange's to
    /// queue; nil when the head must go through the stream after all: the stream answers no
    /// stream of this connection now, something of the answer is queued before it, the answer
    /// has no body (its completion would come before the exchange is done with the request), or
    /// it is not a whole head that reads (the stream's reading of it resets the stream).
    func takeAnswerHead(_ bytes: UnsafeRawBufferPointer, of inner: Stream) -> Int? {
        guard let ex = exchange(of: inner), !ex.headSent, inner.output.count == 0, let request = ex.request,
              !request.isConnect, !request.isWebSocket, request.method != .head,
              let parsed = try? answerHead.read(bytes, method: request.method),
              parsed <= H2Connection.maxAnswerHead, !answerHead.isInformational else { return nil }
        let (status, mode) = answerShape(request)
        guard mode != .none else { return nil }
        submitHead(ex, status: status, mode: mode, values: UnsafeRawBufferPointer(rebasing: bytes[..<parsed]))
        // Not flushed here, inside the exchange's call: a flush may end the connection.
        if !startingArrived { flushSoon.fireAtNextTurn() }
        return parsed
    }

    /// A small stored body, whole, handed over as it is stored rather than through the stream's
    /// output and back (`owner` keeps the bytes alive): its frames copy it from there. Only right
    /// after its head, with nothing queued in the stream; false when not taken.
    func takeAnswerBody(_ bytes: UnsafeRawBufferPointer, keepingAlive owner: AnyObject, of inner: Stream) -> Bool {
        guard bytes.count < H2Connection.smallFrame, inner.output.count == 0, let ex = exchange(of: inner),
              ex.headSent, ex.held == nil, ex.mode == .length(bytes.count) else { return false }
        ex.held = H2Exchange.HeldBody(bytes: bytes, owner: owner)
        session.resume(ex.id)  // in case nghttp2 asked for the body already and was told to wait
        if !startingArrived { flushSoon.fireAtNextTurn() }
        return true
    }

    /// The status the final head `answerHead` has just read is sent with, and how its body is
    /// read back.
    private func answerShape(_ request: H2Translation.Request) -> (status: Int, mode: H2Exchange.Mode) {
        let status = answerHead.status
        if request.isWebSocket, status == 101 {
            return (200, .tunnel)  // RFC 8441: the extended CONNECT succeeded; the WebSocket follows
        }
        if request.isConnect, status < 300 { return (status, .tunnel) }
        switch answerHead.framing {
        case .none: return (status, .none)
        case .contentLength(let n): return (status, n == 0 ? .none : .length(n))
        case .chunked: return (status, .chunked)
        case .untilClose: return (status, .untilClose)
        }
    }

    /// Submits the final head `answerHead` has just read, whose values lie in `values`.
    private func submitHead(_ ex: H2Exchange, status: Int, mode: H2Exchange.Mode, values: UnsafeRawBufferPointer) {
        ex.mode = mode
        ex.headSent = true
        ex.status = status
        _ = answerHead.names.withUnsafeBytes { names in
            session.respond(ex.id, status: status, names: names, values: values, spans: answerHead.spans,
                            hasBody: mode != .none)
        }
    }

    func h2ResponseBody(_ id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        guard let ex = exchanges[id] else { return .bytes(0, end: true) }
        let read = answerBytes(ex, into: buffer)
        switch read {
        case .bytes(let n, let end):
            ex.sent += n
            if end { answerComplete(ex) }
        case .ready(_, let end):
            ex.readyEnds = end  // taken when the frame is written (`h2SendResponseBody`)
        case .wait, .cut:
            break
        }
        return read
    }

    /// A DATA frame of body bytes that stayed in the exchange's output (`.ready`): on a plain socket
    /// the header and the bytes are moved to the socket's output, not copied; over TLS they are
    /// copied once, with the header, and sent as one record (`sendRecord`), rather than into
    /// nghttp2's buffer and from there into the socket's output. Unless the output is full or
    /// this pass's share is spent.
    func h2SendResponseBody(_ id: Int32, frameHeader: UnsafeRawBufferPointer, count: Int) -> H2FrameWrite {
        guard let ex = exchanges[id], let inner = ex.inner, inner.output.count >= count else { return .failed }
        if socketBackedUp {
            turnSpent = true
            return .wouldBlock
        }
        if movesBodies {
            stream.output.append(frameHeader)
            stream.output.move(count, from: inner.output)
        } else if sentNow >= H2Connection.passShare {
            turnSpent = true
            return .wouldBlock
        } else {
            sendRecord(frameHeader, thenTaking: count, from: inner.output)
        }
        handedOver(count, of: ex, from: inner)
        ex.sent += count
        if ex.readyEnds { answerComplete(ex) }
        return .written
    }

    /// Over TLS, a frame (a record at most) put together and encrypted at once, after the frames
    /// staged before it, while its bytes are in the cache: frames queued for the loop's next turn
    /// were read back from memory, a turn's share of them later, and encrypting them cost a third
    /// more. Queued when the socket takes no more.
    private func sendRecord(_ frameHeader: UnsafeRawBufferPointer, thenTaking count: Int, from source: Buffer) {
        let scratch = worker.recordScratch
        let total = frameHeader.count + count
        precondition(total <= scratch.count, "a frame longer than a record")  // `take` keeps them to one
        let record = UnsafeMutableRawBufferPointer(rebasing: scratch[..<total])
        record.copyMemory(from: frameHeader)
        let taken = source.remove(into: UnsafeMutableRawBufferPointer(rebasing: record[frameHeader.count...]))
        precondition(taken == count, "a frame's bytes were not all there")  // else stale scratch bytes would go out
        if stream.sendNowOrQueue(UnsafeRawBufferPointer(record)) { sentNow += total }
    }

    /// The answer's body as the exchange wrote it, without its HTTP/1.1 framing, taken only as
    /// fast as the client's windows let it go: what is not taken stays in the exchange's output,
    /// which holds its producer back.
    private func answerBytes(_ ex: H2Exchange, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        if let local = ex.localBody {
            let n = min(local.count, buffer.count)
            buffer.copyBytes(from: local[..<n])
            ex.localBody = Array(local[n...])
            return .bytes(n, end: ex.localBody!.isEmpty)
        }
        if var held = ex.held {
            let n = min(held.bytes.count - held.taken, buffer.count)
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: held.bytes[held.taken..<(held.taken + n)]))
            held.taken += n
            let end = held.taken == held.bytes.count
            ex.held = end ? nil : held
            if case .length(let remaining) = ex.mode { ex.mode = .length(remaining - n) }
            return .bytes(n, end: end)
        }
        guard let inner = ex.inner else { return .bytes(0, end: true) }
        let output = inner.output
        switch ex.mode {
        case .none:
            return .bytes(0, end: true)
        case .length(let remaining):
            let n = min(buffer.count, remaining, output.count)
            if n == 0 { return ex.innerFinished ? .cut : .wait }
            return take(n, of: ex, from: inner, into: buffer, end: n == remaining)
        case .chunked:
            let taken: (copied: Int, drained: Int)
            do {
                taken = try ex.chunked.take(from: output, into: buffer)
            } catch {
                return .cut
            }
            inner.peerTook(taken.drained)
            if ex.chunked.isDone { return .bytes(taken.copied, end: true) }
            if taken.copied == 0 { return ex.innerFinished ? .cut : .wait }
            return .bytes(taken.copied, end: false)
        case .untilClose, .tunnel:
            let n = min(buffer.count, output.count)
            let end = ex.innerFinished && n == output.count
            if n == 0 { return end ? .bytes(0, end: true) : .wait }
            return take(n, of: ex, from: inner, into: buffer, end: end)
        }
    }

    /// `n` answer bytes at the front of the exchange's output for one DATA frame: left there until
    /// the frame is written (`h2SendResponseBody`), or, for a frame under `smallFrame`, copied now.
    private func take(_ n: Int, of ex: H2Exchange, from inner: Stream, into buffer: UnsafeMutableRawBufferPointer,
                      end: Bool) -> H2BodyRead {
        if n < H2Connection.smallFrame {
            // Into nghttp2's buffer with the frames around it, which go to the socket's output
            // in one piece: cheaper than a frame written apart, for a few KiB.
            _ = inner.output.remove(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<n]))
            handedOver(n, of: ex, from: inner)
            return .bytes(n, end: end)
        }
        guard movesBodies else {
            // A frame is at most a record, header and all: one record per frame, full.
            let fits = min(n, Stream.tlsRecord - H2Connection.frameHeaderSize)
            return .ready(fits, end: end && fits == n)
        }
        // Up to the end of a segment, so that the frame moves segments and copies nothing: when
        // that is at least half a frame, or what is left of a piece a frame cut, alone, when the
        // piece after it fits a frame (the frames after it then move pieces whole again).
        // Otherwise the frame copies its last segment's part, as a frame shorter than its first
        // segment does: many small segments must not make many small frames.
        let whole = inner.output.wholeSegments(upTo: n)
        if whole.length > 0, whole.length < n,
           whole.length >= n / 2 || (whole.count == 1 && whole.next <= n) {
            return .ready(whole.length, end: false)
        }
        return .ready(n, end: end)
    }

    /// `n` answer bytes left the exchange's output for the client.
    private func handedOver(_ n: Int, of ex: H2Exchange, from inner: Stream) {
        inner.peerTook(n)
        if case .length(let remaining) = ex.mode { ex.mode = .length(remaining - n) }
    }

    /// The answer's last byte is handed over: an exchange the client let finish (forgiving one
    /// cancelled stream, for answers that were not refusals), and a request still open is ended.
    private func answerComplete(_ ex: H2Exchange) {
        if ex.request != nil, ex.status < 400 { session.exchangeCompleted() }
        ex.answerDone = true
        // A tunnel's end from its destination is a half-close (RFC 9113 §8.5): the client may
        // still send, and its end closes the tunnel.
        if !ex.requestEnded, ex.mode != .tunnel { answeredEarly.insert(ex.id) }
        if ex.request?.leavesExchangeReusable == true { releaseExchange(ex) }
    }

    func memoryStreamConsumed(_ inner: Stream, count: Int) {
        guard let ex = exchange(of: inner) else { return }
        // The head and the chunk framing Larder wrote come out first; only body bytes open windows.
        let framing = min(count, ex.headPending)
        ex.headPending -= framing
        let body = min(count - framing, ex.unconsumed)
        ex.unconsumed -= body
        session.consumed(ex.id, body)
        if body > 0 { flush() }
    }

    func memoryStreamFinished(_ inner: Stream, reset: Bool) {
        guard let ex = exchange(of: inner) else { return }
        ex.innerFinished = true
        var cut = reset || !ex.headSent
        if case .length(let remaining) = ex.mode, inner.output.count + ex.heldCount < remaining { cut = true }
        if cut {
            // A cut answer must not look complete.
            session.reset(ex.id, code: 0x2)
        } else {
            // The rest is read out; a chunked answer missing its end is cut there.
            session.resume(ex.id)
        }
        flush()
    }

    /// The stream's exchange closed its end (after `memoryStreamFinished`).
    func streamConnectionClosed(_ conn: ClientConnection) {
        inners[ObjectIdentifier(conn)] = nil
        if let i = spare.firstIndex(where: { $0 === conn }) { spare.remove(at: i) }
    }

    /// Reads the answer head at the front of `output` where it lies: in its first segment, where
    /// the exchange wrote it, or else in a prefix made contiguous (copied) as long as the head needs.
    private func readAnswerHead(_ output: Buffer, method: HTTPMethod) throws(HTTPWireError) -> Int? {
        let (parsed, seen) = try output.withFirstSegment { segment throws(HTTPWireError) in
            let front = UnsafeRawBufferPointer(rebasing: segment.prefix(H2Connection.maxAnswerHead))
            return (try answerHead.read(front, method: method), front.count)
        }
        if parsed != nil || seen == output.count { return parsed }
        var window = max(H2Connection.answerHeadWindow, seen * 2)
        while true {
            guard seen < H2Connection.maxAnswerHead else { throw .headTooLarge }
            let take = min(window, output.count, H2Connection.maxAnswerHead)
            let parsed = try output.withContiguousPrefix(maxBytes: take) { bytes throws(HTTPWireError) in
                try answerHead.read(bytes, method: method)
            }
            if parsed != nil || take == output.count { return parsed }
            guard take < H2Connection.maxAnswerHead else { throw .headTooLarge }
            window = take * 8
        }
    }

    private static let crlf = Array("\r\n".utf8)
    private static let lastChunk = Array("0\r\n\r\n".utf8)
    private static let answerHeadWindow = 4_096
    /// An HTTP/2 frame's header (RFC 9113 §4.1).
    private static let frameHeaderSize = 9
    /// Over TLS, DATA frames shorter than this are copied into nghttp2's buffer; longer ones are
    /// sent by `h2SendResponseBody` as records of their own (`sendRecord`).
    private static let smallFrame = 4_096
    /// The capacity `arrivedHeads` keeps between reads.
    private static let arrivedHeadsKept = 16 * 1_024
    /// The capacity `arrivedFields` keeps between reads (16 KiB of ranges).
    private static let arrivedFieldsKept = 512
    /// nghttp2's largest DATA payload unless the client allows larger frames (16 KiB by default,
    /// which clients keep).
    private static let bodyPiece = 16_384
    private static let maxAnswerHead = 256 * 1024
}

/// One stream of an `H2Connection`: its request as HTTP/1.1, the exchange answering it, and how
/// far its answer has been read back.
final class H2Exchange {
    enum Mode: Equatable {
        case none
        case length(Int)
        case chunked
        case untilClose
        /// A CONNECT's tunnel bytes, both ways, until either side ends.
        case tunnel
    }

    let id: Int32
    /// The in-memory stream of the exchange answering it: for a request that leaves its exchange
    /// reusable, set when it starts and let go once its answer is handed over.
    var inner: Stream?
    var conn: ClientConnection?
    let request: H2Translation.Request?
    /// A refusal Larder answers itself, without an exchange.
    var localBody: [UInt8]?
    /// A stored body the exchange handed over whole (`H2Connection.takeAnswerBody`), and how much
    /// of it frames took.
    struct HeldBody {
        let bytes: UnsafeRawBufferPointer
        /// Keeps `bytes` alive.
        let owner: AnyObject
        var taken = 0
    }
    var held: HeldBody?
    var heldCount: Int { held.map { $0.bytes.count - $0.taken } ?? 0 }
    var headSent = false
    var status = 0
    var mode: Mode = .none
    /// A chunked answer, taken out of the exchange's output as the client's windows allow.
    var chunked = ChunkedPull()
    /// The bytes last said to be ready end the answer.
    var readyEnds = false
    var innerFinished = false
    var answerDone = false
    /// Answer bytes handed over and request-body bytes received, and both at the last look
    /// (`H2Connection.checkProgress`; -1 before the first).
    var sent = 0
    var received = 0
    var lastSent = -1
    var lastReceived = -1
    var requestEnded = false
    /// Bytes Larder wrote into the exchange's input that are not the client's body (its head,
    /// chunk framing), not yet read by the exchange.
    var headPending = 0
    /// Body bytes received and not yet taken by the exchange: their window is still closed.
    var unconsumed = 0

    /// Whether the stream waits for its client: to take answer bytes that are ready, or to send
    /// the rest of its request. A tunnel's silence is its own business, but not bytes its client
    /// leaves untaken; an origin's slowness is the session's.
    var waitsOnClient: Bool {
        if answerWaiting { return true }
        if mode == .tunnel { return false }
        return !requestEnded && !answerDone
    }

    /// Bytes for the client are ready and not taken yet (its windows, or Larder's socket, hold
    /// them back).
    private var answerWaiting: Bool {
        if localBody?.isEmpty == false || held != nil { return true }
        guard let inner, inner.output.count > 0 else { return false }
        return mode == .tunnel || (headSent && !answerDone)
    }

    /// Whether the stream moved since the last look: the client sent some of its request, or took
    /// answer bytes — `Stream.minimumProgress` of them while what waits for it is held back by its
    /// windows (`windowClosed`), as an HTTP/1.1 client must take them from its socket: a window
    /// opened a byte at a time would otherwise hold the stream, and a fetch it may lead for
    /// others, for ever. Bytes held back by Larder's own socket are its write timeout's business.
    /// The first look lets a stream be.
    func progressed(sent: Int, received: Int, windowClosed: Bool) -> Bool {
        if lastSent < 0 || received != lastReceived { return true }
        if windowClosed, answerWaiting { return sent - lastSent >= Stream.minimumProgress }
        return sent != lastSent
    }

    init(id: Int32, inner: Stream?, request: H2Translation.Request?) {
        self.id = id
        self.inner = inner
        self.request = request
    }
}
