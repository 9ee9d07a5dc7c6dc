/// Whether a download nobody reads may go on for the store alone, and what room it must claim in
/// `DetachedFetchBudget` first. Pure: `DetachedFetch` carries the decision out.
enum DetachedFetchRule {
    /// A response of unknown length claims this much at a time, ahead of what has arrived.
    static let claimStep = 1 << 20

    struct Facts: Equatable {
        /// The response is still being stored (not given up: too large, the disk full).
        var storing: Bool
        var bodyLength: Int
        /// The response's Content-Length, if it announced one.
        var announcedLength: Int?
        /// It already holds a claim, covering the body up to `claimedUpTo` (nil: all of it).
        var claimed: Bool
        var claimedUpTo: Int?
        /// Followers gone from a fetch nobody asked to finish: judged as its client's abort.
        var judgedAsAbort: Bool
        /// The abort policy would finish it (`cache.finish_aborted_fraction` and `_max_size`).
        var worthFinishing: Bool
    }

    enum Decision: Equatable {
        case goOn
        /// Cut it and abandon its store.
        case stop
        /// Claim `bytes` more (a response of unknown length passing what its claim covers).
        case grow(bytes: Int)
        /// Claim `bytes`; the claim then covers the body up to `coversUpTo` (nil: all of it).
        case claim(bytes: Int, coversUpTo: Int?)
    }

    static func decide(_ f: Facts) -> Decision {
        // Nothing being stored any more: nothing to go on for.
        guard f.storing else { return .stop }
        // Judged as an abort even with a claim (a hand-over's): its readers all left.
        if f.judgedAsAbort, !f.worthFinishing { return .stop }
        if f.claimed {
            guard let covered = f.claimedUpTo, f.bodyLength >= covered else { return .goOn }
            return .grow(bytes: claimStep)
        }
        if let total = f.announcedLength { return .claim(bytes: max(0, total - f.bodyLength), coversUpTo: nil) }
        return .claim(bytes: claimStep, coversUpTo: f.bodyLength + claimStep)
    }
}
