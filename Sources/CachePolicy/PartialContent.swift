import HTTPWire

/// The bytes `first...last` (inclusive) of a representation `completeLength` bytes long: what a
/// single-part 206 holds, by its `Content-Range` (RFC 9110 §14.4).
public struct StoredPiece: Sendable, Equatable {
    public let first: Int
    public let last: Int
    public let completeLength: Int

    public init(first: Int, last: Int, completeLength: Int) {
        self.first = first; self.last = last; self.completeLength = completeLength
    }

    public var count: Int { last - first + 1 }
    /// The whole representation after all: stored as the 200 it stands for.
    public var isWhole: Bool { first == 0 && last == completeLength - 1 }
}

/// What a request can have from a stored piece.
public enum PieceUse: Sendable, Equatable {
    /// Its one range, `start...end` of the whole, lies inside the piece: a 206 from the cache.
    case serve(start: Int, end: Int)
    /// Its range starts past the end of the representation, whose length the piece knows: a 416.
    case unsatisfiable
    /// It wants the whole, and the piece is a prefix: ask the origin for the rest (`Range: bytes=N-`).
    case complete(from: Int)
    /// Nothing: the request goes to the origin as on a miss.
    case none
}

/// How the answer to a completion request (`Range: bytes=N-` after a stored prefix) is used.
public enum CompletionAnswer: Sendable, Equatable {
    /// The rest of the same representation: joined to the stored prefix, one 200 for the client
    /// and the store.
    case combine
    /// Not the rest of the stored prefix's representation (another validator, another length, a
    /// 416 …): the prefix is dropped and the whole is asked for again, without `Range`.
    case refetch
    /// A whole answer to the request as the client made it (a 200 when `If-Range` failed, an error):
    /// relayed, and stored as any fetch is.
    case relay
}

/// Partial content in the cache (RFC 9111 §3.3, §3.4): a 206 is stored as a piece of its
/// representation, later ranges inside it are answered from it, and a stored prefix is completed
/// with a range request for the rest. Pieces join only when both carry the same strong entity tag
/// (RFC 9110 §15.3.7.3): a piece of another version never becomes part of this one.
public enum PartialContent {
    /// The piece a 206 holds: exactly one `Content-Range: bytes first-last/complete`, the complete
    /// length known, `first <= last < complete`. Nil for anything else: a multipart answer, an
    /// unknown length (`/*`), several fields, an unsatisfied range, another unit, a malformed value.
    public static func piece(of head: ResponseHead) -> StoredPiece? {
        guard head.status == 206 else { return nil }
        return head.headers.withOnlyValue("content-range") { parseContentRange($0) } ?? nil
    }

    /// `bytes first-last/complete`, the unit case-insensitive (RFC 9110 §14.4), no whitespace inside.
    static func parseContentRange(_ p: UnsafeRawBufferPointer) -> StoredPiece? {
        let n = p.count
        guard n > 6, equalsIgnoringCase(p, 0, 6, "bytes ") else { return nil }
        var dash = 6
        while dash < n, p[dash] != 0x2D { dash += 1 }
        var slash = dash
        while slash < n, p[slash] != byteSlash { slash += 1 }
        guard slash < n, let first = exactInt(p, 6, dash), let last = exactInt(p, dash + 1, slash),
              let complete = exactInt(p, slash + 1, n), first <= last, last < complete else { return nil }
        return StoredPiece(first: first, last: last, completeLength: complete)
    }

    /// Digits only, and not so many that they saturate (a length no origin has).
    private static func exactInt(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int? {
        guard end - start <= 18, let v = parseSaturatingInt(p, start, end) else { return nil }
        return v
    }

    /// Whether a 206 answering `request` may be stored as a piece: a GET with one `bytes` range,
    /// one piece in the answer, and a `Content-Length` that is the piece's length (what the store
    /// keeps is exactly the bytes the `Content-Range` names, or nothing).
    public static func isStorablePiece(request: RequestHead, response: ResponseHead) -> Bool {
        guard request.method == .get, let piece = piece(of: response),
              case .contentLength(let n) = response.framing, n == piece.count else { return false }
        let headers = request.headers
        guard let rangeIndex = headers.firstIndex(of: "range") else { return false }
        let asked = headers.withBytes(headers.fields[rangeIndex].value) { RangeRequest.decide($0, length: piece.completeLength) }
        if case .single = asked { return true }
        return false
    }

    /// What `request` can have from `piece`. Conditionals, preconditions and `If-Range` are the
    /// origin's to answer; a range inside the piece is served, one past the end is a 416, a request
    /// for the whole completes a prefix.
    public static func use(of piece: StoredPiece, request: RequestHead, facts: RequestFacts) -> PieceUse {
        guard request.method == .get, !facts.hasConditionals, !facts.hasPreconditions else { return .none }
        let headers = request.headers
        guard !headers.has("if-range") else { return .none }
        var decision = RangeDecision.full
        if let rangeIndex = headers.firstIndex(of: "range") {
            decision = headers.withBytes(headers.fields[rangeIndex].value) {
                RangeRequest.decide($0, length: piece.completeLength)
            }
        }
        switch decision {
        case .single(let start, let end):
            return start >= piece.first && end <= piece.last ? .serve(start: start, end: end) : .none
        case .unsatisfiable:
            return .unsatisfiable
        case .full:
            return piece.first == 0 && !piece.isWhole ? .complete(from: piece.last + 1) : .none
        case .passToOrigin:
            return .none
        }
    }

    /// The fields of a completion request: the rest from `piece.last + 1`, and `If-Range` with the
    /// stored strong entity tag so that a changed representation comes back whole (one trip). With
    /// no strong tag the rest is asked for plainly, and only a whole answer can be used.
    public static func completionFields(for piece: StoredPiece, etag: [UInt8]?) -> [UInt8] {
        var w = MessageWriter(capacity: 64)
        w.append("Range: bytes=")
        w.appendDecimal(piece.last + 1)
        w.append("-\r\n")
        if let etag, etag.withUnsafeBytes({ EntityTag.isStrong($0) }) {
            w.append("If-Range: ")
            w.append(etag)
            w.append("\r\n")
        }
        return w.bytes
    }

    /// The origin's answer to a completion of `piece`, stored with the head `stored`. Joined only to
    /// the rest of the same version: the same strong entity tag (RFC 9110 §15.3.7.3) and the same
    /// `Content-Encoding` (a tag reused across codings would join plain bytes to compressed ones).
    public static func judgeCompletion(of piece: StoredPiece, stored: ResponseHead, answer: ResponseHead) -> CompletionAnswer {
        switch answer.status {
        case 206:
            guard let rest = self.piece(of: answer), rest.first == piece.last + 1, rest.last == piece.completeLength - 1,
                  rest.completeLength == piece.completeLength,
                  case .contentLength(let n) = answer.framing, n == rest.count,
                  let storedTag = stored.headers.firstValueBytes("etag"), let newTag = answer.headers.firstValueBytes("etag"),
                  EntityTag.compare(storedTag, newTag) == .strongMatch,
                  sameCoding(stored.headers, answer.headers) else { return .refetch }
            return .combine
        case 200:
            // A 200 carrying Content-Range in answer to a range may be a piece labelled whole.
            return answer.headers.has("content-range") ? .refetch : .relay
        case 300...415, 417...:
            return .relay
        default:
            return .refetch
        }
    }

    /// Whether two heads name the same `Content-Encoding` (or none), compared without case and
    /// whitespace around the value.
    static func sameCoding(_ a: HeaderBlock, _ b: HeaderBlock) -> Bool {
        switch (a.firstIndex(of: "content-encoding"), b.firstIndex(of: "content-encoding")) {
        case (nil, nil):
            return true
        case (let i?, let j?):
            return a.withBytes(a.fields[i].value) { x in b.withBytes(b.fields[j].value) { y in sameTrimmedIgnoringCase(x, y) } }
        default:
            return false
        }
    }

    /// Whether a stored prefix can be completed at all: joining needs its strong entity tag, so
    /// without one the whole is asked for as on a miss.
    public static func isCompletable(_ stored: ResponseHead) -> Bool {
        stored.headers.withFirstValue("etag") { EntityTag.isStrong($0) } ?? false
    }

    /// The head of the whole representation a stored prefix and the rest of it make (RFC 9111 §3.4):
    /// the stored fields updated by the answer's (RFC 9111 §3.2; `Content-Range` aside), as a 200
    /// of `piece.completeLength` bytes.
    /// `personal`: field lines for this client only (its `Set-Cookie`), for the head it is sent, never
    /// the one stored.
    public static func combinedHead(stored: ResponseHead, answer: ResponseHead, omitFields: [[UInt8]],
                                    completeLength: Int, personal: [UInt8] = []) -> ResponseHead? {
        let updated = Revalidation.freshenedHead(stored: stored, update: answer, omitFields: omitFields)
        guard let head = StoredHead.parse(updated) else { return nil }
        return wholeHead(of: head, completeLength: completeLength, personal: personal)
    }

    /// `head` as a 200 of `completeLength` bytes: a piece that turned out to be the whole, or a
    /// completed one. Its `Content-Range` and `Content-Length` give way to the new length.
    public static func wholeHead(of head: ResponseHead, completeLength: Int, personal: [UInt8] = []) -> ResponseHead? {
        let headers = head.headers
        var w = MessageWriter(capacity: headers.storage.count + personal.count + 48)
        w.append("HTTP/1.1 200 OK\r\n")
        for i in 0..<headers.count
        where !headers.nameEquals(at: i, "content-range") && !headers.nameEquals(at: i, "content-length")
            && !headers.nameEquals(at: i, "transfer-encoding") {
            w.appendField(at: i, of: headers)
        }
        w.append(personal)
        w.append("Content-Length: ")
        w.appendDecimal(completeLength)
        w.append("\r\n\r\n")
        return StoredHead.parse(w.bytes)
    }
}
