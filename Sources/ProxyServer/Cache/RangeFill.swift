import CachePolicy
import CacheStore
import EventLoop
import HTTPWire

/// A ranged miss that fills the cache (`RangeRequest.fillsCache`): the origin sends the whole
/// object, which is stored, and the client gets its one range cut from the stream — a 206 (or a
/// 416) as if the origin had answered the range. Once the range is delivered the client's exchange
/// ends and the fetch runs on for the store (`OriginRelay.release`), so the next ranged request
/// is a hit.
struct RangeFill {
    /// The client's bytes, inclusive offsets into the whole body; `end < start` for a 416.
    let start: Int
    let end: Int
    /// Body bytes received from the origin so far.
    var received = 0

    /// A range that starts further in than this is asked of the origin as the client sent it, rather
    /// than read through to its start; the whole object is still fetched for the store.
    static let readThroughLimit = 1 << 20

    enum Start {
        /// Not a whole 200 of known length: relay the response as it is (a 200 answers a range too).
        case relayWhole
        /// The 206 or 416 head is written; cut the body with this.
        case cut(RangeFill)
        /// Too far in to read through: ask the origin again with the client's `Range`.
        case askAgain
    }

    /// The origin's head for the whole object: writes the client's 206 (or 416) head.
    static func begin(_ head: ResponseHead, exchange ex: CacheExchange, on c: ClientConnection) -> Start {
        guard head.status == 200, case .contentLength(let total) = head.framing else { return .relayWhole }
        let worker = c.worker
        let now = worker.clock.wallSeconds
        let facts = EntryFacts.make(response: head, requestTime: ex.requestTime, responseTime: now, bodyLength: total,
                                    settings: worker.settings.cache.policy, override: nil)
        let decision = RangeRequest.decide(request: c.request, length: total, entry: facts)
        // Far in: the client gets its range from the origin at once rather than waiting for the
        // read-through (a store goes on in the background).
        if case .single(let start, _) = decision, start > readThroughLimit { return .askAgain }
        // This client's own answer: none of the fields kept out of the shared entry are kept out here.
        let stored = StoredHead.make(response: head, bodyLength: total, omitFields: [])
        guard let storedHead = CachedResponseWriter.parse(stored) else { return .relayWhole }
        let fill: RangeFill
        switch decision {
        case .single(let start, let end):
            c.storedHead(.partial(storedHead, start: start, end: end, length: total,
                                            age: facts.currentAge(now: now)),
                                   status: 206, lookup: ex.status, personal: SetCookieLines.of(head))
            fill = RangeFill(start: start, end: end)
        case .unsatisfiable:
            c.storedHead(.unsatisfiable(length: total), status: 416, lookup: ex.status, personal: [])
            fill = RangeFill(start: 0, end: -1)
        case .full, .passToOrigin:
            return .relayWhole
        }
        return .cut(fill)
    }

    /// Whether the client has all of its range.
    var clientDone: Bool { received > end }

    /// Sends the part of the next `count` body bytes that falls in the client's range.
    mutating func deliver(_ source: Buffer, count: Int, to c: ClientConnection) -> Int {
        var offset = received
        var delivered = 0
        let (start, end) = (self.start, self.end)
        source.forEachSegment(upTo: count) { segment in
            let from = max(offset, start)
            let to = min(offset + segment.count - 1, end)
            if from <= to {
                c.sendBody(UnsafeRawBufferPointer(rebasing: segment[(from - offset)...(to - offset)]))
                delivered += to - from + 1
            }
            offset += segment.count
        }
        received += count
        return delivered
    }
}
