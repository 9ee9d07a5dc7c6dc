import CachePolicy
import CacheStore
import EventLoop
import HTTPWire
import SessionClient

/// The cache's part in one request: what was found, what was decided, and the store in progress.
final class CacheExchange {
    enum Phase {
        /// Fetching from the origin; the response may be stored, and while it is, this is the store.
        case fetching(StoreInProgress?)
        /// Asking the origin whether `entry` is still good.
        case revalidating(RevalidationMethod)
        /// The revalidation said unchanged: serve `entry` (with freshened head) once the task completes.
        case revalidated
        /// The HEAD revalidation said changed: fetch with GET once the task completes.
        case refetch
        /// An unsafe method: invalidate the URL after a non-error response.
        case unsafe
        /// The request never uses the cache (e.g. If-Match): forwarded, reported, not stored.
        case bypass
    }

    let primaryKey: [UInt8]
    let scheme: String
    let host: [UInt8]
    /// The port of the origin the request is keyed under (with `host`, what `TopHosts` counts).
    let keyedPort: Int
    /// Where the request goes (its origin and route).
    let destination: RequestRouter.Destination
    /// The path and query within the request target (see `RequestTarget.pathRange`).
    let pathRange: Range<Int>
    var phase: Phase
    var facts: RequestFacts?
    var entry: StoredResponse?
    var status = CacheStatus()
    var requestTime: Int64 = 0
    /// `Set-Cookie` lines of a revalidation answer: for the client whose request it answered, in
    /// the response served from the entry, never stored.
    var personalFields: [UInt8] = []

    /// The collapsed fetch this request leads, if any.
    var inFlight: InFlightFetch?
    /// A ranged miss fetching the whole object to store (`RangeRequest.fillsCache`); the client's
    /// range is cut from it as it streams (`RangeFill`).
    var rangeFill = false
    /// A stored prefix this fetch completes: the request asks for the rest (`StoredPieces`).
    var completion: PieceCompletion?
    /// The client's `Range` went to the origin as sent: only then may a 206 be stored as a piece.
    var forwardedRange = false
    /// What `Cache-Status` says of a fetch of the whole made again (phase `.refetch`), when not a
    /// HEAD revalidation's change.
    var refetchStatus: CacheStatus?
    /// The answer under way is not the client's and not worth reading: a completion's that is not
    /// the rest of the stored prefix, to be asked for again whole.
    var abandonsAnswer: Bool {
        if case .refetch = phase { return refetchStatus != nil }
        return false
    }
    /// What this fetch's answer does to the URL's pass marker (`InFlightTable`).
    var passMarking = PassMarking.none
    /// A background refresh's: once it finds the entry changed and removes it, it leads a
    /// collapsed fetch of the URL as this participant (`DetachedFetch`, `.refresh`).
    var refreshLeader: ParticipantHandle?

    init(primaryKey: [UInt8], scheme: String, host: [UInt8], keyedPort: Int,
         destination: RequestRouter.Destination, pathRange: Range<Int>, phase: Phase) {
        self.primaryKey = primaryKey; self.scheme = scheme; self.host = host; self.keyedPort = keyedPort
        self.destination = destination; self.pathRange = pathRange; self.phase = phase
    }

    var origin: OriginKey { destination.origin }

    /// The path and query as the rules see them: the end of the primary key, which holds them byte
    /// for byte (the key's `/` before a bare query aside), rather than a copy for every request.
    var path: ArraySlice<UInt8> { primaryKey.suffix(pathRange.count) }

    /// The response being stored, while phase `.fetching` downloads it (`beginStoring`), until
    /// `completeFetch` commits or abandons it.
    var store: StoreInProgress? {
        if case .fetching(let s) = phase { return s }
        return nil
    }

    var writer: EntryWriter? { store?.writer }

    /// The Content-Length of the response being stored, if it announced one.
    var announcedLength: Int? {
        if case .contentLength(let n)? = store?.response.framing { return n }
        return nil
    }

    // MARK: - Phase changes, all here

    /// Asks the origin whether the entry is still good, with `method`.
    func revalidate(with method: RevalidationMethod) { phase = .revalidating(method) }

    /// Fetches the whole response, to store (a ranged miss filling the cache, a fetch after a
    /// revalidation found a change, an entry that cannot be served).
    func fetchWhole() { phase = .fetching(nil) }

    /// The request does not use the cache: forwarded and reported, never stored.
    func bypass() { phase = .bypass }

    /// An unsafe method: the URL is invalidated after a non-error answer.
    func invalidateAfterAnswer() { phase = .unsafe }

    func beginStore(_ s: StoreInProgress) {
        guard case .fetching = phase else {
            assertionFailure("only a fetch is stored")
            return s.writer.abandon()
        }
        phase = .fetching(s)
    }

    /// The store in progress ends (committed or abandoned by the caller).
    func takeStore() -> StoreInProgress? {
        guard case .fetching(let s?) = phase else { return nil }
        phase = .fetching(nil)
        return s
    }
}

/// A response being stored as it downloads: its writer, and the head, facts and private fields
/// the decision to store computed (only the body's length is left to fill in when it completes).
///
/// A class, so that the exchange holds one reference: as an optional struct of heads and facts,
/// every request paid for copying and destroying it through its type's metadata, stored or not.
final class StoreInProgress {
    let writer: EntryWriter
    let response: ResponseHead
    let facts: EntryFacts
    let omitFields: [[UInt8]]
    let responseTime: Int64

    init(writer: EntryWriter, response: ResponseHead, facts: EntryFacts, omitFields: [[UInt8]], responseTime: Int64) {
        self.writer = writer
        self.response = response
        self.facts = facts
        self.omitFields = omitFields
        self.responseTime = responseTime
    }
}

extension CacheExchange {
    /// Body bytes on their way to the client also go to the store and to collapsed followers.
    /// Returns true when the origin read should pause until a follower catches up.
    func tee(_ source: Buffer, count: Int) -> Bool {
        if let w = writer, !w.isAbandoned {
            source.forEachSegment(upTo: count) { w.append($0) }
            if w.isAbandoned { inFlight?.storeStopped() }
        }
        guard let f = inFlight else { return false }
        var pause = false
        source.forEachSegment(upTo: count) { if f.append($0) { pause = true } }
        return pause
    }

    /// The origin's response ended (`error` nil) or broke off: commit or abandon the store, then
    /// tell collapsed followers. The store goes first so that requests arriving after the table
    /// entry is gone find the new entry.
    func completeFetch(error: SessionError?, table: InFlightTable) {
        if let s = takeStore() {
            if error != nil {
                s.writer.abandon()
            } else {
                let length = s.writer.bodyLength
                var facts = s.facts
                facts.contentLength = length
                s.writer.finish(head: StoredHead.make(response: s.response, bodyLength: length, omitFields: s.omitFields),
                                facts: facts)
            }
        }
        endCollapse(failed: error != nil, table: table)
    }

    /// No more followers will be served from this fetch (and a range fill's claim ends).
    func endCollapse(failed: Bool, table: InFlightTable) {
        if rangeFill {
            rangeFill = false
            table.endFill(primaryKey)
        }
        guard let f = inFlight else { return }
        inFlight = nil
        f.finish(failed: failed)
        table.remove(f)
    }
}

/// A plain fetch of the whole response, one that could have been shared (`Collapse.eligibility`),
/// says with its answer whether the URL is worth collapsing: not stored, it marks the URL pass;
/// stored or shared, it clears the marker. Other fetches (a 304 or 206 a client asked for) say
/// nothing.
enum PassMarking {
    case none
    case markOrClear
    /// The URL's marker is recent: an answer not stored leaves it as it is.
    case clearIfStored
}
