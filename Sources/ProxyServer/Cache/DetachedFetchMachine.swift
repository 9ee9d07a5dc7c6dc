/// The decisions of a fetch with no client attached, as a pure state machine: `DetachedFetch`
/// tells it what happened, with what it reads of the exchange at that moment (`Download`), and
/// carries out the one `Action` it answers. The machine does no I/O and calls nobody: it holds the
/// fetch's place in the detached budget (the claim's id, and how far a claim for an unknown length
/// reaches) but asks the budget for room only through its actions, answered by `claimAnswered`
/// and `grewClaim`, so tests drive every purpose without sockets, a worker or a budget.
///
/// A refresh starts by revalidating: it takes a place in the budget (no bytes), asks the origin,
/// and drops what comes back until the cache flow says a new response is being stored or shared;
/// from then on it leads that download. Every download, whatever its purpose, goes on for its
/// followers, or with none within what it claimed for the store alone (`DetachedFetchRule`).
/// Every way out (`cut`, `endRefresh`, `finish`) releases the claim it holds, once.
struct DetachedFetchMachine: Equatable {
    enum Purpose: Equatable {
        /// Collapsed followers read a download whose client went away (or handed it over).
        case followers
        /// An aborted download mostly in (`cache.finish_aborted_fraction`).
        case finishing
        /// A whole response fetched past a ranged miss's range, to fill the cache.
        case rangeFill
        /// RFC 5861 stale-while-revalidate.
        case refresh
    }

    enum Phase: Equatable {
        /// A refresh asking the origin whether its entry changed: no answer's body is wanted.
        case revalidating
        /// A download that goes on for its followers or the store.
        case downloading
        case finished
    }

    /// What the shell reads of the exchange whenever it matters whether a download goes on.
    struct Download: Equatable {
        /// Collapsed followers read it.
        var hasFollowers: Bool
        /// Its response is being stored (not given up: too large, the disk full).
        var storing: Bool
        var bodyLength: Int
        /// The response's Content-Length, if it announced one.
        var announcedLength: Int?
        /// The abort policy would finish it (`OriginRelay.worthFinishing`).
        var worthFinishing: Bool
    }

    /// What the refresh asks the origin.
    enum Question: Equatable {
        /// The stored entry's revalidation (conditional, HEAD or GET as configured).
        case revalidation
        /// A plain GET for the whole new response, once a HEAD found the entry changed.
        case wholeResponse
    }

    /// How the fetch ends: the claim to release and, when the budget refused room, which limit.
    struct Ending: Equatable {
        var releasing: Int?
        var refusedBy: DetachedFetchLedger.Refusal?
    }

    enum Action: Equatable {
        case none
        /// The taken-over download goes on: read (the departed client may have paused it).
        case resumeRead
        /// The body that arrived goes on to the store and the followers.
        case passBody
        /// The body that arrived is not wanted (a revalidation's answer): drop it.
        case dropBody
        /// Ask the budget for a place that may download `bytes`; answer with `claimAnswered`.
        case claim(bytes: Int)
        /// Ask the budget for `bytes` more on claim `id`; answer with `grewClaim`.
        case grow(id: Int, bytes: Int)
        /// Send the refresh's request.
        case ask(Question)
        /// The refresh's new response is a download: release the refresh's place (the download
        /// claims its own), lead the URL's collapsed fetch, then tell `led`.
        case lead(releasing: Int?)
        /// Cut: cancel the origin read (and drop any body that arrived), abandon the store, fail
        /// the followers, end.
        case cut(Ending)
        /// The refresh ended before a new response could be shared: its followers (since the
        /// entry went) fetch on their own; end.
        case endRefresh(Ending)
        /// The origin exchange is over and the cache flow has taken its end: end.
        case finish(releasing: Int?)
    }

    /// What goes on once the download may: the work of the event that asked.
    private enum Resumption: Equatable {
        case read, passBody, nothing
    }

    /// The budget answer the last action waits for.
    private enum Awaiting: Equatable {
        case nothing
        case refreshPlace
        case claim(coversUpTo: Int?, then: Resumption)
        case growth(bytes: Int, then: Resumption)
    }

    let purpose: Purpose
    private(set) var phase: Phase
    /// Its place in the budget: a refresh's while it revalidates, a download's once no reader is left.
    private(set) var claim: Int?
    /// For a response of unknown length: the body length its claim covers.
    private(set) var claimedUpTo: Int?
    private var awaiting = Awaiting.nothing

    /// `claim`: room a hand-over already took for the download in its client's budget.
    init(purpose: Purpose, claim: Int? = nil) {
        self.purpose = purpose
        self.claim = claim
        phase = purpose == .refresh ? .revalidating : .downloading
    }

    // MARK: - Events

    /// A refresh begins; `canAsk`: online, with an entry to revalidate.
    mutating func refreshStarted(canAsk: Bool) -> Action {
        guard phase == .revalidating, canAsk else { return end(refusedBy: nil, as: Action.endRefresh) }
        // A place in the budget (no bytes yet), so one client with many stale entries cannot
        // start a refresh, a lookup and a socket for each.
        awaiting = .refreshPlace
        return .claim(bytes: 0)
    }

    /// The download under way was taken over from its client (whose fetch it now leads).
    mutating func takenOver(_ d: Download) -> Action {
        guard phase == .downloading else { return .none }
        return decide(d, then: .read)
    }

    /// The budget's answer to `.claim`.
    mutating func claimAnswered(_ answer: Result<Int, DetachedFetchLedger.Refusal>) -> Action {
        let asked = awaiting
        awaiting = .nothing
        switch (asked, answer) {
        case (.refreshPlace, .success(let id)):
            claim = id
            return .ask(.revalidation)
        case (.refreshPlace, .failure(let limit)):
            return end(refusedBy: limit, as: Action.endRefresh)
        case (.claim(let upTo, let next), .success(let id)):
            claim = id
            claimedUpTo = upTo
            return go(next)
        case (.claim, .failure(let limit)):
            return end(refusedBy: limit, as: Action.cut)
        case (.nothing, _), (.growth, _):
            assertionFailure("a budget answer nobody asked for")
            return .none
        }
    }

    /// The budget's answer to `.grow`: nil when it grew, else the limit that refused.
    mutating func grewClaim(refusedBy limit: DetachedFetchLedger.Refusal?) -> Action {
        guard case .growth(let bytes, let next) = awaiting else { return .none }
        awaiting = .nothing
        if let limit { return end(refusedBy: limit, as: Action.cut) }
        claimedUpTo = (claimedUpTo ?? 0) + bytes
        return go(next)
    }

    /// A refresh's answer head, taken by the cache flow; `newDownload`: a new response is now
    /// being stored or shared.
    mutating func refreshAnswered(newDownload: Bool) -> Action {
        guard phase == .revalidating, newDownload else { return .none }
        phase = .downloading
        defer { claim = nil }
        return .lead(releasing: claim)
    }

    /// The refresh's new response is led (after `.lead`).
    mutating func led(_ d: Download) -> Action {
        guard phase == .downloading else { return .none }
        return decide(d, then: .nothing)
    }

    mutating func bodyArrived(_ d: Download) -> Action {
        guard phase == .downloading else { return .dropBody }
        return decide(d, then: .passBody)
    }

    /// The origin exchange ended (or broke off), taken by the cache flow; `refetch`: a refresh's
    /// HEAD found the entry changed, and the whole new response is to be fetched.
    mutating func originEnded(refetch: Bool) -> Action {
        switch phase {
        case .revalidating:
            return refetch ? .ask(.wholeResponse) : end(refusedBy: nil, as: Action.endRefresh)
        case .downloading:
            return end(refusedBy: nil) { .finish(releasing: $0.releasing) }
        case .finished:
            return .none
        }
    }

    /// The range fill's client closed its connection: from now on the fill is an aborted download.
    mutating func clientLeft(worthFinishing: Bool) -> Action {
        guard purpose == .rangeFill, phase != .finished, !worthFinishing else { return .none }
        return end(refusedBy: nil, as: Action.cut)
    }

    /// Its owner cancels it (the worker closing).
    mutating func cancelled() -> Action {
        guard phase != .finished else { return .none }
        return end(refusedBy: nil, as: Action.cut)
    }

    // MARK: - Deciding

    /// Whether the download goes on: for its followers, or, with none, for the store alone,
    /// claiming what it needs first.
    private mutating func decide(_ d: Download, then next: Resumption) -> Action {
        if d.hasFollowers { return go(next) }
        let facts = DetachedFetchRule.Facts(storing: d.storing, bodyLength: d.bodyLength,
                                            announcedLength: d.announcedLength, claimed: claim != nil,
                                            claimedUpTo: claimedUpTo, judgedAsAbort: purpose == .followers,
                                            worthFinishing: d.worthFinishing)
        switch DetachedFetchRule.decide(facts) {
        case .goOn:
            return go(next)
        case .stop:
            return end(refusedBy: nil, as: Action.cut)
        case .grow(let bytes):
            guard let id = claim else { return go(next) }
            awaiting = .growth(bytes: bytes, then: next)
            return .grow(id: id, bytes: bytes)
        case .claim(let bytes, let upTo):
            awaiting = .claim(coversUpTo: upTo, then: next)
            return .claim(bytes: bytes)
        }
    }

    private func go(_ next: Resumption) -> Action {
        switch next {
        case .read: return .resumeRead
        case .passBody: return .passBody
        case .nothing: return .none
        }
    }

    /// Finished: the claim is handed back in the ending, and nothing more happens.
    private mutating func end(refusedBy limit: DetachedFetchLedger.Refusal?, as action: (Ending) -> Action) -> Action {
        let ending = Ending(releasing: claim, refusedBy: limit)
        phase = .finished
        claim = nil
        claimedUpTo = nil
        awaiting = .nothing
        return action(ending)
    }
}
