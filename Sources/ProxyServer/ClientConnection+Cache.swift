import CachePolicy
import CacheStore
import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// The cache decision loop of DESIGN §3, on a client connection: look up, decide, serve or
/// revalidate or fetch, store while forwarding.
extension ClientConnection {
    /// Called before forwarding. Returns true when the request was answered without the network
    /// (a hit, a 504 for only-if-cached, a 400 for a bad policy header).
    /// `named` is the origin as the cache key and rules name it; `origin` is where the request goes.
    func consultCache(origin: OriginKey, keyedAs named: OriginKey, route: OutboundHead.Route,
                      path pathRange: Range<Int>) -> Bool {
        cacheExchange = nil
        let method = request.method
        let (primaryKey, path) = request.headers.withBytes(request.target) { t -> ([UInt8], [UInt8]) in
            let p = UnsafeRawBufferPointer(rebasing: t[pathRange])
            return (CacheKey.primary(scheme: named.scheme, host: Array(named.host.utf8), port: named.port, pathAndQuery: p),
                    Array(p))
        }
        let scheme = named.scheme == .https ? "https" : "http"
        let exchange = CacheExchange(primaryKey: primaryKey, scheme: scheme, host: Array(named.host.utf8), path: path,
                                     origin: origin, route: route, path: pathRange, phase: .fetching)
        exchange.requestTime = currentTime()
        if worker.cache.isDisabled {
            noteLookup(.lookupPass)
            exchange.phase = .bypass
            exchange.status = CacheStatus(forward: .bypass, detail: "cache-disabled")
            cacheExchange = exchange
            return false
        }
        switch method {
        case .get where requestBodyPending, .head where requestBodyPending:
            // A GET or HEAD with a body is passed through whole, neither answered from the cache (its
            // body would stay unread) nor revalidated (a revalidation carries no body) nor stored.
            noteLookup(.lookupPass)
            exchange.phase = .bypass
            exchange.status = CacheStatus(forward: .bypass, detail: "request-body")
            cacheExchange = exchange
            return false
        case .get, .head:
            break
        case .options, .trace, .connect:
            noteLookup(.lookupPass)
            return false
        default:
            noteLookup(.lookupPass)
            exchange.phase = .unsafe
            exchange.status = CacheStatus(forward: .method)
            cacheExchange = exchange
            return false
        }
        // Fields of the settings are read in place: a local copy of the struct costs a reference
        // count per field on every request.
        let rulePolicy = path.withUnsafeBytes {
            worker.settings.cache.rules.requestPolicy(scheme: scheme, host: exchange.host, path: $0)
        }
        let facts: RequestFacts
        do {
            facts = try RequestFacts.make(request, rulePolicy: rulePolicy, settings: worker.settings.cache.policy)
        } catch {
            respondAndContinue(400, "unknown Larder-Cache-Policy \"\(error.value)\"; expected one of "
                               + RequestCachePolicy.allCases.map(\.rawValue).joined(separator: ", "))
            return true
        }
        exchange.facts = facts
        cacheExchange = exchange
        let lookup = worker.cacheReader.lookup(primaryKey: primaryKey, request: request.headers)
        var anyStored = true
        switch lookup {
        case .uriMiss: anyStored = false
        case .varyMiss: break
        case .found(let e): exchange.entry = e
        }
        let now = exchange.requestTime
        let decision = Lookup.decide(request: facts, entry: exchange.entry?.facts, anyStored: anyStored, now: now,
                                     settings: worker.settings.cache.policy)
        switch decision {
        case .serve(_, let stale):
            noteLookup(stale ? .lookupStaleServed : .lookupHit)
            let entry = exchange.entry!
            exchange.status = CacheStatus(hit: true, ttl: entry.facts.timeToLive(now: now), detail: stale ? "stale" : nil)
            return serveFromCache(entry, exchange: exchange, now: now)
        case .serveStaleThenRevalidate:
            // Served stale now, refreshed for the next request.
            noteLookup(.lookupStaleServed)
            let entry = exchange.entry!
            exchange.status = CacheStatus(hit: true, ttl: entry.facts.timeToLive(now: now), detail: "stale-while-revalidate")
            let refresh = CacheExchange(primaryKey: primaryKey, scheme: scheme, host: exchange.host, path: path,
                                        origin: origin, route: route, path: pathRange, phase: .fetching)
            refresh.entry = entry
            refresh.facts = facts
            let request = self.request
            if !serveFromCache(entry, exchange: exchange, now: now) { return false }
            worker.refreshInBackground(refresh, request: request)
            return true
        case .revalidate(let m):
            exchange.phase = .revalidating(method == .head ? .head : m)
            exchange.status = CacheStatus(forward: .stale)
            return false
        case .fetch(let reason):
            exchange.phase = .fetching
            exchange.status = CacheStatus(forward: CacheStatus.Forward(reason))
            if reason == .bypass {
                noteLookup(.lookupPass)
                exchange.phase = .bypass
                return false
            }
            noteLookup(.lookupMiss)
            if worker.settings.cache.collapseRequests, reason != .request, method == .get, !facts.hasRange, !facts.hasConditionals,
               request.framing == .none, !request.upgradeRequested {
                return joinInFlight(exchange)
            }
            return false
        case .gatewayTimeout:
            noteLookup(.lookupOnlyIfCachedMiss)
            cacheExchange = nil
            respondAndContinue(504, "\(String(decoding: primaryKey, as: UTF8.self)) is not in the cache and the "
                               + "request allows only cached responses (only-if-cached)")
            return true
        }
    }

    /// The revalidation to write instead of the client's request line, if the cache is revalidating.
    var outboundRevalidation: OutboundHead.Revalidation? {
        guard let ex = cacheExchange, case .revalidating(let m) = ex.phase, let entry = ex.entry else { return nil }
        return OutboundHead.Revalidation(method: m == .head || request.method == .head ? .head : .get,
                                         conditionalFields: Revalidation.conditionalFields(for: entry.facts))
    }

    // MARK: - Origin responses

    /// Takes the final response head first. Returns true when the cache consumed it (a revalidation
    /// answer); otherwise the response is forwarded, with `cacheStatusBytes` in its head.
    func cacheTakesResponse(_ head: ResponseHead) -> Bool {
        guard let ex = cacheExchange else { return false }
        let now = currentTime()
        let setup = worker.settings.cache
        switch ex.phase {
        case .revalidating(let m):
            guard let entry = ex.entry else { return false }
            if head.status >= 500, let facts = ex.facts,
               Lookup.mayServeStaleOnError(request: facts, entry: entry.facts, status: head.status, now: now) {
                noteLookup(.lookupStaleServed)
                ex.status = CacheStatus(hit: true, forwardStatus: head.status, ttl: entry.facts.timeToLive(now: now),
                                        detail: "stale-if-error")
                ex.phase = .revalidated
                return true
            }
            switch Revalidation.outcome(entry: entry.facts, response: head, method: m) {
            case .unchanged:
                noteLookup(.lookupRevalidatedUnchanged)
                guard ex.freshen(with: head, now: now, cache: worker.cache, setup: setup) else { return false }
                ex.personalFields = SetCookieLines.of(head)
                ex.status = CacheStatus(forward: .stale, forwardStatus: head.status,
                                        ttl: ex.entry!.facts.timeToLive(now: now),
                                        detail: m == .head ? "revalidated-head" : "revalidated")
                ex.phase = .revalidated
                return true
            case .changed:
                noteLookup(.lookupRevalidatedChanged)
                worker.cache.invalidate(primaryKey: ex.primaryKey)
                ex.entry = nil
                if m == .head {
                    ex.phase = .refetch
                    return true
                }
                // A conditional GET's 200 is the new response: forward and store it.
                ex.phase = .fetching
                ex.status = CacheStatus(forward: .stale, forwardStatus: head.status)
                _ = ex.beginStoring(request: request, response: head, now: now, cache: worker.cache, setup: setup)
                return false
            }
        case .fetching:
            ex.status.forwardStatus = head.status
            let shared = ex.beginStoring(request: request, response: head, now: now, cache: worker.cache, setup: setup)
            if let f = ex.inFlight {
                if let shared { f.publish(shared) } else { ex.endCollapse(failed: false, table: worker.inFlight) }
            }
            return false
        case .bypass:
            ex.status.forwardStatus = head.status
            return false
        case .unsafe:
            ex.status.forwardStatus = head.status
            for key in Invalidation.targets(method: request.method, status: head.status, targetKey: ex.primaryKey,
                                            response: head) {
                worker.cache.invalidate(primaryKey: key)
            }
            return false
        case .revalidated, .refetch:
            return true
        }
    }

    /// Body bytes on their way to the client also go to the store and to collapsed followers.
    func cacheTee(_ source: Buffer, count: Int) {
        guard let ex = cacheExchange else { return }
        if ex.tee(source, count: count) {
            // A follower is far behind: wait for it while it reads (`collapseProgress` resumes),
            // and look for one that stopped reading altogether.
            collapsePaused = true
            task?.suspendReading()
            watchForStalledFollowers()
        }
        if let w = ex.writer {
            let pacer = storePacer ?? WriterPacer(loop: worker.loop) { [unowned self] in self.resumeOriginIfClear() }
            storePacer = pacer
            if pacer.shouldPause(after: w) { task?.suspendReading() }
        }
    }

    /// The origin's exchange ended. Returns true when the cache took over the rest of the request.
    func cacheTaskCompleted(error: SessionError?) -> Bool {
        guard let ex = cacheExchange else { return false }
        switch ex.phase {
        case .fetching:
            ex.completeFetch(error: error, policy: worker.settings.cache.policy, table: worker.inFlight)
            return false
        case .revalidating:
            // The origin could not be asked: serve stale where allowed (RFC 5861 stale-if-error).
            guard let error, let entry = ex.entry, let facts = ex.facts else { return false }
            let now = currentTime()
            guard Lookup.mayServeStaleOnError(request: facts, entry: entry.facts, status: nil, now: now) else { return false }
            worker.logger.notice("serving stale \(String(decoding: ex.primaryKey, as: UTF8.self)): \(error.message)")
            noteLookup(.lookupStaleServed)
            ex.status = CacheStatus(hit: true, ttl: entry.facts.timeToLive(now: now), detail: "stale-if-error")
            if !serveFromCache(entry, exchange: ex, now: now) { return false }
            return true
        case .revalidated:
            // Decided on the head; a failure after it does not matter to the client.
            guard let entry = ex.entry else { return false }
            if !serveFromCache(entry, exchange: ex, now: currentTime()) {
                startForwarding(to: ex.origin, route: ex.route, path: ex.pathRange)
            }
            return true
        case .refetch:
            ex.phase = .fetching
            ex.status = CacheStatus(forward: .stale)
            ex.requestTime = currentTime()
            startForwarding(to: ex.origin, route: ex.route, path: ex.pathRange)
            return true
        case .unsafe, .bypass:
            return false
        }
    }

    // MARK: - Serving stored responses

    /// Answers from `entry`: 304 for a satisfied client conditional, 206/416 for a range, else the
    /// stored response. Returns false when the request must go to the origin after all (several ranges).
    func serveFromCache(_ entry: StoredResponse, exchange ex: CacheExchange, now: Int64) -> Bool {
        var range = RangeDecision.full
        if request.method == .get, request.headers.firstIndex(of: "range") != nil {
            range = RangeRequest.decide(request: request, length: entry.bodyLength, entry: entry.facts)
            if range == .passToOrigin {
                ex.phase = .fetching
                ex.status = CacheStatus(forward: .partial)
                ex.entry = nil
                return false
            }
        }
        worker.cache.touch(entry, now: now)
        let age = entry.facts.currentAge(now: now)
        let statusBytes = ex.status.serialized()
        writer.reset()
        if ClientConditionals.notModified(request: request, entry: entry.facts),
           let stored = CachedResponseWriter.parse(entry.head) {
            noteResponse(304)
            CachedResponseWriter.notModified(storedHead: stored, age: age, cacheStatus: statusBytes,
                                             keepAlive: keepAlive, clientVersion: request.version,
                                             viaName: worker.settings.viaName, personal: ex.personalFields, into: &writer)
            stream.output.append(writer.bytes)
            cacheExchange = nil
            finishExchange()
            return true
        }
        // A 206 re-writes the stored fields, so it needs them parsed; a head that will not parse
        // is sent whole instead.
        var partialHead: ResponseHead?
        if case .single = range {
            partialHead = CachedResponseWriter.parse(entry.head)
            if partialHead == nil { range = .full }
        }
        var bodyStart = 0
        var bodyCount = entry.bodyLength
        switch range {
        case .single(let start, let end):
            bodyStart = start
            bodyCount = end - start + 1
        case .unsatisfiable:
            bodyCount = 0
        case .full, .passToOrigin:
            break
        }
        // A disk body's first chunk is checked before the head goes out: while nothing is sent, a
        // damaged (or meanwhile evicted) entry is still a plain miss for the origin to answer.
        // Held from before the first read to the end of the response: an eviction or purge meanwhile
        // removes the entry for everyone else but leaves this response its chunks.
        let pin = request.method == .head || bodyCount == 0 ? nil : worker.cacheReader.pinBody(of: entry)
        if case .disk(_, _, let chunkSize) = entry.body, request.method != .head, bodyCount > 0,
           case let read = pin == nil ? .missing
               : worker.cacheReader.withChunk(of: entry, index: bodyStart / chunkSize, verify: true, { _ in }),
           read != .delivered {
            // Damaged (dropped and counted), or evicted since it was looked up: the origin answers.
            ex.phase = .fetching
            ex.status = CacheStatus(forward: .miss, detail: read == .damaged ? "damaged" : "gone")
            ex.entry = nil
            return false
        }
        switch range {
        case .single: noteResponse(206)
        case .unsatisfiable: noteResponse(416)
        case .full, .passToOrigin: noteResponse(entry.facts.status)
        }
        switch range {
        case .single(let start, let end):
            CachedResponseWriter.partial(storedHead: partialHead!, start: start, end: end, length: entry.bodyLength,
                                         age: age, cacheStatus: statusBytes, keepAlive: keepAlive,
                                         clientVersion: request.version, viaName: worker.settings.viaName,
                                         personal: ex.personalFields, into: &writer)
        case .unsatisfiable:
            CachedResponseWriter.unsatisfiable(length: entry.bodyLength, cacheStatus: statusBytes, keepAlive: keepAlive,
                                               clientVersion: request.version, viaName: worker.settings.viaName,
                                               into: &writer)
        case .full, .passToOrigin:
            CachedResponseWriter.full(storedHead: entry.head, age: age, cacheStatus: statusBytes, keepAlive: keepAlive,
                                      clientVersion: request.version, viaName: worker.settings.viaName,
                                      personal: ex.personalFields, into: &writer)
        }
        stream.output.append(writer.bytes)
        cacheExchange = nil
        if request.method == .head || bodyCount == 0 {
            finishExchange()
            return true
        }
        noteBody(bodyCount, fromCache: true)
        switch entry.body {
        case .memory(let object):
            object.body.withUnsafeBytes { body in
                let slice = UnsafeRawBufferPointer(rebasing: body[bodyStart..<bodyStart + bodyCount])
                // Larger bodies go out by reference: the object's body array is immutable and lives as
                // long as the object, which the output buffer keeps until the bytes are written. Small
                // ones are cheaper to copy than to track.
                if bodyCount >= ClientConnection.referenceThreshold {
                    stream.output.appendReference(slice, keepingAlive: object)
                } else {
                    stream.output.append(slice)
                }
            }
            finishExchange()
        case .disk(_, _, let chunkSize):
            state = .exchanging
            stream.disableReading()
            cachedBody = CachedBodyCursor(entry: entry, pin: pin, chunk: bodyStart / chunkSize, skip: bodyStart % chunkSize,
                                          remaining: bodyCount, checkedThrough: bodyStart / chunkSize)
            pumpCachedBody()
        }
        return true
    }

    /// Copies stored body bytes into the output until it holds `cachedBodyWindow`: each response
    /// keeps at most that much of a disk body in memory, however many clients read large objects.
    /// Each chunk's checksum is checked the first time it is read.
    func pumpCachedBody() {
        while var cursor = cachedBody, stream.output.count < ClientConnection.cachedBodyWindow {
            let room = ClientConnection.cachedBodyWindow - stream.output.count
            let index = cursor.chunk
            let verify = index > cursor.checkedThrough
            let read = worker.cacheReader.withChunk(of: cursor.entry, index: index, verify: verify) { bytes in
                let start = min(cursor.skip, bytes.count)
                let take = min(bytes.count - start, cursor.remaining, room)
                stream.output.append(UnsafeRawBufferPointer(rebasing: bytes[start..<start + take]))
                cursor.remaining -= take
                if start + take == bytes.count {
                    cursor.skip = 0
                    cursor.chunk += 1
                } else {
                    cursor.skip = start + take
                }
            }
            switch read {
            case .delivered:
                if verify { cursor.checkedThrough = index }
            case .missing, .damaged:
                // The entry was replaced or evicted mid-response, or its bytes are damaged (the cache
                // logged that): the client must see a cut, not an end.
                if read == .missing { worker.logger.warning("cached body vanished mid-response for \(peer); closing") }
                cachedBody = nil
                abort()
                return
            }
            if cursor.remaining == 0 {
                cachedBody = nil
                finishExchange()
                return
            }
            cachedBody = cursor
        }
    }
}

extension ClientConnection {
    /// Memory-tier bodies from this size on are sent without a copy.
    static let referenceThreshold = 4_096
    /// Bytes of a disk-stored body queued per response; refilled as the socket drains (the
    /// stream reports a drain at `outputHighWater / 4`, which is this).
    static let cachedBodyWindow = outputHighWater / 4
}

/// Where a disk-stored body being sent has got to.
struct CachedBodyCursor {
    var entry: StoredResponse
    /// Keeps the body's chunks readable until the cursor is dropped (the response ends).
    var pin: BodyPin?
    var chunk: Int
    var skip: Int
    var remaining: Int
    /// The last chunk whose checksum was checked for this response.
    var checkedThrough: Int
}

/// The `Set-Cookie` field lines of a head, serialized, for the one client it answers.
enum SetCookieLines {
    static func of(_ head: ResponseHead) -> [UInt8] {
        let headers = head.headers
        var w = MessageWriter(capacity: 0)
        for i in 0..<headers.count where headers.isSetCookie(at: i) { w.appendField(at: i, of: headers) }
        return w.bytes
    }
}
