import CachePolicy
import CacheStore
import EventLoop
import HTTPWire
import SessionClient
import Statistics

/// The cache's part in a client's request: look up, decide, then serve, revalidate, or fetch and
/// store while forwarding. Decisions are CachePolicy's; this carries them out on a connection.
enum CacheFlow {
    /// Before forwarding. `.taken` when the request is answered without a fetch of its own (a hit, a
    /// collapsed follower, a 504 for only-if-cached, a 400 for a bad policy header).
    /// `request` is the connection's current request (passed in, so it is read without a copy).
    static func lookUp(_ destination: RequestRouter.Destination, path pathRange: Range<Int>, request: RequestHead,
                       on c: ClientConnection) -> RouteStep {
        c.context.cache = nil
        let worker = c.worker
        let named = destination.keyedAs
        let host = destination.keyedHost ?? Array(named.host.utf8)
        let primaryKey = request.headers.withBytes(request.target) { t in
            // The key keeps the path up to a fragment, and `CacheExchange.path` is its end: the
            // range must hold none (`RequestTarget.pathRange` stops at the first "#").
            assert(!t[pathRange].contains(0x23), "a path range with a fragment")
            return CacheKey.primary(scheme: named.scheme, host: host, port: named.port,
                                    pathAndQuery: UnsafeRawBufferPointer(rebasing: t[pathRange]))
        }
        let scheme = named.scheme.name
        let exchange = CacheExchange(primaryKey: primaryKey, scheme: scheme, host: host, keyedPort: named.port,
                                     destination: destination, pathRange: pathRange, phase: .fetching(nil))
        let path = exchange.path
        let now = worker.clock.wallSeconds
        exchange.requestTime = now
        if worker.cache.isDisabled { return pass(exchange, detail: "cache-disabled", on: c) }
        if destination.carriesCredentials { return pass(exchange, detail: "ftp-login", on: c) }
        switch request.method {
        case .get where c.context.bodyPending, .head where c.context.bodyPending:
            // A GET or HEAD with a body is passed through whole, neither answered from the cache (its
            // body would stay unread) nor revalidated (a revalidation carries no body) nor stored.
            return pass(exchange, detail: "request-body", on: c)
        case .get, .head:
            break
        case .options, .trace, .connect:
            c.noteLookup(.lookupPass)
            return .goOn
        default:
            c.noteLookup(.lookupPass)
            exchange.invalidateAfterAnswer()
            exchange.status = CacheStatus(forward: .method)
            c.context.cache = exchange
            return .goOn
        }
        // Fields of the settings are read in place: a local copy of the struct costs a reference
        // count per field on every request.
        let rulePolicy = path.withUnsafeBytes {
            worker.settings.cache.rules.requestPolicy(scheme: scheme, host: exchange.host, path: $0)
        }
        let facts: RequestFacts
        do {
            let ignoreReload = !worker.settings.cache.rules.rules.isEmpty && path.withUnsafeBytes {
                worker.settings.cache.rules.ignoresReload(scheme: scheme, host: exchange.host, path: $0)
            }
            facts = try RequestFacts.make(request, rulePolicy: rulePolicy, ignoreReload: ignoreReload,
                                          settings: worker.settings.cache.policy)
        } catch {
            c.answerError(400, "unknown Larder-Cache-Policy \"\(error.value)\"; expected one of "
                      + RequestCachePolicy.allCases.map(\.rawValue).joined(separator: ", "))
            return .taken
        }
        exchange.facts = facts
        c.context.cache = exchange
        var anyStored = true
        switch worker.cacheReader.lookup(primaryKey: primaryKey, request: request.headers) {
        case .uriMiss: anyStored = false
        case .varyMiss: break
        case .found(let e): exchange.entry = e
        }
        if !c.context.commitWaited, worker.cache.isCommitPending(primaryKey: primaryKey) {
            // Fetched a moment ago and not committed yet: wait for it rather than fetch it again,
            // or serve a response stored before it (RFC 9111 §4: the most recent one is used).
            c.context.cache = nil
            CommitWait.start(c, primaryKey: primaryKey)
            return .taken
        }
        // A stored piece (206) answers ranges inside it and is completed for the whole; else a miss.
        if let e = exchange.entry, e.facts.status == 206,
           let step = StoredPieces.lookUp(e, exchange: exchange, request: request, facts: facts, now: now, on: c) {
            return step
        }
        switch Lookup.decide(request: facts, entry: exchange.entry?.facts, anyStored: anyStored, now: now,
                             settings: worker.settings.cache.policy) {
        case .serve(_, let stale):
            note(stale ? .lookupStaleServed : .lookupHit, host: named.host, port: named.port, on: c)
            let entry = exchange.entry!
            exchange.status = CacheStatus(hit: true, ttl: entry.facts.timeToLive(now: now), detail: stale ? "stale" : nil)
            return serve(entry, exchange: exchange, request: request, now: now, on: c)
        case .serveStaleThenRevalidate:
            // Served stale now, refreshed for the next request.
            note(.lookupStaleServed, host: named.host, port: named.port, on: c)
            let entry = exchange.entry!
            exchange.status = CacheStatus(hit: true, ttl: entry.facts.timeToLive(now: now), detail: "stale-while-revalidate")
            if serve(entry, exchange: exchange, request: request, now: now, on: c) == .goOn { return .goOn }
            // Refreshed for a request whose answer the cache could store in its place; another
            // (a HEAD, no-store, credentials) would only remove the entry.
            guard Revalidation.mayRefreshInBackground(for: facts) else { return .taken }
            let refresh = CacheExchange(primaryKey: primaryKey, scheme: scheme, host: exchange.host,
                                        keyedPort: named.port, destination: destination, pathRange: pathRange,
                                        phase: .fetching(nil))
            refresh.entry = entry
            refresh.facts = facts
            worker.refreshInBackground(refresh, request: request, client: c.peerAddress)
            return .taken
        case .revalidate(let m):
            exchange.revalidate(with: m)
            exchange.status = CacheStatus(forward: .stale)
            return .goOn
        case .fetch(let reason):
            exchange.status = CacheStatus(forward: CacheStatus.Forward(reason))
            if reason == .bypass {
                c.noteLookup(.lookupPass)
                exchange.bypass()
                return .goOn
            }
            note(.lookupMiss, host: named.host, port: named.port, on: c)
            if reason != .request, worker.settings.cache.fillsRangeMisses, RangeRequest.fillsCache(request, facts: facts),
               worker.inFlight.beginFill(primaryKey) {
                exchange.rangeFill = true
                exchange.passMarking = .markOrClear
                return .goOn
            }
            if case .collapse = Collapse.eligibility(enabled: worker.settings.cache.collapseRequests, reason: reason,
                                                     request: facts, hasBody: request.framing != .none,
                                                     upgradeRequested: request.upgradeRequested) {
                exchange.passMarking = .markOrClear
                return CollapseFollower.join(exchange, on: c)
            }
            return .goOn
        case .gatewayTimeout:
            note(.lookupOnlyIfCachedMiss, host: named.host, port: named.port, on: c)
            c.context.cache = nil
            c.answerError(504, "\(String(decoding: primaryKey, as: UTF8.self)) is not in the cache and the "
                      + "request allows only cached responses (only-if-cached)")
            return .taken
        }
    }

    /// A lookup's result: in the statistics and the access log (`noteLookup`), and in the hit
    /// ratio of the origin the request was counted under (`TopHosts`).
    private static func note(_ result: Count, host: String, port: Int, on c: ClientConnection) {
        c.noteLookup(result)
        c.worker.hosts.noteLookup(result, host: host, port: port)
    }

    /// The same once the origin has answered, for the origin the exchange is keyed under.
    private static func note(_ result: Count, for ex: CacheExchange, on c: ClientConnection) {
        note(result, host: String(decoding: ex.host, as: UTF8.self), port: ex.keyedPort, on: c)
    }

    /// Forwarded and reported, never stored.
    private static func pass(_ exchange: CacheExchange, detail: CacheStatus.Detail, on c: ClientConnection) -> RouteStep {
        c.noteLookup(.lookupPass)
        exchange.bypass()
        exchange.status = CacheStatus(forward: .bypass, detail: detail)
        c.context.cache = exchange
        return .goOn
    }

    // MARK: - Origin responses

    /// The final response head. `.taken` when the cache consumed it (a revalidation answer);
    /// otherwise it is forwarded, and stored if it may be.
    static func takesResponse(_ head: ResponseHead, on c: ClientConnection) -> RouteStep {
        guard let ex = c.context.cache else { return .goOn }
        let worker = c.worker
        switch ex.originHead(head, request: c.request, background: false, now: worker.clock.wallSeconds,
                             cache: worker.cache, setup: worker.settings.cache, table: worker.inFlight) {
        case .forward:
            return .goOn
        case .consumed:
            return .taken
        case .revalidation(let step):
            switch step {
            case .serveStale: note(.lookupStaleServed, for: ex, on: c)
            case .unchanged:
                note(.lookupRevalidatedUnchanged, for: ex, on: c)
                // This client's cookies from the answer: in its response, never stored.
                ex.personalFields = SetCookieLines.of(head)
            case .unchangedNotShared:
                note(.lookupRevalidatedUnchanged, for: ex, on: c)
                ex.personalFields = SetCookieLines.of(head)
            case .unusable: note(.lookupRevalidatedUnchanged, for: ex, on: c)
            case .refetch, .forwardThis:
                note(.lookupRevalidatedChanged, for: ex, on: c)
                worker.stats.add(.revalidationHeadChanged)
            case .storeThis: note(.lookupRevalidatedChanged, for: ex, on: c)
            case .keep: break
            }
            return step.consumesAnswer ? .taken : .goOn
        case .combined(let whole, let p):
            // The stored prefix first, then the origin's rest as it comes (`OriginRelay`).
            c.forwardHead(whole)
            c.noteBody(p.prefix.count, fromCache: true)
            p.prefix.withUnsafeBytes { c.sendBody($0) }
            return .taken
        }
    }

    /// The origin's exchange ended. `.taken` when the cache took over the rest of the request.
    static func taskCompleted(error: SessionError?, on c: ClientConnection) -> RouteStep {
        guard let ex = c.context.cache else { return .goOn }
        let worker = c.worker
        let now = worker.clock.wallSeconds
        switch ex.originEnded(error: error, now: now, table: worker.inFlight) {
        case .done:
            return .goOn
        case .revalidationFailed(let m):
            // The origin could not be asked: serve stale where allowed (RFC 5861 stale-if-error).
            guard let error, let entry = ex.entry, ex.mayServeStaleWithoutAnswer(method: m, now: now) else { return .goOn }
            worker.logger.notice("serving stale \(String(decoding: ex.primaryKey, as: UTF8.self)): \(error.message)")
            note(.lookupStaleServed, for: ex, on: c)
            ex.status = CacheStatus(hit: true, ttl: entry.facts.timeToLive(now: now), detail: "stale-if-error")
            return serve(entry, exchange: ex, request: c.request, now: now, on: c)
        case .serveEntry(let entry):
            if serve(entry, exchange: ex, request: c.request, now: now, on: c) == .goOn {
                OriginRelay.forward(c, to: ex.destination, path: ex.pathRange)
            }
            return .taken
        case .refetch:
            OriginRelay.forward(c, to: ex.destination, path: ex.pathRange)
            return .taken
        }
    }

    // MARK: - Serving stored responses

    /// Answers from `entry`: 304 for a satisfied client conditional, 206/416 for a range, else the
    /// stored response. `.goOn` when the request must go to the origin after all (several ranges, a
    /// damaged or vanished body).
    /// A stored piece and what the request takes from it (`StoredPieces.lookUp`).
    struct PieceAnswer {
        let head: ResponseHead
        let piece: StoredPiece
        let use: PieceUse
    }

    static func serve(_ entry: StoredResponse, exchange ex: CacheExchange, request: RequestHead, now: Int64,
                      piece: PieceAnswer? = nil, on c: ClientConnection) -> RouteStep {
        let worker = c.worker
        var range = RangeDecision.full
        // Offsets in the representation are the stored body's less where it starts (a piece).
        var bodyOffset = 0
        var completeLength = entry.bodyLength
        // The request's facts say whether it has a Range or a conditional at all (read once at
        // lookup): a hit without either is not scanned for them again.
        if let piece {
            bodyOffset = piece.piece.first
            completeLength = piece.piece.completeLength
            if case .serve(let start, let end) = piece.use { range = .single(start: start, end: end) } else { range = .unsatisfiable }
        } else if request.method == .get, ex.facts?.hasRange ?? true, request.headers.firstIndex(of: "range") != nil {
            range = RangeRequest.decide(request: request, length: entry.bodyLength, entry: entry.facts)
            if range == .passToOrigin {
                ex.fetchWhole()
                ex.status = CacheStatus(forward: .partial)
                ex.entry = nil
                return .goOn
            }
        }
        worker.cache.touch(entry, now: now)
        let age = entry.facts.currentAge(now: now)
        if ex.facts?.hasConditionals ?? true, ClientConditionals.notModified(request: request, entry: entry.facts),
           let stored = CachedResponseWriter.parse(entry.head) {
            c.storedHead(.notModified(stored, age: age), status: 304, lookup: ex.status,
                                 personal: ex.personalFields)
            c.context.cache = nil
            c.finishAnswer()
            return .taken
        }
        // A 206 re-writes the stored fields, so it needs them parsed; a head that will not parse
        // is sent whole instead.
        var partialHead: ResponseHead?
        if case .single = range {
            partialHead = piece?.head ?? CachedResponseWriter.parse(entry.head)
            if partialHead == nil { range = .full }
        }
        var bodyStart = 0
        var bodyCount = entry.bodyLength
        switch range {
        case .single(let start, let end):
            bodyStart = start - bodyOffset
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
            ex.fetchWhole()
            ex.status = CacheStatus(forward: .miss, detail: read == .damaged ? "damaged" : "gone")
            ex.entry = nil
            return .goOn
        }
        switch range {
        case .single(let start, let end):
            c.storedHead(.partial(partialHead!, start: start, end: end, length: completeLength, age: age),
                                 status: 206, lookup: ex.status, personal: ex.personalFields)
        case .unsatisfiable:
            c.storedHead(.unsatisfiable(length: completeLength), status: 416, lookup: ex.status, personal: [])
        case .full, .passToOrigin:
            c.storedHead(.full(storedHead: entry.head, age: age), status: entry.facts.status, lookup: ex.status,
                                 personal: ex.personalFields)
        }
        c.context.cache = nil
        if request.method == .head || bodyCount == 0 {
            c.finishAnswer()
            return .taken
        }
        c.noteBody(bodyCount, fromCache: true)
        switch entry.body {
        case .memory(let object):
            object.body.withUnsafeBytes { body in
                // The object's body array is immutable and lives as long as the object, which
                // whoever holds the bytes until they are written keeps.
                c.sendStoredBody(UnsafeRawBufferPointer(rebasing: body[bodyStart..<bodyStart + bodyCount]),
                                 keepingAlive: object)
            }
            c.finishAnswer()
        case .disk(_, _, let chunkSize):
            let cursor = CachedBodyCursor(entry: entry, pin: pin, chunk: bodyStart / chunkSize, skip: bodyStart % chunkSize,
                                          remaining: bodyCount, checkedThrough: bodyStart / chunkSize)
            c.send(.storedBodyStarted(StoredBodySender(connection: c, cursor: cursor)))
        }
        return .taken
    }

    /// Memory-tier bodies from this size on are sent without a copy.
    static let referenceThreshold = 4_096
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
