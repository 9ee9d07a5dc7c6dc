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

    /// A cacheable miss: lead a fetch of the URL, or follow the one under way (`.taken`: the request
    /// is answered without a fetch of its own).
    static func join(_ exchange: CacheExchange, on c: ClientConnection) -> RouteStep {
        let worker = c.worker
        switch worker.inFlight.join(key: exchange.primaryKey, participant: c.participantHandle, now: worker.clock.monotonic) {
        case .lead(let fetch):
            exchange.inFlight = fetch
            return .goOn
        case .alone:
            return .goOn
        case .pass(let renew):
            if !renew { exchange.passMarking = .clearIfStored }
            return .goOn
        case .follow(let fetch, let id):
            c.noteLookup(.collapsedRequests)
            c.send(.followingStarted(CollapseFollower(connection: c, fetch: fetch, id: id, exchange: exchange)))
            return .taken
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
                exchange.status.forwardStatus = head.status
                exchange.status.collapsed = true
                c.sharedHead(head, lookup: exchange.status, omitting: shared.omitFields)
            }
        }
        let room = c.outputHighWater - c.answerQueued
        guard room > 0 else { return }
        var delivered = 0
        let end = fetch.read(id, limit: room, now: c.worker.clock.monotonic, disk: c.worker.cacheReader) { bytes in
            delivered += bytes.count
            c.sendBody(bytes)
        }
        c.noteBody(delivered, fromCache: false)
        switch end {
        case .more:
            return
        case .complete:
            leave()
            c.finishAnswer()
        case .failed:
            // The shared fetch broke off: this client must see a cut, as the leader's does.
            leave()
            c.worker.logger.warning("collapsed response from \(c.context.upstreamName) cut short for \(c.peer)")
            c.cutAnswer()
        case .detached:
            // This client fell more than the lag limit behind the shared fetch, which does not wait.
            leave()
            c.worker.stats.add(.collapsedFollowersDetached)
            c.worker.logger.notice(
                "collapsed response for \(c.peer) cut: the client stopped reading while the shared fetch from \(c.context.upstreamName) waited for it")
            c.cutAnswer()
        }
    }

    /// Stops following and asks the origin for this request after all.
    private func fetchAlone() {
        leave()
        // The access log tells what happened to it: a miss of its own, not a collapsed answer.
        connection.noteFetchedAlone()
        exchange.status.collapsed = false
        OriginRelay.forward(connection, to: exchange.destination, path: exchange.pathRange)
    }

    /// No more of the shared fetch for this client (idempotent).
    func leave() {
        guard !left else { return }
        left = true
        fetch.leave(id)
    }
}

/// Collapsed fetches on other threads wake a connection through its participant handle.
extension ClientConnection {
    func collapseProgress() {
        switch machine.state {
        case .exchanging(.following(let follower)): follower.progress()
        case .exchanging(.origin(let relay)): relay.collapseNews()
        default: break
        }
    }
}

/// A connection as a collapse participant: owned by the connection alone, gone with it (the
/// handle's weak reference then reads nil), and holding it unowned, never weakly.
final class ConnectionParticipant: CollapseParticipant {
    private unowned let connection: ClientConnection

    init(_ connection: ClientConnection) { self.connection = connection }

    func collapseProgress() { connection.collapseProgress() }
}
