// Field-line scanning shared by the request and response parsers (RFC 9112 §5, RFC 9110 §5).

/// What the field lines of one head say about framing and connection management, gathered while
/// scanning so the fields are walked once.
struct FieldFacts {
    var contentLengthFields = 0
    var contentLength = 0
    /// The first problem found in a Content-Length field; reported after the whole head was read.
    var contentLengthError: HTTPWireError?
    var transferEncodingFields = 0
    /// Number of (non-empty) transfer codings listed across all Transfer-Encoding fields.
    var codings = 0
    /// How many of them are exactly `chunked`.
    var chunkedCodings = 0
    /// Whether the last coding listed is `chunked` (ignoring parameters).
    var finalCodingIsChunked = false
    /// How many are codings that change the bytes in a way a client must undo (gzip, deflate,
    /// compress, br, zstd, xz, … and their `x-` names): a proxy that cannot undo them cannot relay
    /// the content without them.
    var compressionCodings = 0
    /// How many are `chunked`, with parameters or without.
    var chunkedNames = 0
    /// A coding listed after `chunked` (whose framing then cannot be read), or a coding that is not
    /// a token (`"gzip"`): codings no response may be relayed with.
    var codingsOutOfOrder = false
    var hostFields = 0
    /// Whether every Host value seen is `uri-host [ ":" port ]` (checked for requests only).
    var hostValuesAreValid = true
    var connectionClose = false
    var connectionKeepAlive = false
    var connectionUpgrade = false
    var hasUpgrade = false
    var expectsContinue = false

    /// Requests accept exactly one coding, `chunked`.
    var requestCodingsAreValid: Bool { codings == 1 && chunkedCodings == 1 }
}

enum HeadScanner {
    /// Largest number of empty lines skipped before a request line (RFC 9112 §2.2).
    static let maxLeadingEmptyLines = 8

    /// Scans field lines starting at `start` up to the empty line that ends the head.
    /// - Returns: the index just past the empty line, or nil when `window` ends first.
    /// Every prefix of valid field lines returns nil; errors are thrown as soon as they are certain.
    @inline(__always)
    static func scanFields(_ p: UnsafeRawBufferPointer, from start: Int, window: Int, base: Int,
                           maxCount: Int, isRequest: Bool,
                           fields: inout [HeaderField], facts: inout FieldFacts) throws(HTTPWireError) -> Int? {
        // One allocation for a typical head rather than one per doubling from empty.
        if fields.capacity < 16 { fields.reserveCapacity(16) }
        var i = start
        while true {
            guard i < window else { return nil }
            var b = p[i]
            if b == asciiCR {
                guard i + 1 < window else { return nil }
                guard p[i + 1] == asciiLF else { throw .bareCarriageReturn }
                return i + 2
            }
            if b == asciiLF {
                if isRequest { throw .bareLineFeed }
                return i + 1
            }
            if isOWS(b) { throw .obsoleteLineFolding }
            if b == 0 { throw .nulByte }
            if fields.count >= maxCount { throw .tooManyHeaderFields }

            // field-name ":"
            let nameStart = i
            while i < window, isTchar(p[i]) { i += 1 }
            guard i < window else { return nil }
            b = p[i]
            if b != asciiColon {
                if isOWS(b) {
                    var k = i
                    while k < window, isOWS(p[k]) { k += 1 }
                    guard k < window else { return nil }
                    if p[k] == asciiColon { throw .whitespaceBeforeColon }
                    throw p[k] == 0 ? .nulByte : .invalidFieldName
                }
                throw b == 0 ? .nulByte : .invalidFieldName
            }
            if i == nameStart { throw .invalidFieldName }
            let nameEnd = i
            i += 1

            // OWS field-value OWS
            while i < window, isOWS(p[i]) { i += 1 }
            let valueStart = i
            i = fieldValueBytesEnd(p, from: i, to: window)
            var valueEnd = i
            while valueEnd > valueStart, isOWS(p[valueEnd - 1]) { valueEnd -= 1 }
            guard i < window else { return nil }
            b = p[i]
            if b == asciiCR {
                guard i + 1 < window else { return nil }
                guard p[i + 1] == asciiLF else { throw .bareCarriageReturn }
                i += 2
            } else if b == asciiLF {
                if isRequest { throw .bareLineFeed }
                i += 1
            } else {
                throw b == 0 ? .nulByte : .invalidFieldValue
            }
            fields.append(HeaderField(name: ByteRange(start: nameStart - base, count: nameEnd - nameStart),
                                      value: ByteRange(start: valueStart - base, count: valueEnd - valueStart)))
            noteField(p, nameStart, nameEnd, valueStart, valueEnd, isRequest: isRequest, &facts)
        }
    }

    /// Records what one complete field line means for framing and connection management.
    @inline(__always)
    static func noteField(_ p: UnsafeRawBufferPointer, _ nameStart: Int, _ nameEnd: Int,
                          _ valueStart: Int, _ valueEnd: Int, isRequest: Bool, _ facts: inout FieldFacts) {
        switch nameEnd - nameStart {
        case 4:
            if equalsIgnoringCase(p, nameStart, nameEnd, "host") {
                facts.hostFields += 1
                if isRequest, !isValidHost(p, valueStart, valueEnd) { facts.hostValuesAreValid = false }
            }
        case 6:
            if equalsIgnoringCase(p, nameStart, nameEnd, "expect"),
               equalsIgnoringCase(p, valueStart, valueEnd, "100-continue") {
                facts.expectsContinue = true
            }
        case 7:
            if equalsIgnoringCase(p, nameStart, nameEnd, "upgrade"), valueEnd > valueStart { facts.hasUpgrade = true }
        case 10:
            if equalsIgnoringCase(p, nameStart, nameEnd, "connection") {
                forEachListElement(p, valueStart, valueEnd) { s, e in
                    if equalsIgnoringCase(p, s, e, "close") {
                        facts.connectionClose = true
                    } else if equalsIgnoringCase(p, s, e, "keep-alive") {
                        facts.connectionKeepAlive = true
                    } else if equalsIgnoringCase(p, s, e, "upgrade") {
                        facts.connectionUpgrade = true
                    }
                    return true
                }
            }
        case 14:
            if equalsIgnoringCase(p, nameStart, nameEnd, "content-length") {
                noteContentLength(p, valueStart, valueEnd, isRequest: isRequest, &facts)
            }
        case 17:
            if equalsIgnoringCase(p, nameStart, nameEnd, "transfer-encoding") {
                facts.transferEncodingFields += 1
                forEachListElement(p, valueStart, valueEnd) { s, e in
                    facts.codings += 1
                    if equalsIgnoringCase(p, s, e, "chunked") { facts.chunkedCodings += 1 }
                    // The coding's name without parameters (`chunked;x=y` is still chunked for responses).
                    var k = s
                    while k < e, p[k] != asciiSemicolon, !isOWS(p[k]) { k += 1 }
                    let chunked = equalsIgnoringCase(p, s, k, "chunked")
                    if facts.chunkedNames > 0 || k == s { facts.codingsOutOfOrder = true }
                    for i in s..<k where !isTchar(p[i]) { facts.codingsOutOfOrder = true }
                    if chunked { facts.chunkedNames += 1 }
                    facts.finalCodingIsChunked = chunked
                    if isCompressionCoding(p, s, k) { facts.compressionCodings += 1 }
                    return true
                }
            }
        default:
            break
        }
    }

    static func isCompressionCoding(_ p: UnsafeRawBufferPointer, _ s: Int, _ e: Int) -> Bool {
        var start = s
        if e - s > 2, p[s] | 0x20 == UInt8(ascii: "x"), p[s + 1] == UInt8(ascii: "-") { start += 2 }
        return equalsIgnoringCase(p, start, e, "gzip") || equalsIgnoringCase(p, start, e, "deflate")
            || equalsIgnoringCase(p, start, e, "compress") || equalsIgnoringCase(p, start, e, "br")
            || equalsIgnoringCase(p, start, e, "zstd") || equalsIgnoringCase(p, start, e, "xz")
            || equalsIgnoringCase(p, start, e, "lzma") || equalsIgnoringCase(p, start, e, "bzip2")
            || equalsIgnoringCase(p, start, e, "pack200-gzip") || equalsIgnoringCase(p, start, e, "exi")
    }

    /// RFC 9112 §3.2 / RFC 9110 §7.2: `Host = uri-host [ ":" port ]` with RFC 3986's grammar: an
    /// IP-literal in brackets (its characters checked, not its structure: Larder never routes by Host),
    /// or a reg-name of unreserved characters, sub-delims and percent-encodings; the port is digits.
    /// An empty value is allowed (a target without authority). Userinfo, spaces, "/", "?", "#",
    /// quotes and non-ASCII are not.
    @inline(__always)
    static func isValidHost(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        var i = start
        if i < end, p[i] == 0x5B {  // "[" IPv6address / IPvFuture "]"
            i += 1
            let literalStart = i
            while i < end, p[i] != 0x5D {
                guard isUnreservedOrSubDelim(p[i]) || p[i] == asciiColon else { return false }
                i += 1
            }
            guard i < end, i > literalStart else { return false }
            i += 1
        } else {
            while i < end, p[i] != asciiColon {
                let b = p[i]
                if b == 0x25 {  // pct-encoded = "%" HEXDIG HEXDIG
                    guard i + 2 < end, hexValue(p[i + 1]) != nil, hexValue(p[i + 2]) != nil else { return false }
                    i += 3
                    continue
                }
                guard isUnreservedOrSubDelim(b) else { return false }
                i += 1
            }
        }
        guard i < end else { return true }
        guard p[i] == asciiColon else { return false }
        i += 1
        while i < end {
            guard isDigit(p[i]) else { return false }
            i += 1
        }
        return true
    }

    /// RFC 9112 §6.3 item 5 / RFC 9110 §8.6: `Content-Length = 1*DIGIT`. A list of values (`5, 5`) or a
    /// repeated field is refused for requests; responses may repeat the same value.
    @inline(__always)
    static func noteContentLength(_ p: UnsafeRawBufferPointer, _ valueStart: Int, _ valueEnd: Int,
                                  isRequest: Bool, _ facts: inout FieldFacts) {
        facts.contentLengthFields += 1
        var values = 0
        var first = 0
        var allSame = true
        var i = valueStart
        while true {
            var elementEnd = i
            while elementEnd < valueEnd, p[elementEnd] != asciiComma { elementEnd += 1 }
            var s = i
            var e = elementEnd
            while s < e, isOWS(p[s]) { s += 1 }
            while e > s, isOWS(p[e - 1]) { e -= 1 }
            guard let v = parseDecimalLength(p, s, e) else {
                if facts.contentLengthError == nil { facts.contentLengthError = .invalidContentLength }
                return
            }
            if values == 0 { first = v } else if v != first { allSame = false }
            values += 1
            guard elementEnd < valueEnd else { break }
            i = elementEnd + 1
        }
        let repeated = values > 1 || facts.contentLengthFields > 1
        if repeated {
            let conflicting = isRequest || !allSame || (facts.contentLengthFields > 1 && first != facts.contentLength)
            if conflicting, facts.contentLengthError == nil { facts.contentLengthError = .conflictingContentLength }
        }
        facts.contentLength = first
    }
}
