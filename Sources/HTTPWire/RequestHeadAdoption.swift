// A request head Larder wrote itself (an HTTP/2 request in HTTP/1.1 form), read from where its
// writer put each part instead of being scanned for them.

extension RequestParser {
    /// Reads `bytes`, one whole head, whose request line and field lines lie where the writer says:
    /// the method ends at `methodEnd`, the target runs from there (after its space) to `targetEnd`,
    /// and `fields` are its field lines in order, as `parse` would record them. Applies `parse`'s
    /// limits, framing and Host checks in `parse`'s order and throws what `parse` would throw; a
    /// head `parse` would refuse for its grammar is the writer's fault, not a case handled here.
    ///
    /// What the writer vouches for: no empty lines before the request line; a token method, a
    /// target of visible ASCII and ` HTTP/1.1` after it; each field line a token name, a colon and
    /// a value of field-vchar, SP and HTAB, CRLF-terminated, its range without the whitespace
    /// around it; one empty line at the end. Debug builds parse `bytes` again and compare.
    public static func adopt(_ bytes: UnsafeRawBufferPointer, methodEnd: Int, targetEnd: Int,
                             fields: UnsafeBufferPointer<HeaderField>, into head: inout RequestHead,
                             limits: HeadLimits) throws(HTTPWireError) {
        do throws(HTTPWireError) {
            try adoptHead(bytes, methodEnd: methodEnd, targetEnd: targetEnd, fields: fields, into: &head,
                          limits: limits)
        } catch {
            head.clear()
            assert(sameAsParsed(bytes, error: error, limits: limits), "an adopted head that parse reads otherwise")
            throw error
        }
        assert(sameAsParsed(bytes, head: head, limits: limits), "an adopted head that parse reads otherwise")
    }

    @inline(__always)
    static func adoptHead(_ bytes: UnsafeRawBufferPointer, methodEnd: Int, targetEnd: Int,
                          fields: UnsafeBufferPointer<HeaderField>, into head: inout RequestHead,
                          limits: HeadLimits) throws(HTTPWireError) {
        // Where `parse` would stop reading: the limit, or the end of the bytes.
        let total = bytes.count
        let window = min(total, max(limits.maxHeadBytes, 0))
        if window == 0 { throw .headTooLarge }

        // The request line's CR must lie before both the window and the line's limit.
        let lineLimit = max(limits.maxRequestLineBytes - 1, 0)
        let lineEnd = targetEnd + 9  // " HTTP/1.1"
        if lineEnd >= min(window, lineLimit) { throw lineLimit <= window ? .requestLineTooLong : .headTooLarge }

        // A field line is counted once it starts inside the window; one that ends past it is cut
        // off there, as the next line's start or the head's end shows.
        for k in fields.indices {
            if fields[k].name.start >= window { throw .headTooLarge }
            if k >= limits.maxHeaderCount { throw .tooManyHeaderFields }
        }
        if total > window { throw .headTooLarge }

        var facts = FieldFacts()
        for field in fields {
            HeadScanner.noteField(bytes, field.name.start, field.name.start + field.name.count,
                                  field.value.start, field.value.start + field.value.count, isRequest: true, &facts)
        }
        let line = RequestLine(methodEnd: methodEnd, targetStart: methodEnd + 1, targetEnd: targetEnd, version: .http11)
        head.headers.fields.removeAll(keepingCapacity: true)
        head.headers.fields.append(contentsOf: fields)
        try complete(bytes, base: 0, end: total, line: line, facts: facts, into: &head)
    }

    /// Whether `parse` reads `bytes` as the same head (debug builds only).
    static func sameAsParsed(_ bytes: UnsafeRawBufferPointer, head: RequestHead, limits: HeadLimits) -> Bool {
        var parsed = RequestHead()
        guard (try? parse(bytes, into: &parsed, limits: limits)) == bytes.count else { return false }
        return parsed.headers.storage == head.headers.storage && parsed.headers.fields == head.headers.fields
            && parsed.method == head.method && parsed.methodRange == head.methodRange && parsed.target == head.target
            && parsed.version == head.version && parsed.framing == head.framing && parsed.keepAlive == head.keepAlive
            && parsed.expectsContinue == head.expectsContinue && parsed.upgradeRequested == head.upgradeRequested
    }

    static func sameAsParsed(_ bytes: UnsafeRawBufferPointer, error adopted: HTTPWireError, limits: HeadLimits) -> Bool {
        var parsed = RequestHead()
        do throws(HTTPWireError) {
            _ = try parse(bytes, into: &parsed, limits: limits)
            return false
        } catch {
            return error == adopted
        }
    }
}
