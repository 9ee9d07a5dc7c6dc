import EventLoop

/// Whether a plain connection's first bytes are HTTP/2's connection preface (RFC 9113 §3.4): a
/// client with prior knowledge starts with it instead of a request line.
enum H2Preface {
    enum Verdict: Equatable {
        case h2
        /// Every byte so far matches: wait for more before deciding.
        case incomplete
        case other
    }

    static let bytes: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    static func check(_ input: Buffer) -> Verdict {
        input.withContiguousPrefix(maxBytes: bytes.count) { check($0) }
    }

    static func check(_ prefix: UnsafeRawBufferPointer) -> Verdict {
        // Almost every first request starts with another byte: decided without a loop.
        guard let first = prefix.first, first == bytes[0] else { return prefix.isEmpty ? .incomplete : .other }
        let n = min(prefix.count, bytes.count)
        for i in 1..<n where prefix[i] != bytes[i] { return .other }
        return n == bytes.count ? .h2 : .incomplete
    }
}
