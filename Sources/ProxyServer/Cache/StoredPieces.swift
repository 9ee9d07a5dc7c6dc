import CachePolicy
import CacheStore
import HTTPWire

/// A stored prefix being completed: the request asks the origin for the rest of it, and a 206 of
/// the same version is joined to these bytes (`PartialContent.judgeCompletion`).
final class PieceCompletion {
    let piece: StoredPiece
    let storedHead: ResponseHead
    /// The prefix's bytes, read and checked when the completion was decided: the store may evict
    /// or replace the piece while the origin answers.
    let prefix: [UInt8]
    /// `Range: bytes=N-` and, with a strong entity tag, `If-Range`.
    let requestFields: [UInt8]

    init(piece: StoredPiece, storedHead: ResponseHead, etag: [UInt8]?, prefix: [UInt8]) {
        self.piece = piece; self.storedHead = storedHead; self.prefix = prefix
        requestFields = PartialContent.completionFields(for: piece, etag: etag)
    }
}

/// Pieces in the cache's flow (RFC 9111 §3.3, §3.4): what a lookup that found a stored 206 does
/// with it, and what the answer to a completion request does.
enum StoredPieces {
    /// Prefixes up to this size are completed; the bytes are held while the origin answers. A
    /// larger one is fetched again whole, as on a miss.
    static let completionLimit = 1 << 20

    /// A lookup found `entry`, a piece. `nil`: of no use to this request, which goes on as a miss
    /// (the entry is forgotten; what the origin answers may replace it).
    static func lookUp(_ entry: StoredResponse, exchange ex: CacheExchange, request: RequestHead, facts: RequestFacts,
                       now: Int64, on c: ClientConnection) -> RouteStep? {
        ex.entry = nil
        let settings = c.worker.settings.cache.policy
        guard let head = entry.parsedHead ?? CachedResponseWriter.parse(entry.head),
              let piece = PartialContent.piece(of: head), piece.count == entry.bodyLength else { return nil }
        let use = PartialContent.use(of: piece, request: request, facts: facts)
        switch use {
        case .serve, .unsatisfiable:
            // Served as a whole response would be: fresh (or stale where allowed); a stale piece is
            // not revalidated but asked for again.
            guard case .serve(_, let stale) = Lookup.decide(request: facts, entry: entry.facts, anyStored: true, now: now,
                                                             settings: settings) else { return nil }
            c.noteLookup(stale ? .lookupStaleServed : .lookupHit)
            ex.entry = entry
            ex.status = CacheStatus(hit: true, ttl: entry.facts.timeToLive(now: now), detail: stale ? "stale" : nil)
            return CacheFlow.serve(entry, exchange: ex, request: request, now: now,
                                   piece: CacheFlow.PieceAnswer(head: head, piece: piece, use: use), on: c)
        case .complete:
            // Only a prefix with a strong entity tag can be joined to anything; only where the request
            // may go to the origin at all (not offline, not only-if-cached) and may use what is stored
            // (not a reload).
            guard piece.count <= completionLimit, PartialContent.isCompletable(head),
                  case .fetch(let reason) = Lookup.decide(request: facts, entry: nil, anyStored: true, now: now,
                                                          settings: settings), reason != .bypass, reason != .request,
                  let prefix = bytes(of: entry, reader: c.worker.cacheReader) else { return nil }
            c.noteLookup(.lookupMiss)
            ex.completion = PieceCompletion(piece: piece, storedHead: head, etag: entry.facts.etag, prefix: prefix)
            ex.status = CacheStatus(forward: .partial)
            return .goOn
        case .none:
            return nil
        }
    }

    /// The stored body of `entry`, every disk chunk checked; nil when it is gone or damaged.
    private static func bytes(of entry: StoredResponse, reader: CacheReader) -> [UInt8]? {
        switch entry.body {
        case .memory(let object):
            return object.body
        case .disk:
            let pin = reader.pinBody(of: entry)
            defer { withExtendedLifetime(pin) {} }
            var body: [UInt8] = []
            return reader.readBody(of: entry, into: &body) == .delivered ? body : nil
        }
    }
}

extension CacheExchange {
    /// The origin answered a completion request (phase `.fetching`, `completion` set).
    func completionAnswered(_ head: ResponseHead, _ p: PieceCompletion, request: RequestHead, now: Int64, cache: Cache,
                            setup: CacheSetup) -> HeadStep {
        completion = nil
        switch PartialContent.judgeCompletion(of: p.piece, stored: p.storedHead, answer: head) {
        case .combine:
            var omit = privateFields(of: p.storedHead, setup: setup)
            for name in privateFields(of: head, setup: setup) where !omit.contains(name) { omit.append(name) }
            let complete = p.piece.completeLength
            // The client's head keeps what is its own (its cookies, the fields kept from the shared
            // entry); the stored one does not.
            if let whole = PartialContent.combinedHead(stored: p.storedHead, answer: head, omitFields: omit,
                                                      completeLength: complete),
               let clients = PartialContent.combinedHead(stored: p.storedHead, answer: head, omitFields: [],
                                                        completeLength: complete, personal: SetCookieLines.of(head)) {
                // Not stored (the request said no-store, say): the piece stays as the origin confirmed it.
                _ = beginStoring(request: request, response: whole, now: now, cache: cache, setup: setup)
                if let w = writer { _ = p.prefix.withUnsafeBytes { w.append($0) } }
                status.detail = "completed"
                return .combined(whole: clients, prefix: p)
            }
            fallthrough
        case .refetch:
            // Not the rest of this version (the origin said so): the prefix goes, and the whole is
            // asked for again.
            cache.invalidate(primaryKey: primaryKey)
            phase = .refetch
            refetchStatus = CacheStatus(forward: .partial, detail: "piece-replaced")
            return .consumed
        case .relay:
            // The answer to the request as the client made it, stored as any fetch is (in the
            // piece's place when it may be).
            _ = beginStoring(request: request, response: head, now: now, cache: cache, setup: setup)
            return .forward
        }
    }
}
