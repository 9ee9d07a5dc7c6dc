import CacheStore
import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// One request forwarded to an origin: sends the client's body along, and relays the response
/// back in the client's framing, through the cache's part when there is one.
final class OriginRelay: SessionTaskDelegate {
    unowned(unsafe) let connection: ClientConnection
    private(set) var task: SessionTask?
    /// What holds the origin read back: the client, the disk writer, lagging followers. Made on
    /// first need: a response relayed as fast as it comes never waits for anything.
    private var control: OriginReadControl?
    private var readControl: OriginReadControl {
        if let control { return control }
        let made = OriginReadControl(loop: connection.worker.loop, clock: connection.worker.clock, task: task)
        control = made
        return made
    }
    /// A ranged miss filling the cache: the client's range, cut from the whole object.
    private var rangeFill: RangeFill?
    /// Body bytes passed to the client so far.
    private var bodySent = 0
    /// The detached budget's claim a hand-over took (`handOver`), passed on to the `DetachedFetch`.
    private var handOverClaim: Int?
    /// A hand-over was refused for want of budget: counted once per download, however often it is
    /// tried again.
    private var handOverRefused = false

    private init(connection: ClientConnection) {
        self.connection = connection
    }

    /// Sends the current request to `origin` (or the cache's revalidation of it, if it is revalidating).
    /// `pathRange`: its path and query within its target (see `RequestTarget.pathRange`).
    static func forward(_ c: ClientConnection, to destination: RequestRouter.Destination, path pathRange: Range<Int>) {
        let origin = destination.origin
        let request = c.request
        let revalidation = c.context.cache?.outboundRevalidation(for: request.method)
        if let ex = c.context.cache { ex.forwardedRange = revalidation == nil && ex.facts?.hasRange == true }
        c.context.upgrading = request.upgradesToWebSocket && request.version == .http11 && revalidation == nil
        // A revalidation never carries the client's body; a body already sent once is never sent again.
        let hasBody = revalidation == nil && c.context.bodyPending
        if hasBody, c.context.bodyForwarded {
            return c.answerError(502, "the request's body was already sent to \(origin) and cannot be sent again")
        }
        c.context.bodyForwarded = hasBody
        var body = BodyFraming.none
        if hasBody {
            if case .contentLength(let n) = request.framing { body = .contentLength(n) } else { body = .chunked }
        } else if revalidation == nil, request.framing == .contentLength(0) {
            body = .contentLength(0)  // an empty POST or PUT says so (RFC 9110 §8.6), some origins need it
        }
        let worker = c.worker
        let upgrading = c.context.upgrading
        c.writer.reset()
        request.headers.withBytes(request.target) { target in
            let path = UnsafeRawBufferPointer(rebasing: target[pathRange])
            OutboundHead.write(request, targetPath: path, route: destination.route, viaName: worker.settings.viaName,
                               additionalHeaders: worker.session.configuration.httpAdditionalHeaders,
                               parentCredentials: worker.session.configuration.parentProxy?.credentials,
                               upgrading: upgrading, revalidation: revalidation, body: body, into: &c.writer)
        }
        let idempotent: Bool
        switch request.method {
        case .get, .head, .options, .trace, .put, .delete: idempotent = true
        default: idempotent = false
        }
        c.context.upstream = origin
        // Counted once per request, however often it goes to an origin (a refetch after HEAD, a
        // range asked for on its own, a follower fetching alone): released when the request ends.
        guard c.claimOriginSocket() else { return }
        let relay = OriginRelay(connection: c)
        let task = worker.session.dataTask(origin: origin, method: revalidation?.method ?? request.method,
                                           head: c.writer.bytes, hasBody: hasBody, isIdempotent: idempotent,
                                           expectsContinue: request.expectsContinue, client: c.peerAddress,
                                           delegate: relay)
        relay.task = task
        c.send(.originStarted(relay, sendsBody: hasBody))
        task.resume()
    }

    // MARK: - Pausing the origin read

    func clientCaughtUp() {
        if let control, control.gate.contains(.client) { control.resume(.client) }
    }

    /// The connection is done with this exchange. A fetch that collapsed followers depend on, or a
    /// download mostly in that is being stored (`worthFinishing`), runs on without the client; any
    /// other is cancelled.
    func release() {
        control?.stop()
        var claim = handOverClaim
        handOverClaim = nil
        defer { connection.worker.inFlight.detached.release(&claim) }
        guard let t = task else { return }
        task = nil
        let c = connection
        if let exchange = c.context.cache, c.answerStarted, let purpose = leftRunning(exchange, c) {
            c.context.cache = nil
            if purpose == .finishing {
                c.worker.logger.info("client \(c.peer) left; finishing \(c.context.upstreamName)'s response for the cache")
            }
            c.worker.adopt(DetachedFetch(worker: c.worker, task: t, exchange: exchange, purpose: purpose,
                                         client: c.peerAddress, connection: ObjectIdentifier(c), claim: claim))
            claim = nil
        } else {
            t.cancel()
        }
    }

    /// Why a fetch the connection is done with should run on without it, nil when it should not.
    private func leftRunning(_ exchange: CacheExchange, _ c: ClientConnection) -> DetachedFetch.Purpose? {
        if exchange.inFlight?.hasFollowers ?? false { return .followers }
        if OriginRelay.worthFinishing(exchange, c.worker.settings.cache) { return .finishing }
        if rangeFill?.clientDone == true, exchange.writer?.isAbandoned == false { return .rangeFill }
        return nil
    }

    /// Squid's quick_abort: a response being stored whose client left is finished anyway when most
    /// of it has arrived (`cache.finish_aborted_fraction` of its announced length) and it is not
    /// large (`cache.finish_aborted_max_size`), so the client's retry is a hit.
    static func worthFinishing(_ exchange: CacheExchange, _ setup: CacheSetup) -> Bool {
        guard let fraction = setup.finishAbortedFraction, let writer = exchange.writer, !writer.isAbandoned,
              let total = exchange.announcedLength,
              total > 0, total <= setup.finishAbortedMaxSize else { return false }
        return Double(writer.bodyLength) >= fraction * Double(total)
    }

    // MARK: - The request body

    func pumpRequestBody() {
        guard let task, let out = task.bodyOutput else { return }
        switch connection.moveRequestBody(into: out) {
        case .waiting:
            return
        case .finished:
            task.finishBody()
        case .refused(let status, let reason, let logged):
            refuseBody(status, reason, logged: logged)
        }
    }

    /// A body that cannot be forwarded: the exchange ends with an error, or a cut once the
    /// answer has started.
    private func refuseBody(_ status: Int, _ reason: String, logged: String) {
        task?.cancel()
        task = nil
        control?.stop()
        if connection.answerStarted {
            connection.worker.logger.notice("\(status) to \(connection.peer): \(logged)")
            connection.cutAnswer()
        } else {
            connection.refuse(status, reason)
        }
    }

    // MARK: - SessionTaskDelegate

    func taskCanSendBody(_ task: SessionTask) { pumpRequestBody() }

    func taskBodyDrained(_ task: SessionTask) { pumpRequestBody() }

    func task(_ task: SessionTask, didReceiveInformational head: ResponseHead) {
        connection.interim(head)
    }

    func task(_ task: SessionTask, didReceiveResponse head: ResponseHead) {
        let c = connection
        if head.status == 101 {
            self.task = nil
            control?.stop()
            guard c.context.upgrading, let upgraded = task.takeUpgradedStream() else {
                task.cancel()
                return c.answerError(502, "upstream \(c.context.upstreamName) switched protocols without being asked")
            }
            c.switchingProtocols(head)
            return ConnectHandler.startTunnel(upgraded, on: c)
        }
        if CacheFlow.takesResponse(head, on: c) == .taken {
            // Not the rest of a stored prefix: rather than read it to its end, the whole is asked
            // for at once (the connection, with its answer unread, is not reused).
            if let ex = c.context.cache, ex.abandonsAnswer {
                self.task = nil
                control?.stop()
                task.cancel()
                _ = CacheFlow.taskCompleted(error: nil, on: c)
            }
            return
        }
        if let ex = c.context.cache, ex.rangeFill {
            switch RangeFill.begin(head, exchange: ex, on: c) {
            case .relayWhole:
                break
            case .cut(let fill):
                rangeFill = fill
                c.worker.stats.add(task.usedReusedConnection ? .originRequestsReusedConnection : .originRequestsNewConnection)
                if fill.clientDone { c.finishAnswer() }  // a 416: nothing of the body is the client's
                return
            case .askAgain:
                // Too far in to read through: the client's range is asked for on its own, and a
                // whole response being stored runs on without the client.
                self.task = nil
                control?.stop()
                c.context.cache = nil
                if let w = ex.writer, !w.isAbandoned {
                    c.worker.adopt(DetachedFetch(worker: c.worker, task: task, exchange: ex, purpose: .rangeFill,
                                                 client: c.peerAddress, connection: ObjectIdentifier(c)))
                } else {
                    task.cancel()
                    ex.endCollapse(failed: true, table: c.worker.inFlight)  // ends the fill's claim
                }
                return OriginRelay.forward(c, to: ex.destination, path: ex.pathRange)
            }
        }
        c.worker.stats.add(task.usedReusedConnection ? .originRequestsReusedConnection : .originRequestsNewConnection)
        c.forwardHead(head)
    }

    func task(_ task: SessionTask, didReceiveBody source: Buffer, count: Int) {
        let c = connection
        guard c.answerStarted else {
            // A revalidation answer the cache consumed: its body is not the client's.
            return source.drain(count)
        }
        if let exchange = c.context.cache {
            if exchange.tee(source, count: count), let fetch = exchange.inFlight { readControl.waitForFollowers(of: fetch) }
            if let w = exchange.writer, w.isBehind { readControl.paceStore(w) }
        }
        if var fill = rangeFill {
            let delivered = fill.deliver(source, count: count, to: c)
            source.drain(count)
            rangeFill = fill
            c.noteBody(delivered, fromCache: false)
            if fill.clientDone, delivered > 0 || fill.received == count {
                c.finishAnswer()  // the range is out; the fetch runs on for the store (`release`)
            } else if c.answerBackedUp, !readControl.gate.contains(.client) {
                readControl.pause(.client)
            }
            return
        }
        bodySent += count
        c.forwardBody(from: source, count: count)
        if c.answerBackedUp, !readControl.gate.contains(.client) {
            if handOver() { return }
            readControl.pause(.client)
        }
    }

    /// Followers wait on a download this client reads slower than the origin sends: when it is
    /// stored on disk as it arrives, the fetch goes on at the origin's pace and the client reads
    /// the rest as one more follower. Alone, a slow client still paces its own fetch. Running ahead
    /// of its client, the download is a detached fetch for the budget's sake: it claims the bytes
    /// still to come in the client's share (`limits.detached_*`), or the client keeps pacing it, so
    /// slow reads (with a second connection to follow) cannot turn into many full-speed downloads.
    private func handOver() -> Bool {
        let c = connection
        guard let exchange = c.context.cache, let fetch = exchange.inFlight, fetch.hasFollowers, fetch.isStoredOnDisk,
              let total = exchange.announcedLength, rangeFill == nil,
              c.request.method == .get, !c.context.bodyPending, handOverClaim == nil else { return false }
        let budget = c.worker.inFlight.detached
        switch budget.claim(client: c.peerAddress, bytes: max(0, total - bodySent), limits: c.worker.settings.detachedFetches) {
        case .success(let id):
            handOverClaim = id
        case .failure(let limit):
            c.worker.noteHandOverRefused(limit, client: c.peer, upstream: c.context.upstreamName, first: !handOverRefused)
            handOverRefused = true
            return false
        }
        if CollapseFollower.takeOver(exchange, sent: bodySent, on: c) { return true }
        budget.release(&handOverClaim)
        return false
    }

    /// News from the collapsed fetch this request leads: followers caught up, or one joined while
    /// this client holds the origin read back.
    func collapseNews() {
        guard let control else { return }
        if control.gate.contains(.client), handOver() { return }
        control.followersCaughtUp()
    }

    func task(_ task: SessionTask, didCompleteWith error: SessionError?) {
        self.task = nil
        control?.stop()
        let c = connection
        if CacheFlow.taskCompleted(error: error, on: c) == .taken { return }
        if let error {
            if case .dnsBusy = error {
                c.worker.noteLookupRefused(error.message, client: c.peer)
            } else {
                c.worker.stats.add(Count.originError(error))
                c.worker.logger.warning("\(error.status) for \(c.peer): \(error.message)")
            }
            // The client must not mistake a truncated body for a complete one.
            if c.answerStarted { return c.cutAnswer() }
            return c.answerError(error.status, error.message)
        }
        c.finishAnswer()
    }
}
