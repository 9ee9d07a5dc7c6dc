/// A parsed request head. All ranges point into `headers.storage`.
public struct RequestHead: Sendable {
    public var headers = HeaderBlock()
    public internal(set) var method: HTTPMethod = .get
    public internal(set) var methodRange: ByteRange = .empty
    public internal(set) var target: ByteRange = .empty
    public internal(set) var version: HTTPVersion = .http11
    /// Request bodies are `.none`, `.contentLength` or `.chunked`, never `.untilClose`.
    public internal(set) var framing: BodyFraming = .none
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    public internal(set) var keepAlive: Bool = true
    /// `Expect: 100-continue` was sent.
    public internal(set) var expectsContinue: Bool = false
    /// `Connection: upgrade` together with an `Upgrade` field (e.g. WebSocket).
    public internal(set) var upgradeRequested: Bool = false

    /// An upgrade to WebSocket and nothing else: the one protocol switch Larder relays. Others
    /// (`h2c`, …) would turn the connection into a tunnel of raw requests past every per-request
    /// rule (h2c smuggling), so they are forwarded as plain requests.
    public var upgradesToWebSocket: Bool {
        upgradeRequested && headers.listsOnly("websocket", inFieldsNamed: "upgrade")
    }

    public init() {}

    /// Removes the fields the request's Connection field names (see
    /// `HeaderBlock.removeFieldsNominatedByConnection`), before anything reads the request.
    public mutating func removeFieldsNominatedByConnection() {
        headers.removeFieldsNominatedByConnection()
        if expectsContinue, headers.firstIndex(of: "expect") == nil { expectsContinue = false }
    }

    /// Points the request at another target (a mirror's upstream URL), before anything routes it.
    /// The caller vouches for `target`: a parsed request-target's bytes, without whitespace or controls.
    public mutating func replaceTarget(_ bytes: [UInt8]) {
        let start = headers.storage.count
        headers.storage.append(contentsOf: bytes)
        target = ByteRange(start: start, count: bytes.count)
    }

    /// Back to an empty head, keeping the storage's capacity.
    @inline(__always)
    mutating func clear() {
        headers.storage.removeAll(keepingCapacity: true)
        headers.fields.removeAll(keepingCapacity: true)
        method = .get
        methodRange = .empty
        target = .empty
        version = .http11
        framing = .none
        keepAlive = true
        expectsContinue = false
        upgradeRequested = false
    }
}

/// Incremental request-head parser, strict per RFC 9112 (CRLF line endings required).
public enum RequestParser {
    /// Parses the head at the start of `bytes` into `head`, reusing its storage.
    /// - Returns: `nil` when `bytes` does not yet hold a complete head (call again with more), or the
    ///   length of the head in bytes (everything after it is body or the next message).
    /// - Throws: the first rule the head breaks; `headTooLarge` as soon as `bytes` holds
    ///   `limits.maxHeadBytes` without a complete head; `requestLineTooLong` as soon as the first line
    ///   exceeds `limits.maxRequestLineBytes`. Empty lines before the request line are skipped (§2.2).
    ///
    /// When it returns nil or throws, `head` is left empty (no fields, empty ranges), never half-filled.
    /// `head.headers.storage` holds the head from the request line on: skipped empty lines count in the
    /// returned length but are not copied.
    /// Up to 8 empty lines are skipped; more is `malformedRequestLine`. Semantic checks run after the
    /// whole head was read, in this order: Content-Length syntax and repetition, Content-Length with
    /// Transfer-Encoding, the transfer codings, then Host (its count, then its value's syntax).
    public static func parse(_ bytes: UnsafeRawBufferPointer, into head: inout RequestHead,
                             limits: HeadLimits) throws(HTTPWireError) -> Int? {
        head.headers.fields.removeAll(keepingCapacity: true)
        do throws(HTTPWireError) {
            if let length = try parseHead(bytes, into: &head, limits: limits) { return length }
        } catch {
            head.clear()
            throw error
        }
        head.clear()
        return nil
    }

    @inline(__always)
    static func parseHead(_ bytes: UnsafeRawBufferPointer, into head: inout RequestHead,
                          limits: HeadLimits) throws(HTTPWireError) -> Int? {
        let total = bytes.count
        let limitReached = total >= limits.maxHeadBytes
        let window = limitReached ? max(limits.maxHeadBytes, 0) : total

        // RFC 9112 §2.2: skip a few empty lines (CRLF only) before the request line.
        var i = 0
        var emptyLines = 0
        while true {
            guard i < window else { return try incomplete(limitReached) }
            let b = bytes[i]
            if b == asciiCR {
                guard i + 1 < window else { return try incomplete(limitReached) }
                guard bytes[i + 1] == asciiLF else { throw .bareCarriageReturn }
                emptyLines += 1
                if emptyLines > HeadScanner.maxLeadingEmptyLines { throw .malformedRequestLine }
                i += 2
            } else if b == asciiLF {
                throw .bareLineFeed
            } else {
                break
            }
        }
        let base = i

        // Request line (RFC 9112 §3), bounded by maxRequestLineBytes including its CRLF: its CR must
        // sit before `lineLimit`.
        let lineLimit = base + max(limits.maxRequestLineBytes - 1, 0)
        let scanEnd = min(window, lineLimit)
        var j = base
        while j < scanEnd {
            let b = bytes[j]
            if b == asciiCR || b == asciiLF { break }
            j += 1
        }
        if j == scanEnd {
            _ = try requestLine(bytes, base, j, complete: false)
            if lineLimit <= window { throw .requestLineTooLong }
            return try incomplete(limitReached)
        }
        if bytes[j] == asciiLF {
            _ = try requestLine(bytes, base, j, complete: false)
            throw .bareLineFeed
        }
        guard j + 1 < window else {
            _ = try requestLine(bytes, base, j, complete: false)
            return try incomplete(limitReached)
        }
        guard bytes[j + 1] == asciiLF else {
            _ = try requestLine(bytes, base, j, complete: false)
            throw .bareCarriageReturn
        }
        guard let line = try requestLine(bytes, base, j, complete: true) else { throw .malformedRequestLine }

        var facts = FieldFacts()
        guard let end = try HeadScanner.scanFields(bytes, from: j + 2, window: window, base: base,
                                                   maxCount: limits.maxHeaderCount, isRequest: true,
                                                   fields: &head.headers.fields, facts: &facts) else {
            return try incomplete(limitReached)
        }

        try complete(bytes, base: base, end: end, line: line, facts: facts, into: &head)
        return end
    }

    /// The checks made once the whole head was read, and the head filled in from `bytes[base..<end]`.
    @inline(__always)
    static func complete(_ bytes: UnsafeRawBufferPointer, base: Int, end: Int, line: RequestLine,
                         facts: FieldFacts, into head: inout RequestHead) throws(HTTPWireError) {
        // Framing (RFC 9112 §6.1, §6.3) and Host (§3.2), in this order.
        if let error = facts.contentLengthError { throw error }
        let hasTransferEncoding = facts.transferEncodingFields > 0
        if hasTransferEncoding, facts.contentLengthFields > 0 { throw .contentLengthWithTransferEncoding }
        if hasTransferEncoding, !facts.requestCodingsAreValid { throw .unsupportedTransferEncoding }
        if line.version == .http11 ? facts.hostFields != 1 : facts.hostFields > 1 { throw .invalidHost }
        if !facts.hostValuesAreValid { throw .invalidHost }

        head.headers.storage.removeAll(keepingCapacity: true)
        head.headers.storage.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[base..<end]))
        head.method = method(bytes, base, line.methodEnd)
        head.methodRange = ByteRange(start: 0, count: line.methodEnd - base)
        head.target = ByteRange(start: line.targetStart - base, count: line.targetEnd - line.targetStart)
        head.version = line.version
        if hasTransferEncoding {
            head.framing = .chunked
        } else if facts.contentLengthFields > 0 {
            head.framing = .contentLength(facts.contentLength)
        } else {
            head.framing = .none
        }
        if line.version == .http11 {
            head.keepAlive = !facts.connectionClose
        } else {
            // HTTP/1.0 with Transfer-Encoding: framing is suspect, close afterwards (RFC 9112 §6.1).
            head.keepAlive = facts.connectionKeepAlive && !facts.connectionClose && !hasTransferEncoding
        }
        head.expectsContinue = facts.expectsContinue
        head.upgradeRequested = facts.connectionUpgrade && facts.hasUpgrade
    }

    struct RequestLine {
        var methodEnd: Int
        var targetStart: Int
        var targetEnd: Int
        var version: HTTPVersion
    }

    @inline(__always)
    static func incomplete(_ limitReached: Bool) throws(HTTPWireError) -> Int? {
        if limitReached { throw .headTooLarge }
        return nil
    }

    /// Checks `method SP request-target SP HTTP-version` in `p[start..<end]` (without CRLF).
    /// With `complete == false` the bytes are a prefix of the line: returns nil unless they already
    /// break a rule.
    static func requestLine(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                            complete: Bool) throws(HTTPWireError) -> RequestLine? {
        var k = start
        while k < end, isTchar(p[k]) { k += 1 }
        if k == end {
            if !complete { return nil }
            throw k == start ? .invalidMethod : .malformedRequestLine
        }
        if p[k] != asciiSP { throw p[k] == 0 ? .nulByte : .invalidMethod }
        if k == start { throw .invalidMethod }
        let methodEnd = k
        k += 1

        let targetStart = k
        k = visibleBytesEnd(p, from: k, to: end)  // 0x21...0x7E
        if k == end {
            if !complete { return nil }
            throw .malformedRequestLine
        }
        if p[k] != asciiSP { throw p[k] == 0 ? .nulByte : .invalidTarget }
        if k == targetStart { throw .malformedRequestLine }
        let targetEnd = k
        k += 1

        // HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive (RFC 9112 §2.3).
        let expected: (UInt8, UInt8, UInt8, UInt8, UInt8) = (0x48, 0x54, 0x54, 0x50, 0x2F)
        var digits: (UInt8, UInt8) = (0, 0)
        for position in 0..<8 {
            if k == end {
                if !complete { return nil }
                throw .malformedRequestLine
            }
            let b = p[k]
            let ok: Bool
            switch position {
            case 0: ok = b == expected.0
            case 1: ok = b == expected.1
            case 2: ok = b == expected.2
            case 3: ok = b == expected.3
            case 4: ok = b == expected.4
            case 5: ok = isDigit(b); digits.0 = b &- 0x30
            case 6: ok = b == 0x2E
            default: ok = isDigit(b); digits.1 = b &- 0x30
            }
            if !ok { throw b == 0 ? .nulByte : .malformedRequestLine }
            k += 1
        }
        if k != end { throw p[k] == 0 ? .nulByte : .malformedRequestLine }
        if !complete { return nil }
        guard digits.0 == 1, digits.1 <= 1 else { throw .unsupportedVersion }
        return RequestLine(methodEnd: methodEnd, targetStart: targetStart, targetEnd: targetEnd,
                           version: digits.1 == 0 ? .http10 : .http11)
    }

    /// Methods are case-sensitive (RFC 9110 §9.1).
    @inline(__always)
    static func method(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> HTTPMethod {
        switch end - start {
        case 3:
            if equalsExactly(p, start, "GET") { return .get }
            if equalsExactly(p, start, "PUT") { return .put }
        case 4:
            if equalsExactly(p, start, "HEAD") { return .head }
            if equalsExactly(p, start, "POST") { return .post }
        case 5:
            if equalsExactly(p, start, "TRACE") { return .trace }
            if equalsExactly(p, start, "PATCH") { return .patch }
        case 6:
            if equalsExactly(p, start, "DELETE") { return .delete }
        case 7:
            if equalsExactly(p, start, "CONNECT") { return .connect }
            if equalsExactly(p, start, "OPTIONS") { return .options }
        default:
            break
        }
        return .other
    }
}
