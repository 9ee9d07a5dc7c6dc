/// A parsed response head. All ranges point into `headers.storage`.
public struct ResponseHead: Sendable {
    public var headers = HeaderBlock()
    public internal(set) var status: Int = 0
    public internal(set) var reason: ByteRange = .empty
    public internal(set) var version: HTTPVersion = .http11
    /// Decided with the request method in mind: HEAD, 1xx, 204 and 304 have no body.
    public internal(set) var framing: BodyFraming = .none
    /// Whether the origin lets the connection be reused after this response.
    public internal(set) var keepAlive: Bool = true
    /// The head announces a body (a non-zero Content-Length, or Transfer-Encoding), whether or not
    /// one follows: on a HEAD, 204 or 304 answer it says how much a broken origin might send anyway.
    public internal(set) var announcesBody: Bool = false
    /// The length the head's `Content-Length` declares (its fields and list members all agree, or
    /// the parse failed), whatever the framing: on a HEAD answer it is the GET's length.
    public internal(set) var declaredContentLength: Int?

    public init() {}

    /// Back to an empty head, keeping the storage's capacity.
    @inline(__always)
    mutating func clear() {
        headers.storage.removeAll(keepingCapacity: true)
        headers.fields.removeAll(keepingCapacity: true)
        status = 0
        reason = .empty
        version = .http11
        framing = .none
        keepAlive = true
        announcesBody = false
        declaredContentLength = nil
    }

    public var isInformational: Bool { status >= 100 && status < 200 }

    /// Removes the end-to-end fields the response's Connection field names, before the cache reads
    /// them: freshness, validators and Vary come only from fields that are also forwarded.
    public mutating func removeFieldsNominatedByConnection() {
        headers.removeFieldsNominatedByConnection()
    }
}

/// Incremental response-head parser. Origins are held to the same grammar as clients, except that
/// a bare LF line ending is tolerated (RFC 9112 §2.2 allows recipients to accept it).
public enum ResponseParser {
    /// Parses the head at the start of `bytes` into `head`.
    /// - Returns: `nil` if incomplete, else the head length in bytes.
    /// - Throws: `malformedStatusLine`, field errors, framing errors (`Content-Length` with
    ///   `Transfer-Encoding` is rejected, as are conflicting lengths), `headTooLarge`.
    ///
    /// When it returns nil or throws, `head` is left empty (no fields, empty ranges). Details: a major
    /// version other than 1 is `unsupportedVersion`, a higher 1.x minor is read as HTTP/1.1 (RFC 9110
    /// §2.5); repeated identical Content-Length values are accepted (RFC 9112 §6.3 item 5); a 2xx answer
    /// to CONNECT has no body (§6.3 item 2); framing errors are checked whatever the status; a
    /// close-delimited body (`untilClose`) means `keepAlive == false`. `maxRequestLineBytes` does not
    /// apply to the status line.
    public static func parse(_ bytes: UnsafeRawBufferPointer, into head: inout ResponseHead,
                             requestMethod: HTTPMethod, limits: HeadLimits) throws(HTTPWireError) -> Int? {
        head.headers.fields.removeAll(keepingCapacity: true)
        do throws(HTTPWireError) {
            if let length = try parseHead(bytes, into: &head, requestMethod: requestMethod, limits: limits) {
                return length
            }
        } catch {
            head.clear()
            throw error
        }
        head.clear()
        return nil
    }

    @inline(__always)
    static func parseHead(_ bytes: UnsafeRawBufferPointer, into head: inout ResponseHead,
                          requestMethod: HTTPMethod, limits: HeadLimits) throws(HTTPWireError) -> Int? {
        let total = bytes.count
        let limitReached = total >= limits.maxHeadBytes
        let window = limitReached ? max(limits.maxHeadBytes, 0) : total

        // Status line (RFC 9112 §4); a bare LF ends it too.
        var j = 0
        while j < window {
            let b = bytes[j]
            if b == asciiCR || b == asciiLF { break }
            j += 1
        }
        let next: Int
        if j == window {
            _ = try statusLine(bytes, 0, j, complete: false)
            return try RequestParser.incomplete(limitReached)
        } else if bytes[j] == asciiLF {
            next = j + 1
        } else {
            guard j + 1 < window else {
                _ = try statusLine(bytes, 0, j, complete: false)
                return try RequestParser.incomplete(limitReached)
            }
            guard bytes[j + 1] == asciiLF else {
                _ = try statusLine(bytes, 0, j, complete: false)
                throw .bareCarriageReturn
            }
            next = j + 2
        }
        guard let line = try statusLine(bytes, 0, j, complete: true) else { throw .malformedStatusLine }

        var facts = FieldFacts()
        guard let end = try HeadScanner.scanFields(bytes, from: next, window: window, base: 0,
                                                   maxCount: limits.maxHeaderCount, isRequest: false,
                                                   fields: &head.headers.fields, facts: &facts) else {
            return try RequestParser.incomplete(limitReached)
        }

        // Framing (RFC 9112 §6.3): errors first, whatever the status, then the rules in order.
        if let error = facts.contentLengthError { throw error }
        let hasTransferEncoding = facts.transferEncodingFields > 0
        if hasTransferEncoding, facts.contentLengthFields > 0 { throw .contentLengthWithTransferEncoding }
        let status = line.status
        let framing: BodyFraming
        if requestMethod == .head || status < 200 || status == 204 || status == 304 {
            framing = .none
        } else if requestMethod == .connect, status < 300 {
            framing = .none  // the connection becomes a tunnel (§6.3 item 2)
        } else if hasTransferEncoding {
            // A proxy cannot un-apply a compression coding (`gzip, chunked`, `gzip`): relaying the
            // body without it would hand clients compressed bytes labelled as plain. Refused (502),
            // as is a coding after `chunked` (its framing could not be read) or one that is not a
            // token. Other codings (`identity`, names no one defines, which a server may not apply
            // unasked) are taken to change nothing: the body is read as chunked when that comes
            // last, else until the connection closes (§6.3 item 4), which then is never reused.
            guard facts.compressionCodings == 0, !facts.codingsOutOfOrder else { throw .unsupportedTransferEncoding }
            framing = facts.finalCodingIsChunked ? .chunked : .untilClose
        } else if facts.contentLengthFields > 0 {
            framing = .contentLength(facts.contentLength)
        } else {
            framing = .untilClose
        }

        head.headers.storage.removeAll(keepingCapacity: true)
        head.headers.storage.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<end]))
        head.status = status
        head.reason = ByteRange(start: line.reasonStart, count: line.reasonEnd - line.reasonStart)
        head.version = line.version
        head.framing = framing
        head.announcesBody = hasTransferEncoding || (facts.contentLengthFields > 0 && facts.contentLength > 0)
        head.declaredContentLength = facts.contentLengthFields > 0 ? facts.contentLength : nil
        if framing == .untilClose {
            head.keepAlive = false
        } else if line.version == .http11 {
            head.keepAlive = !facts.connectionClose
        } else {
            head.keepAlive = facts.connectionKeepAlive && !facts.connectionClose && !hasTransferEncoding
        }
        return end
    }

    struct StatusLine {
        var version: HTTPVersion
        var status: Int
        var reasonStart: Int
        var reasonEnd: Int
    }

    /// Checks `HTTP-version SP 3DIGIT [SP reason]` in `p[start..<end]` (without the line ending).
    /// With `complete == false` the bytes are a prefix of the line: returns nil unless they already
    /// break a rule.
    static func statusLine(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                           complete: Bool) throws(HTTPWireError) -> StatusLine? {
        var k = start
        var major: UInt8 = 0
        var minor: UInt8 = 0
        var status = 0
        // "HTTP/" DIGIT "." DIGIT SP 3DIGIT
        for position in 0..<12 {
            if k == end {
                if !complete { return nil }
                throw .malformedStatusLine
            }
            let b = p[k]
            let ok: Bool
            switch position {
            case 0: ok = b == 0x48  // H
            case 1, 2: ok = b == 0x54  // T
            case 3: ok = b == 0x50  // P
            case 4: ok = b == 0x2F  // /
            case 5: ok = isDigit(b); major = b &- 0x30
            case 6: ok = b == 0x2E  // .
            case 7: ok = isDigit(b); minor = b &- 0x30
            case 8: ok = b == asciiSP
            case 9: ok = b &- 0x31 < 9; status = Int(b &- 0x30)  // 1-9: codes 100...999
            default: ok = isDigit(b); status = status * 10 + Int(b &- 0x30)
            }
            if !ok { throw b == 0 ? .nulByte : .malformedStatusLine }
            k += 1
        }
        // Nothing after the code ("HTTP/1.1 200"): an empty reason with its SP missing is tolerated.
        var reasonStart = k
        if k < end {
            if p[k] != asciiSP { throw p[k] == 0 ? .nulByte : .malformedStatusLine }
            k += 1
            reasonStart = k
            // reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
            while k < end {
                let b = p[k]
                if !isFieldVChar(b), !isOWS(b) { throw b == 0 ? .nulByte : .malformedStatusLine }
                k += 1
            }
        }
        if !complete { return nil }
        guard major == 1 else { throw .unsupportedVersion }
        // A higher HTTP/1.x minor version is processed as HTTP/1.1 (RFC 9110 §2.5).
        return StatusLine(version: minor == 0 ? .http10 : .http11, status: status,
                          reasonStart: reasonStart, reasonEnd: end)
    }
}
