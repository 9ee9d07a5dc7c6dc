import CachePolicy
import EventLoop
import HTTPWire
import Statistics

/// A request answered from another request's origin fetch (see `InFlightTable`): takes the
/// shared head, then body bytes up to the output's high-water mark, the rest as the client reads.
final class CollapseFollower {
    unowned(unsafe) let connection: ClientConnection
    let fetch: InFlightFetch
    let id: Int
    let exchange: CacheExchange
    private var streaming = false
    private var left = false

    private init(connection: ClientConnection, fetch: InFlightFetch, id: Int, exchange: CacheExchange,
                 streaming: Bool = false) {
        self.connection = connection
        self.fetch = fetch
        self.id = id
        self.exchange = exchange
        self.streaming = streaming
    }

    /// The leader's client reads slower than the origin sends: rather than pausing the origin
    /// read (and everyone following it), the client reads the rest like a follower, from memory
    /// and the disk, and the fetch runs on at the origin's pace (`DetachedFetch`, `.followers`).
    /// False when the fetch cannot take it (not stored on disk as it goes, or not all of it).
    static func takeOver(_ exchange: CacheExchange, sent: Int, on c: ClientConnection) -> Bool {
        guard let fetch = exchange.inFlight,
              let id = fetch.addFollower(c.participantHandle, at: sent, now: c.worker.clock.monotonic) else { return false }
        c.send(.followingStarted(CollapseFollower(connection: c, fetch: fetch, id: id, exchange: exchange,
                                                  streaming: true)))
        return true
    }

    /// A cacheable miss: lead a fetch of the URL, or follow the one under way. True when following
    /// (the request is answered without a fetch of its own).
    static func join(_ exchange: CacheExchange, on c: ClientConnection) -> Bool {
        let worker = c.worker
        switch worker.inFlight.join(key: exchange.primaryKey, participant: c.participantHandle, now: worker.clock.monotonic) {
        case .lead(let fetch):
            exchange.inFlight = fetch
            return false
        case .alone:
            return false
        case .pass(let renew):
            if !renew { exchange.passMarking = .clearIfStored }
            return false
        case .follow(let fetch, let id):
            c.noteLookup(.collapsedRequests)
            c.send(.followingStarted(CollapseFollower(connection: c, fetch: fetch, id: id, exchange: exchange)))
            return true
        }
    }

    func progress() {
        guard !left else { return }
        let c = connection
        if !streaming {
            switch fetch.pollHead(id) {
            case .waiting:
                return
            case .released:
                return fetchAlone()
            case .head(let shared):
                let mine = CacheKey.secondary(varyFields: shared.varyFields, request: c.request.headers)
                // The response varies on a header this request sends differently.
                if shared.varyStar || mine != shared.secondaryKey { return fetchAlone() }
                streaming = true
                let head = shared.response
                let framing = ResponseHeadWriter.framing(for: head, clientVersion: c.request.version)
                c.context.framing = framing
                if framing == .untilClose { c.context.keepAlive = false }
                exchange.status.forwardStatus = head.status
                exchange.status.collapsed = true
                c.writer.reset()
                ResponseHeadWriter.write(head, framing: framing, keepAlive: c.context.keepAlive,
                                         clientVersion: c.request.version, viaName: c.worker.settings.viaName,
                                         upgrade: false,
                                         cacheStatus: .status(exchange.status, c.worker.settings.cache.cacheName),
                                         sharedWithout: shared.omitFields, into: &c.writer)
                c.writer.withBytes { c.stream.output.append($0) }
                c.context.responseStarted = true
                c.noteResponse(head.status)
            }
        }
        let out = c.stream.output
        let room = ClientConnection.outputHighWater - out.count
        guard room > 0 else { return }
        let chunked = c.context.framing == .chunked
        var delivered = 0
        let end = fetch.read(id, limit: room, now: c.worker.clock.monotonic, disk: c.worker.cacheReader) { bytes in
            delivered += bytes.count
            if chunked {
                c.chunkWriter.reset()
                c.chunkWriter.appendChunkHeader(size: bytes.count)
                c.chunkWriter.withBytes { out.append($0) }
                out.append(bytes)
                out.append(ChunkedFraming.chunkEnd)
            } else {
                out.append(bytes)
            }
        }
        c.noteBody(delivered, fromCache: false)
        switch end {
        case .more:
            return
        case .complete:
            leave()
            if chunked { out.append(ChunkedFraming.lastChunk) }
            c.send(.answered)
        case .failed:
            // The shared fetch broke off: this client must see a cut, as the leader's does.
            leave()
            c.worker.logger.warning("collapsed response from \(c.context.upstreamName) cut short for \(c.peer)")
            c.send(.cut)
        case .detached:
            // This client fell more than the lag limit behind the shared fetch, which does not wait.
            leave()
            c.worker.stats.add(.collapsedFollowersDetached)
            c.worker.logger.notice(
                "collapsed response for \(c.peer) cut: the client stopped reading while the shared fetch from \(c.context.upstreamName) waited for it")
            c.send(.cut)
        }
    }

    /// Stops following and asks the origin for this request after all.
    private func fetchAlone() {
        leave()
        // The access log tells what happened to it: a miss of its own, not a collapsed answer.
        connection.context.log.cache = "miss"
        exchange.status.collapsed = false
        OriginRelay.forward(connection, to: exchange.origin, route: exchange.route, path: exchange.pathRange)
    }

    /// No more of the shared fetch for this client (idempotent).
    func leave() {
        guard !left else { return }
        left = true
        fetch.leave(id)
    }
}

/// Collapsed fetches on other threads wake a connection through its participant handle.
extension ClientConnection: CollapseParticipant {
    func collapseProgress() {
        switch machine.state {
        case .exchanging(.following(let follower)): follower.progress()
        case .exchanging(.origin(let relay)): relay.collapseNews()
        default: break
        }
    }
}
