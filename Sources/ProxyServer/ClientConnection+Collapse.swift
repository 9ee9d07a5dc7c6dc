import CachePolicy
import EventLoop
import HTTPWire
import Statistics

/// A request answered from another request's origin fetch (see `InFlightTable`).
final class CollapseFollower {
    let fetch: InFlightFetch
    let id: Int
    let exchange: CacheExchange
    var streaming = false

    init(fetch: InFlightFetch, id: Int, exchange: CacheExchange) {
        self.fetch = fetch
        self.id = id
        self.exchange = exchange
    }
}

extension ClientConnection: CollapseParticipant {
    /// A cacheable miss: lead a fetch of the URL, or follow the one under way. Returns true when
    /// following (the request is being answered without a fetch of its own).
    func joinInFlight(_ exchange: CacheExchange) -> Bool {
        switch worker.inFlight.join(key: exchange.primaryKey, participant: participantHandle, now: monotonicSeconds()) {
        case .lead(let fetch):
            exchange.inFlight = fetch
            return false
        case .alone:
            return false
        case .follow(let fetch, let id):
            worker.stats.add(.collapsedRequests)
            logCache = "collapsed"
            following = CollapseFollower(fetch: fetch, id: id, exchange: exchange)
            state = .exchanging
            stream.disableReading()
            followerProgress()
            return true
        }
    }

    func collapseProgress() {
        if following != nil {
            followerProgress()
            return
        }
        if collapsePaused {
            // The followers this leader waited for have caught up.
            collapsePaused = false
            stallWatch?.cancel()
            resumeOriginIfClear()
        }
    }

    /// While the origin read waits for lagging followers: every `stallTimeout`, those that read
    /// nothing meanwhile are detached, and the read resumes once no one is left to wait for.
    func watchForStalledFollowers() {
        let watch = stallWatch ?? Timer(loop: worker.loop) { [unowned self] in self.checkStalledFollowers() }
        stallWatch = watch
        watch.schedule(after: InFlightTable.stallTimeout)
    }

    private func checkStalledFollowers() {
        guard collapsePaused, let fetch = cacheExchange?.inFlight else { return }
        if fetch.detachStalled(now: monotonicSeconds()) {
            watchForStalledFollowers()
        } else {
            collapsePaused = false
            resumeOriginIfClear()
        }
    }

    /// Takes whatever the followed fetch has for us: its head, then body bytes up to the output's
    /// high-water mark (the rest when the output drains).
    func followerProgress() {
        guard let fw = following else { return }
        if !fw.streaming {
            switch fw.fetch.pollHead(fw.id) {
            case .waiting:
                return
            case .released:
                fetchAlone(fw)
                return
            case .head(let shared):
                let mine = CacheKey.secondary(varyFields: shared.varyFields, request: request.headers)
                if shared.varyStar || mine != shared.secondaryKey {
                    // The response varies on a header this request sends differently.
                    fetchAlone(fw)
                    return
                }
                fw.streaming = true
                let head = shared.response
                clientFraming = ResponseHeadWriter.framing(for: head, clientVersion: request.version)
                if clientFraming == .untilClose { keepAlive = false }
                fw.exchange.status.forwardStatus = head.status
                fw.exchange.status.collapsed = true
                writer.reset()
                ResponseHeadWriter.write(head, framing: clientFraming, keepAlive: keepAlive,
                                         clientVersion: request.version, viaName: worker.settings.viaName,
                                         upgrade: false, cacheStatus: fw.exchange.status.serialized(),
                                         sharedWithout: shared.omitFields, into: &writer)
                stream.output.append(writer.bytes)
                responseHeadSent = true
                noteResponse(head.status)
            }
        }
        let out = stream.output
        let room = ClientConnection.outputHighWater - out.count
        guard room > 0 else { return }
        let chunked = clientFraming == .chunked
        var delivered = 0
        let end = fw.fetch.read(fw.id, limit: room, now: monotonicSeconds()) { bytes in
            delivered += bytes.count
            if chunked {
                chunkWriter.reset()
                chunkWriter.appendChunkHeader(size: bytes.count)
                out.append(chunkWriter.bytes)
                out.append(bytes)
                out.append(ChunkedFraming.chunkEnd)
            } else {
                out.append(bytes)
            }
        }
        noteBody(delivered, fromCache: false)
        switch end {
        case .more:
            return
        case .complete:
            following = nil
            fw.fetch.leave(fw.id)
            if chunked { out.append(ChunkedFraming.lastChunk) }
            finishExchange()
        case .failed:
            // The shared fetch broke off: this client must see a cut, as the leader's does.
            following = nil
            fw.fetch.leave(fw.id)
            worker.logger.warning("collapsed response from \(upstreamName) cut short for \(peer)")
            abort()
        case .detached:
            // This client fell more than the lag limit behind the shared fetch, which does not wait.
            following = nil
            fw.fetch.leave(fw.id)
            worker.stats.add(.collapsedFollowersDetached)
            worker.logger.notice(
                "collapsed response for \(peer) cut: the client stopped reading while the shared fetch from \(upstreamName) waited for it")
            abort()
        }
    }

    /// Stops following and asks the origin for this request after all.
    private func fetchAlone(_ fw: CollapseFollower) {
        following = nil
        fw.fetch.leave(fw.id)
        let ex = fw.exchange
        startForwarding(to: ex.origin, route: ex.route, path: ex.pathRange)
    }

    /// The client is going away. Its followers, if it led a fetch that has some, keep their
    /// response: the fetch carries on without the client.
    func leaveCollapse() {
        if let fw = following {
            following = nil
            fw.fetch.leave(fw.id)
        }
        guard let ex = cacheExchange, let fetch = ex.inFlight else { return }
        if let t = task, responseHeadSent, fetch.hasFollowers {
            task = nil
            worker.adopt(OrphanedFetch(worker: worker, task: t, exchange: ex))
        } else {
            ex.endCollapse(failed: true, table: worker.inFlight)
        }
    }
}
