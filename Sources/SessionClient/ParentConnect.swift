import HTTPWire

/// The `CONNECT` exchange with a parent proxy, without I/O: the request Larder writes and the
/// judgement of the parent's answer, so every answer a parent may give is table-tested.
public enum ParentConnect {
    /// Largest answer head accepted from a parent (its status line and fields, not a page).
    public static let maxHeadBytes = 16 * 1024
    /// Interim (1xx) answers accepted before the final one; more is a parent playing for time.
    public static let maxInterimAnswers = 8

    /// `CONNECT authority HTTP/1.1` with `Host` and, when credentials are configured, the parent's
    /// own `Proxy-Authorization` (never the client's: that one was for Larder).
    public static func request(authority: String, credentials: ProxyCredentials?) -> [UInt8] {
        var w = MessageWriter(capacity: 128 + 2 * authority.utf8.count)
        w.append("CONNECT ")
        w.appendString(authority)
        w.append(" HTTP/1.1\r\nHost: ")
        w.appendString(authority)
        w.append("\r\n")
        if let credentials {
            w.append("Proxy-Authorization: ")
            w.appendString(credentials.authorization)
            w.append("\r\n")
        }
        w.append("\r\n")
        return w.bytes
    }

    /// What the bytes received so far from the parent amount to.
    public enum Step: Equatable, Sendable {
        /// The answer head is not complete yet.
        case needMore
        /// An interim answer of this many bytes: drop it and read on.
        case interim(Int)
        /// A 2xx answer of this many bytes: the connection is the tunnel from there on.
        case open(Int)
        case failed(SessionError)
    }

    /// Judges the front of what the parent sent in answer to `CONNECT target`.
    /// - Parameter tlsFollows: Larder starts TLS in the tunnel itself (an https origin). The origin
    ///   says nothing before Larder's ClientHello, so bytes right behind a 2xx head are the
    ///   parent's, and taking them for the origin's TLS would let the parent speak for the origin.
    ///   For a client's raw tunnel they are relayed (some protocols have the server speak first).
    public static func judge(_ bytes: UnsafeRawBufferPointer, target: String, parent: String,
                             tlsFollows: Bool) -> Step {
        var head = ResponseHead()
        let parsed: Int?
        do {
            parsed = try ResponseParser.parse(bytes, into: &head, requestMethod: .connect,
                                              limits: HeadLimits(maxHeadBytes: maxHeadBytes))
        } catch .headTooLarge, .tooManyHeaderFields {
            return .failed(.responseHeadTooLarge(upstream: parent))
        } catch {
            return .failed(.invalidResponse(upstream: parent, error))
        }
        guard let length = parsed else {
            return bytes.count >= maxHeadBytes ? .failed(.responseHeadTooLarge(upstream: parent)) : .needMore
        }
        if head.status == 101 {
            // Switching protocols is no answer to CONNECT: the parent is not speaking HTTP to us.
            return .failed(.parentRefused(parent: parent, request: "CONNECT \(target)", status: 101))
        }
        if head.isInformational { return .interim(length) }
        guard (200..<300).contains(head.status) else {
            return .failed(.parentRefused(parent: parent, request: "CONNECT \(target)", status: head.status))
        }
        if tlsFollows, bytes.count > length {
            return .failed(.parentSentEarlyBytes(parent: parent, target: target))
        }
        return .open(length)
    }
}
