/// Incremental decoder for the chunked transfer coding (RFC 9112 §7.1) that never copies payload:
/// it tells the caller which bytes at the front of its input are framing and which are data, so
/// the caller can move data between buffers without a copy.
///
/// The decoder advances as soon as it returns a step: the caller must act on every `.framing`,
/// `.data` and `.done` it receives. Once done, further calls return `.done(consumed: 0)` and never
/// throw. A size line or trailer line must end with CRLF; `maxLineBytes` bounds a line without its
/// CRLF, and `maxTrailerBytes` bounds the trailer field lines (with their CRLFs, not counting the
/// final empty line).
public struct ChunkedDecoder: Sendable {
    /// What the front of the input holds.
    public enum Step: Sendable, Equatable {
        /// The input holds only part of a framing line: call again when more bytes arrive,
        /// passing all unconsumed bytes again.
        case needMore
        /// The first `consumed` bytes are framing (size line, CRLF after data, extensions): drop them.
        case framing(consumed: Int)
        /// The first `count` bytes (1...input.count) are payload.
        case data(count: Int)
        /// The last chunk and the trailer section ended within the first `consumed` bytes; bytes after
        /// them belong to the next message.
        case done(consumed: Int)
    }

    /// Longest size line (with extensions) or trailer line accepted.
    public let maxLineBytes: Int
    /// Largest trailer section accepted.
    public let maxTrailerBytes: Int

    private enum State: Sendable {
        /// Expecting a chunk-size line.
        case size
        /// Inside chunk data with this many bytes left (> 0).
        case data(remaining: Int)
        /// Expecting the CRLF after chunk data.
        case dataEnd
        /// Reading trailer field lines after the last chunk.
        case trailer
        case done
    }

    private var state: State = .size
    /// Bytes of trailer field lines seen so far.
    private var trailerBytes = 0

    public init(maxLineBytes: Int = 4_096, maxTrailerBytes: Int = 16_384) {
        self.maxLineBytes = maxLineBytes
        self.maxTrailerBytes = maxTrailerBytes
    }

    /// Whether the terminating chunk and trailers have been consumed.
    public var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// Looks at the front of the unconsumed input. The caller drops or moves the bytes the step names,
    /// then calls again with what is left.
    ///
    /// Consecutive framing (the CRLF after one chunk's data and the next size line) is reported as
    /// one `.framing` step. `.needMore` leaves the decoder unchanged, so the same bytes (and more) may
    /// be passed again. After `.done`, returns `.done(consumed: 0)`. After a throw the decoder must
    /// not be used again.
    public mutating func step(_ input: UnsafeRawBufferPointer) throws(HTTPWireError) -> Step {
        let n = input.count
        var consumed = 0
        while true {
            switch state {
            case .done:
                return .done(consumed: consumed)
            case .data(let remaining):
                if consumed > 0 { return .framing(consumed: consumed) }
                if n == 0 { return .needMore }
                let count = min(remaining, n)
                state = count == remaining ? .dataEnd : .data(remaining: remaining - count)
                return .data(count: count)
            case .dataEnd:
                guard consumed < n else { return progress(consumed) }
                guard input[consumed] == asciiCR else { throw .invalidChunkTerminator }
                guard consumed + 1 < n else { return progress(consumed) }
                guard input[consumed + 1] == asciiLF else { throw .invalidChunkTerminator }
                consumed += 2
                state = .size
            case .size:
                guard let (length, size) = try sizeLine(input, from: consumed) else { return progress(consumed) }
                consumed += length
                if size == 0 {
                    state = .trailer
                    trailerBytes = 0
                } else {
                    state = .data(remaining: size)
                }
            case .trailer:
                guard let length = try trailerLine(input, from: consumed) else { return progress(consumed) }
                consumed += length
                if length == 2 {
                    state = .done
                    return .done(consumed: consumed)
                }
            }
        }
    }

    @inline(__always)
    private func progress(_ consumed: Int) -> Step {
        consumed > 0 ? .framing(consumed: consumed) : .needMore
    }

    /// Finds the LF ending the line at `start`, looking no further than a line of `maxLineBytes` plus
    /// CRLF can reach. Returns the LF's index, or nil.
    @inline(__always)
    private func lineEnd(_ input: UnsafeRawBufferPointer, from start: Int) -> Int? {
        let n = input.count
        let limit = min(n, start + maxLineBytes + 2)
        var i = start
        while i < limit {
            if input[i] == asciiLF { return i }
            i += 1
        }
        return nil
    }

    /// Throws `chunkLineTooLong` when the unterminated line at `start` already exceeds the limit.
    @inline(__always)
    private func checkPartialLength(_ input: UnsafeRawBufferPointer, from start: Int) throws(HTTPWireError) {
        let available = input.count - start
        if available >= maxLineBytes + 2 { throw .chunkLineTooLong }
        // maxLineBytes + 1 bytes and the last one is not the CR of the CRLF: too long already.
        if available == maxLineBytes + 1, input[start + maxLineBytes] != asciiCR { throw .chunkLineTooLong }
    }

    /// `chunk-size [ chunk-ext ] CRLF` at `start`: returns its length and the size, or nil if incomplete.
    private func sizeLine(_ input: UnsafeRawBufferPointer, from start: Int) throws(HTTPWireError) -> (Int, Int)? {
        guard let lf = lineEnd(input, from: start) else {
            var end = input.count
            if end > start, input[end - 1] == asciiCR { end -= 1 }  // may be the line's CR
            _ = try Self.sizeLineContent(input, start, min(end, start + maxLineBytes + 1), complete: false)
            try checkPartialLength(input, from: start)
            return nil
        }
        // Checked in the order the bytes would have been had they arrived one at a time, so the
        // error does not depend on how the input was split: content, then length, then the ending.
        let bareLF = !(lf > start && input[lf - 1] == asciiCR)
        if (bareLF ? lf : lf - 1) - start > maxLineBytes {
            _ = try Self.sizeLineContent(input, start, start + maxLineBytes + 1, complete: false)
            throw .chunkLineTooLong
        }
        guard !bareLF else {
            _ = try Self.sizeLineContent(input, start, lf, complete: false)
            throw .invalidChunkSize
        }
        guard let size = try Self.sizeLineContent(input, start, lf - 1, complete: true) else {
            throw .invalidChunkSize
        }
        return (lf + 1 - start, size)
    }

    /// Checks `chunk-size *( BWS ";" BWS ext-name [ BWS "=" BWS ext-value ] )` in `p[start..<end]`.
    /// With `complete == false` the bytes are a prefix of the line: returns nil unless they already
    /// break a rule.
    static func sizeLineContent(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                                complete: Bool) throws(HTTPWireError) -> Int? {
        let maxSize = 1 << 62
        var k = start
        var size = 0
        while k < end, let d = hexValue(p[k]) {
            if size > (maxSize - d) / 16 { throw .invalidChunkSize }
            size = size * 16 + d
            k += 1
        }
        if k == start {
            if k == end, !complete { return nil }
            throw .invalidChunkSize
        }
        var sawExtension = false
        while true {
            // BWS ";"
            let wsStart = k
            while k < end, isOWS(p[k]) { k += 1 }
            if k == end {
                if !complete { return nil }
                if k == wsStart { return size }
                throw sawExtension ? .invalidChunkExtension : .invalidChunkSize  // trailing whitespace
            }
            guard p[k] == asciiSemicolon else {
                throw sawExtension ? .invalidChunkExtension : .invalidChunkSize
            }
            sawExtension = true
            k += 1
            // BWS chunk-ext-name
            while k < end, isOWS(p[k]) { k += 1 }
            let nameStart = k
            while k < end, isTchar(p[k]) { k += 1 }
            if k == end {
                if !complete { return nil }
                if k == nameStart { throw .invalidChunkExtension }
                return size
            }
            if k == nameStart { throw .invalidChunkExtension }
            // [ BWS "=" BWS chunk-ext-val ]
            let afterName = k
            while k < end, isOWS(p[k]) { k += 1 }
            if k == end {
                if !complete { return nil }
                throw .invalidChunkExtension  // trailing whitespace
            }
            guard p[k] == asciiEquals else {
                k = afterName
                continue
            }
            k += 1
            while k < end, isOWS(p[k]) { k += 1 }
            if k == end {
                if !complete { return nil }
                throw .invalidChunkExtension
            }
            if p[k] == asciiQuote {
                // quoted-string = DQUOTE *( qdtext / quoted-pair ) DQUOTE
                k += 1
                var closed = false
                while k < end {
                    let b = p[k]
                    if b == asciiQuote {
                        closed = true
                        k += 1
                        break
                    }
                    if b == asciiBackslash {
                        k += 1
                        if k == end { break }
                        guard isFieldVChar(p[k]) || isOWS(p[k]) else { throw .invalidChunkExtension }
                    } else {
                        guard isFieldVChar(b) || isOWS(b) else { throw .invalidChunkExtension }
                    }
                    k += 1
                }
                if !closed {
                    if !complete { return nil }
                    throw .invalidChunkExtension
                }
            } else {
                let valueStart = k
                while k < end, isTchar(p[k]) { k += 1 }
                if k == valueStart { throw .invalidChunkExtension }
            }
        }
    }

    /// One trailer line at `start`: returns its length (2 for the final empty line), or nil if incomplete.
    private mutating func trailerLine(_ input: UnsafeRawBufferPointer, from start: Int) throws(HTTPWireError) -> Int? {
        guard let lf = lineEnd(input, from: start) else {
            var end = input.count
            if end > start, input[end - 1] == asciiCR { end -= 1 }
            let partialEnd = min(end, start + maxLineBytes + 1)
            try Self.trailerLineContent(input, start, partialEnd, complete: false)
            if trailerBytes + (partialEnd - start) > maxTrailerBytes { throw .invalidTrailer }
            try checkPartialLength(input, from: start)
            return nil
        }
        // In the order a byte-by-byte arrival would check them (see sizeLine).
        let bareLF = !(lf > start && input[lf - 1] == asciiCR)
        if (bareLF ? lf : lf - 1) - start > maxLineBytes {
            try Self.trailerLineContent(input, start, start + maxLineBytes + 1, complete: false)
            if trailerBytes + maxLineBytes + 1 > maxTrailerBytes { throw .invalidTrailer }
            throw .chunkLineTooLong
        }
        if bareLF { throw .invalidTrailer }
        let length = lf + 1 - start
        if length == 2 { return 2 }
        try Self.trailerLineContent(input, start, lf - 1, complete: true)
        trailerBytes += length
        if trailerBytes > maxTrailerBytes { throw .invalidTrailer }
        return length
    }

    /// `field-name ":" OWS field-value OWS` (RFC 9112 §7.1.2), all violations `invalidTrailer`.
    static func trailerLineContent(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                                   complete: Bool) throws(HTTPWireError) {
        var k = start
        while k < end, isTchar(p[k]) { k += 1 }
        if k == end {
            if complete { throw .invalidTrailer }  // no colon
            return
        }
        guard p[k] == asciiColon, k > start else { throw .invalidTrailer }  // also obs-fold, empty name
        k += 1
        while k < end {
            let b = p[k]
            guard isFieldVChar(b) || isOWS(b) else { throw .invalidTrailer }
            k += 1
        }
    }
}
