import HTTPWire

/// Test inputs are written as Swift string literals with explicit "\r\n"; this is the byte form.
func wire(_ text: String) -> [UInt8] { Array(text.utf8) }

typealias ParseResult = Result<Int?, HTTPWireError>

func parseRequest(_ bytes: [UInt8], limits: HeadLimits = HeadLimits(), into head: inout RequestHead) -> ParseResult {
    bytes.withUnsafeBytes { buffer in
        do throws(HTTPWireError) {
            return .success(try RequestParser.parse(buffer, into: &head, limits: limits))
        } catch {
            return .failure(error)
        }
    }
}

func parseResponse(_ bytes: [UInt8], method: HTTPMethod, limits: HeadLimits = HeadLimits(),
                   into head: inout ResponseHead) -> ParseResult {
    bytes.withUnsafeBytes { buffer in
        do throws(HTTPWireError) {
            return .success(try ResponseParser.parse(buffer, into: &head, requestMethod: method, limits: limits))
        } catch {
            return .failure(error)
        }
    }
}

func parseTarget(_ text: String, method: HTTPMethod) -> Result<RequestTarget, HTTPWireError> {
    wire(text).withUnsafeBytes { buffer in
        do throws(HTTPWireError) {
            return .success(try RequestTarget.parse(buffer, method: method))
        } catch {
            return .failure(error)
        }
    }
}

/// Field lines as "name: value" strings, the way a test row writes them.
func fieldLines(_ headers: HeaderBlock) -> [String] {
    (0..<headers.count).map { "\(headers.nameString(at: $0)): \(headers.valueString(at: $0))" }
}

func string(_ headers: HeaderBlock, _ range: ByteRange) -> String {
    headers.withBytes(range) { String(decoding: $0, as: UTF8.self) }
}

/// What a caller of `ChunkedDecoder` ends up with.
enum ChunkedOutcome: Equatable, CustomStringConvertible {
    /// Payload and the number of input bytes the body took (framing included).
    case decoded(payload: [UInt8], consumed: Int)
    /// The input ended before the body did.
    case incomplete(payload: [UInt8])
    case failed(HTTPWireError)
    /// The decoder broke its own step contract.
    case contractViolation(String)

    var description: String {
        switch self {
        case .decoded(let p, let c): return "decoded(\(String(decoding: p, as: UTF8.self).debugDescription), consumed: \(c))"
        case .incomplete(let p): return "incomplete(\(String(decoding: p, as: UTF8.self).debugDescription))"
        case .failed(let e): return "failed(\(e))"
        case .contractViolation(let s): return "contractViolation(\(s))"
        }
    }
}

/// Feeds `input` to a fresh decoder the way a connection does: bytes arrive in the given segments
/// (lengths), and every step sees all bytes that arrived and were not yet consumed.
func decodeChunked(_ input: [UInt8], segments: [Int], maxLineBytes: Int = 4_096,
                   maxTrailerBytes: Int = 16_384) -> ChunkedOutcome {
    var decoder = ChunkedDecoder(maxLineBytes: maxLineBytes, maxTrailerBytes: maxTrailerBytes)
    var arrived = 0
    var nextSegment = 0
    var position = 0
    var payload: [UInt8] = []
    var steps = 0
    while true {
        steps += 1
        if steps > 100_000 { return .contractViolation("no progress") }
        let pending = Array(input[position..<arrived])
        let step: ChunkedDecoder.Step
        switch stepDecoder(&decoder, pending) {
        case .success(let s): step = s
        case .failure(let error): return .failed(error)
        }
        switch step {
        case .needMore:
            guard nextSegment < segments.count else { return .incomplete(payload: payload) }
            arrived = min(input.count, arrived + segments[nextSegment])
            nextSegment += 1
        case .framing(let n):
            guard n > 0, n <= pending.count else { return .contractViolation("framing(\(n)) of \(pending.count)") }
            position += n
        case .data(let n):
            guard n > 0, n <= pending.count else { return .contractViolation("data(\(n)) of \(pending.count)") }
            payload += pending[0..<n]
            position += n
        case .done(let n):
            guard n >= 0, n <= pending.count else { return .contractViolation("done(\(n)) of \(pending.count)") }
            guard decoder.isDone else { return .contractViolation("done but not isDone") }
            // Once done, the decoder stays done and consumes nothing more.
            let again = stepDecoder(&decoder, pending)
            guard again == .success(.done(consumed: 0)) else { return .contractViolation("after done: \(again)") }
            return .decoded(payload: payload, consumed: position + n)
        }
    }
}

/// One decoder step over `bytes[range]` (all of `bytes` by default).
func stepDecoder(_ decoder: inout ChunkedDecoder, _ bytes: [UInt8],
                 _ range: Range<Int>? = nil) -> Result<ChunkedDecoder.Step, HTTPWireError> {
    bytes.withUnsafeBytes { all in
        let view = UnsafeRawBufferPointer(rebasing: all[range ?? 0..<all.count])
        do throws(HTTPWireError) {
            return .success(try decoder.step(view))
        } catch {
            return .failure(error)
        }
    }
}

/// Segment lengths splitting `count` bytes at `cut` (one split point).
func split(_ count: Int, at cut: Int) -> [Int] { [cut, count - cut] }
