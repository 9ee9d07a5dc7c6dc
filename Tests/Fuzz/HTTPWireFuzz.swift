// libFuzzer target for HTTPWire, compiled together with its sources by scripts/fuzz.sh (not part
// of the package build). The first input byte chooses what is fuzzed; the rest is the input.
// Besides "no crash, no sanitizer report", each parser is held to properties a proxy relies on.

@_cdecl("LLVMFuzzerTestOneInput")
public func larderFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let selector = data[0]
    let input = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    // 0xFF: the PROXY protocol header (kept apart so the older selectors keep their meaning).
    if selector == 0xFF { fuzzProxyHeader(Array(input)); return 0 }
    switch selector % 3 {
    case 0: fuzzRequestHead(input)
    case 1: fuzzResponseHead(input, method: [.get, .head, .connect, .post][Int(selector / 3) % 4])
    default: fuzzChunked(input, piece: 1 + Int(selector / 3) % 17)
    }
    return 0
}

private let limits = HeadLimits(maxHeadBytes: 4_096, maxHeaderCount: 32, maxRequestLineBytes: 1_024)

private func check(_ condition: Bool, _ what: StaticString) {
    if !condition { fatalError("property broken: \(what)") }
}

private func inside(_ r: ByteRange, _ storage: [UInt8]) -> Bool {
    r.start >= 0 && r.count >= 0 && r.start + r.count <= storage.count
}

private func prefix(_ input: UnsafeRawBufferPointer, _ n: Int) -> UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(rebasing: input[0..<n])
}

/// A complete head: its ranges lie in its storage; exactly its bytes parse to the same length;
/// one byte fewer is incomplete, never complete. Anything else leaves the head empty.
private func fuzzRequestHead(_ input: UnsafeRawBufferPointer) {
    var head = RequestHead()
    let length: Int?
    do {
        length = try RequestParser.parse(input, into: &head, limits: limits)
    } catch {
        check(head.headers.fields.isEmpty && head.headers.storage.isEmpty, "request head empty after an error")
        return
    }
    guard let length else {
        check(head.headers.fields.isEmpty, "request head empty when incomplete")
        return
    }
    check(length > 0 && length <= input.count, "request head length within the input")
    let storage = head.headers.storage
    check(inside(head.target, storage) && inside(head.methodRange, storage), "request line ranges inside storage")
    for f in head.headers.fields { check(inside(f.name, storage) && inside(f.value, storage), "field ranges inside storage") }
    var again = RequestHead()
    check((try? RequestParser.parse(prefix(input, length), into: &again, limits: limits)) == .some(length),
          "the head's own bytes parse to the same length")
    var shorter = RequestHead()
    if let r = try? RequestParser.parse(prefix(input, length - 1), into: &shorter, limits: limits) {
        check(r == nil, "one byte fewer is not a complete head")
    }
    let method = head.method
    if let target = try? head.headers.withBytes(head.target, { bytes throws(HTTPWireError) in
        try RequestTarget.parse(bytes, method: method)
    }) {
        check(target.host.count <= head.target.count, "target host within the target")
    }
}

private func fuzzResponseHead(_ input: UnsafeRawBufferPointer, method: HTTPMethod) {
    var head = ResponseHead()
    let length: Int?
    do {
        length = try ResponseParser.parse(input, into: &head, requestMethod: method, limits: limits)
    } catch {
        check(head.headers.fields.isEmpty && head.headers.storage.isEmpty, "response head empty after an error")
        return
    }
    guard let length else { return }
    check(length > 0 && length <= input.count, "response head length within the input")
    check(head.status >= 100 && head.status <= 999, "status has three digits")
    let storage = head.headers.storage
    check(inside(head.reason, storage), "reason inside storage")
    for f in head.headers.fields { check(inside(f.name, storage) && inside(f.value, storage), "field ranges inside storage") }
    if case .contentLength(let n) = head.framing { check(n >= 0, "content length not negative") }
    var again = ResponseHead()
    check((try? ResponseParser.parse(prefix(input, length), into: &again, requestMethod: method, limits: limits))
          == .some(length), "the head's own bytes parse to the same length")
}

private enum ChunkedOutcome: Equatable {
    case done(consumed: Int)
    case incomplete
    case failed(HTTPWireError)
}

/// Decodes `input` as it would arrive `piece` bytes at a time (or all at once).
private func decodeChunked(_ input: UnsafeRawBufferPointer, piece: Int) -> (ChunkedOutcome, [UInt8]) {
    var decoder = ChunkedDecoder(maxLineBytes: 256, maxTrailerBytes: 1_024)
    var payload: [UInt8] = []
    var consumed = 0
    var arrived = min(piece, input.count)
    while true {
        let available = UnsafeRawBufferPointer(rebasing: input[consumed..<arrived])
        let step: ChunkedDecoder.Step
        do {
            step = try decoder.step(available)
        } catch {
            return (.failed(error), payload)
        }
        switch step {
        case .needMore:
            guard arrived < input.count else { return (.incomplete, payload) }
            arrived = min(arrived + piece, input.count)
        case .framing(let n):
            check(n > 0 && n <= available.count, "framing within the input")
            consumed += n
        case .data(let n):
            check(n > 0 && n <= available.count, "data within the input")
            payload.append(contentsOf: available[0..<n])
            consumed += n
        case .done(let n):
            check(n <= available.count, "done within the input")
            check(decoder.isDone, "done means done")
            return (.done(consumed: consumed + n), payload)
        }
        if consumed == arrived, arrived < input.count { arrived = min(arrived + piece, input.count) }
    }
}

/// However the bytes are split as they arrive, the decoder reaches the same end with the same payload.
private func fuzzChunked(_ input: UnsafeRawBufferPointer, piece: Int) {
    let whole = decodeChunked(input, piece: max(1, input.count))
    let pieces = decodeChunked(input, piece: piece)
    check(whole.0 == pieces.0, "same outcome whatever the split")
    check(whole.1 == pieces.1, "same payload whatever the split")
}

/// A parsed PROXY header lies within its input, its own bytes parse to the same header, and one
/// byte fewer is incomplete; an incomplete input stays incomplete however it is cut shorter.
private func fuzzProxyHeader(_ input: [UInt8]) {
    switch ProxyProtocolHeader.parse(input) {
    case .parsed(let header):
        check(header.length > 0 && header.length <= input.count, "PROXY header length within the input")
        check(header.length <= ProxyProtocolHeader.maxLength, "PROXY header within its bound")
        check(ProxyProtocolHeader.parse(Array(input.prefix(header.length))) == .parsed(header),
              "the header's own bytes parse to the same header")
        check(ProxyProtocolHeader.parse(Array(input.prefix(header.length - 1))) == .needMore,
              "one byte fewer is not a complete PROXY header")
        if let a = header.source { check((a.address.count == 4 || a.address.count == 16) && a.port <= 65_535, "a client address") }
    case .needMore:
        check(input.count < ProxyProtocolHeader.maxLength, "an incomplete PROXY header is shorter than the bound")
        check(ProxyProtocolHeader.parse(Array(input.dropLast())) == .needMore, "a shorter incomplete header stays incomplete")
    case .invalid(let why):
        check(!why.isEmpty, "a refusal says why")
    }
}
