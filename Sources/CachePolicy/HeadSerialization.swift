import HTTPWire

/// Writes stored response heads: our status line and selected fields as they arrived.
enum HeadSerialization {
    /// `HTTP/1.1 <status> <reason>\r\n`: the proxy speaks HTTP/1.1 to its clients whatever the
    /// origin's version (RFC 9110 §2.5); the reason phrase is the origin's, possibly empty.
    static func appendStatusLine(of head: ResponseHead, to w: inout MessageWriter) {
        w.append("HTTP/1.1 ")
        w.appendDecimal(head.status)
        w.append(" ")
        head.headers.withBytes(head.reason) { w.append($0) }
        w.append("\r\n")
    }

    /// Fields a stored head never keeps: hop-by-hop (with those named in Connection), framing,
    /// `Age`, which is written afresh for every response served, and cookies being set, which
    /// belong to the one client whose request was answered.
    /// `connectionListsOtherFields`: the head's, computed once by the caller (`HeaderBlock.isHopByHop`).
    static func isNeverStored(_ headers: HeaderBlock, at index: Int, connectionListsOtherFields: Bool) -> Bool {
        headers.isHopByHop(at: index, connectionListsOtherFields: connectionListsOtherFields)
            || headers.nameEquals(at: index, "content-length") || headers.nameEquals(at: index, "age")
            || headers.isSetCookie(at: index)
    }
}

extension HeaderBlock {
    /// `Set-Cookie`, or the obsolete `Set-Cookie2`: never stored, never shared between clients.
    public func isSetCookie(at index: Int) -> Bool {
        nameEquals(at: index, "set-cookie") || nameEquals(at: index, "set-cookie2")
    }
}
