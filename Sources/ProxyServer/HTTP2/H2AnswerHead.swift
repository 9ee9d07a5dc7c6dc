#if canImport(Glibc)
import Glibc
#endif
import HTTP2
import HTTPWire

/// The HTTP/1.1 answer head an exchange wrote for an HTTP/2 stream, read back as the stream's
/// HEADERS: its status, its framing, and the fields to send, their names lowered into `names` and
/// their values left where they are, without the connection's own fields. Pure: table-tested
/// without a connection.
///
/// The head is Larder's own, written by its exchange from fields checked when they arrived, so it
/// is read by its shape (CRLF-ended lines of `name: value`) rather than through `ResponseParser`'s
/// whole grammar, which read every hit's head a second time and, with a field list copied from
/// it, was the largest cost of an HTTP/2 hit. Whatever does not have that shape is refused (the
/// stream is reset), never guessed at: a line without its colon or with nothing before it, a CR
/// or LF alone, a Content-Length that is not digits (or a list of one length) or that another
/// contradicts, one beside Transfer-Encoding, more fields than `maxFields`. Names and values are
/// not checked byte by byte again: every path that writes them checked them first.
///
/// Hits of one entry write the same stored fields, only their Age and Cache-Status after them
/// differing (if anything does): the last head read whole is kept with where each of its lines
/// began, and a head that starts with the same bytes is read from the last of its lines that lies
/// wholly within them, with the outcome of the lines before it as they were.
struct H2AnswerHead {
    private(set) var status = 0
    private(set) var framing: BodyFraming = .none
    /// The fields to send (`:status` is not among them): names in `names`, values in the bytes read.
    private(set) var spans: [H2Fields.Span] = []
    /// The names of `spans`, in lower case.
    private(set) var names = [UInt8](repeating: 0, count: H2AnswerHead.roomSize)

    static let maxFields = 1_000
    static let roomSize = 1_024
    /// Longer heads are not kept for the next read.
    static let rememberedLimit = 4_096
    /// Room for line starts kept from one head to the next.
    static let keptLines = 256

    /// What reading a head had found when one of its field lines (or its blank line) began.
    private struct LineStart {
        var offset: Int
        var spans: Int
        var namesUsed: Int
        var contentLength: Int?
        var transferEncoding: Bool
        var chunked: Bool
    }
    /// The last head read whole (its bytes, the method it answered, its lines' starts), while
    /// `spans` and `names` still hold what it was read into.
    /// (`lastCount` bytes of `last`, which is kept at `rememberedLimit`: a head read from one of
    /// the last one's lines has only its bytes after that line copied.)
    private var last = [UInt8](repeating: 0, count: H2AnswerHead.rememberedLimit)
    private var lastCount = 0
    private var lastMethod: HTTPMethod = .get
    private var lines: [LineStart] = []
    private var remembered = false
    /// Lines read from their bytes, ever (the others were the last head's): for tests.
    private(set) var linesRead = 0

    var isInformational: Bool { status < 200 }

    init() {
        spans.reserveCapacity(16)
        lines.reserveCapacity(16)
    }

    /// Reads the head at the front of `p`: its length, or nil while it is incomplete. `method` is
    /// the HTTP/1.1 request's: a HEAD's answer has no body, a CONNECT's 2xx becomes a tunnel and
    /// loses its Content-Length.
    mutating func read(_ p: UnsafeRawBufferPointer, method: HTTPMethod) throws(HTTPWireError) -> Int? {
        // A long head's room is given back once its names have been sent.
        if names.count > Self.roomSize {
            names = [UInt8](repeating: 0, count: Self.roomSize)
            remembered = false
        }
        // And the line starts of one with many lines (fields sent or not: a head of short
        // connection fields has more lines than spans).
        if lines.capacity > Self.keptLines {
            lines = []
            lines.reserveCapacity(16)
            remembered = false
        }
        // Out of `self` while they are written, so that reading may change the rest of it.
        var room: [UInt8] = []
        swap(&room, &names)
        defer { swap(&room, &names) }
        while true {
            let outcome = room.withUnsafeMutableBytes { bytes in
                Result { () throws(HTTPWireError) in try read(p, method: method, namesInto: bytes) }
            }
            switch try outcome.get() {
            case .head(let length): return length
            case .incomplete: return nil
            case .namesOverflow: room = [UInt8](repeating: 0, count: room.count * 4)  // seldom: a long head
            }
        }
    }

    private enum Outcome { case head(Int), incomplete, namesOverflow }

    private mutating func read(_ p: UnsafeRawBufferPointer, method: HTTPMethod,
                               namesInto room: UnsafeMutableRawBufferPointer) throws(HTTPWireError) -> Outcome {
        guard let base = p.baseAddress else { return .incomplete }
        var contentLength: Int?
        var transferEncoding = false
        var chunked = false
        var used = 0
        var i: Int
        let resume = resumePoint(p, method: method)
        // What `last` holds already, if this head is kept.
        var keptBytes = 0
        // Kept only once this head is read whole.
        remembered = false
        if let resumed = resume {
            let line = lines[resumed]
            // A line or two, the last head's Age and Cache-Status: Array's generic range removal
            // cost more than these.
            while lines.count > resumed { lines.removeLast() }
            while spans.count > line.spans { spans.removeLast() }
            used = line.namesUsed
            contentLength = line.contentLength
            transferEncoding = line.transferEncoding
            chunked = line.chunked
            i = line.offset
            keptBytes = line.offset
        } else {
            spans.removeAll(keepingCapacity: true)
            lines.removeAll(keepingCapacity: true)
            guard let statusEnd = try Self.lineEnd(p, from: 0) else { return .incomplete }
            status = try Self.status(p, lineEnd: statusEnd)
            i = statusEnd + 2
        }
        let dropsLength = method == .connect && status < 300
        while true {
            lines.append(LineStart(offset: i, spans: spans.count, namesUsed: used, contentLength: contentLength,
                                   transferEncoding: transferEncoding, chunked: chunked))
            linesRead &+= 1
            guard i < p.count else { return .incomplete }
            if p[i] == asciiCR {
                guard i + 1 < p.count else { return .incomplete }
                guard p[i + 1] == asciiLF else { throw .bareCarriageReturn }
                i += 2
                break
            }
            guard let cr = try Self.lineEnd(p, from: i) else { return .incomplete }
            guard spans.count < Self.maxFields else { throw .tooManyHeaderFields }
            guard let found = memchr(base + i, Int32(asciiColon), cr - i), base.distance(to: found) > i else {
                throw .invalidFieldName
            }
            let colon = base.distance(to: found)
            var valueStart = colon + 1
            while valueStart < cr, isOWS(p[valueStart]) { valueStart += 1 }
            var valueEnd = cr
            while valueEnd > valueStart, isOWS(p[valueEnd - 1]) { valueEnd -= 1 }
            let nameCount = colon - i
            guard used + nameCount <= room.count else { return .namesOverflow }
            let name = Self.lower(UnsafeRawBufferPointer(rebasing: p[i..<colon]),
                                  into: UnsafeMutableRawBufferPointer(rebasing: room[used..<(used + nameCount)]))
            i = cr + 2
            switch nameCount {
            case 14 where equalsLowered(name, 0, 14, Self.contentLengthName):
                // A body-less answer relays its origin's field as it came: `5, 5` is one length.
                let (n, first) = try Self.length(p, valueStart, valueEnd)
                if let seen = contentLength {
                    guard seen == n else { throw .conflictingContentLength }
                    continue  // the same length said twice is sent once
                }
                contentLength = n
                if dropsLength { continue }
                valueEnd = first
            case 17 where equalsLowered(name, 0, 17, Self.transferEncodingName):
                transferEncoding = true
                chunked = Self.lastCodingIsChunked(p, valueStart, valueEnd)
                continue
            default:
                if H2Translation.isConnectionField(name) { continue }
            }
            spans.append(H2Fields.Span(nameStart: used, nameCount: nameCount, valueStart: valueStart,
                                       valueCount: valueEnd - valueStart))
            used += nameCount
        }
        // RFC 9112 §6.3, as `ResponseParser` frames what an origin sends: errors first.
        if transferEncoding, contentLength != nil { throw .contentLengthWithTransferEncoding }
        if method == .head || status < 200 || status == 204 || status == 304 || dropsLength {
            framing = .none
        } else if transferEncoding {
            framing = chunked ? .chunked : .untilClose
        } else if let contentLength {
            framing = .contentLength(contentLength)
        } else {
            framing = .untilClose
        }
        if i <= Self.rememberedLimit {
            last.withUnsafeMutableBytes { kept in
                kept.baseAddress!.advanced(by: keptBytes).copyMemory(from: p.baseAddress! + keptBytes, byteCount: i - keptBytes)
            }
            lastCount = i
            lastMethod = method
            remembered = true
        }
        return .head(i)
    }

    /// The index in `lines` of the last line of the last head that `p` repeats up to its end,
    /// where reading `p` may begin; nil to read it from its start.
    private func resumePoint(_ p: UnsafeRawBufferPointer, method: HTTPMethod) -> Int? {
        guard remembered, method == lastMethod else { return nil }
        let same = last.withUnsafeBytes { commonPrefixLength(p, UnsafeRawBufferPointer(rebasing: $0[..<lastCount])) }
        // `lines` is in ascending order of offset, and its first begins after the status line.
        var k = lines.count - 1
        while k >= 0, lines[k].offset > same { k -= 1 }
        return k >= 0 ? k : nil
    }

    /// `name` copied into `room` in lower case, eight bytes at a time.
    private static func lower(_ name: UnsafeRawBufferPointer,
                              into room: UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer {
        guard let from = name.baseAddress, let to = room.baseAddress else { return UnsafeRawBufferPointer(room) }
        var k = 0
        while k + 8 <= name.count {
            to.storeBytes(of: asciiLowered(from.loadUnaligned(fromByteOffset: k, as: UInt64.self)),
                          toByteOffset: k, as: UInt64.self)
            k += 8
        }
        while k < name.count {
            room[k] = asciiLower(name[k])
            k += 1
        }
        return UnsafeRawBufferPointer(room)
    }

    /// The index of the CR of the CRLF ending the line at `start`, or nil while no LF follows it.
    private static func lineEnd(_ p: UnsafeRawBufferPointer, from start: Int) throws(HTTPWireError) -> Int? {
        guard let base = p.baseAddress, start < p.count,
              let found = memchr(base + start, Int32(asciiLF), p.count - start) else { return nil }
        let lf = base.distance(to: found)
        guard lf > start, p[lf - 1] == asciiCR else { throw .bareLineFeed }
        if lf - 1 > start, memchr(base + start, Int32(asciiCR), lf - 1 - start) != nil { throw .bareCarriageReturn }
        return lf - 1
    }

    /// `HTTP/1.x SP 3DIGIT [SP reason]`, the status line an exchange writes.
    private static func status(_ p: UnsafeRawBufferPointer, lineEnd: Int) throws(HTTPWireError) -> Int {
        guard lineEnd >= 12, equalsLowered(p, 0, 7, httpVersionPrefix), isDigit(p[7]), p[8] == asciiSP,
              isDigit(p[9]), isDigit(p[10]), isDigit(p[11]), p[9] != UInt8(ascii: "0"),
              lineEnd == 12 || p[12] == asciiSP else { throw .malformedStatusLine }
        return Int(p[9] &- 0x30) * 100 + Int(p[10] &- 0x30) * 10 + Int(p[11] &- 0x30)
    }

    /// A Content-Length value: one length, or a list of the same one (RFC 9110 §8.6), and where
    /// its first element ends.
    private static func length(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws(HTTPWireError) -> (Int, Int) {
        var length: Int?
        var firstEnd = end
        var s = start
        while true {
            var e = s
            while e < end, p[e] != asciiComma { e += 1 }
            var valueEnd = e
            while valueEnd > s, isOWS(p[valueEnd - 1]) { valueEnd -= 1 }
            guard let n = parseDecimalLength(p, s, valueEnd) else { throw .invalidContentLength }
            if let length {
                guard length == n else { throw .conflictingContentLength }
            } else {
                length = n
                firstEnd = valueEnd
            }
            guard e < end else { return (n, firstEnd) }
            s = e + 1
            while s < end, isOWS(p[s]) { s += 1 }
        }
    }

    /// Whether the last coding a Transfer-Encoding value lists is `chunked` (parameters aside).
    private static func lastCodingIsChunked(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Bool {
        var s = end
        while s > start, p[s - 1] != asciiComma { s -= 1 }
        while s < end, isOWS(p[s]) { s += 1 }
        var e = s
        while e < end, p[e] != UInt8(ascii: ";"), !isOWS(p[e]) { e += 1 }
        return equalsIgnoringCase(p, s, e, "chunked")
    }

    /// Compared with `equalsLowered`, which lowers the bytes it reads: "HTTP/1." is upper case.
    private static let httpVersionPrefix = Array("http/1.".utf8)
    private static let contentLengthName = Array("content-length".utf8)
    private static let transferEncodingName = Array("transfer-encoding".utf8)
}
