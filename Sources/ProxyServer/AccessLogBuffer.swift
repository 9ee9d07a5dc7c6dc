import Glibc
import HTTPWire
import SessionClient

/// One worker's access log lines waiting for the writer thread. Loop-confined: formatting a line is
/// byte appends into a reused buffer; the date is formatted once per second.
final class AccessLogBuffer {
    let log: AccessLog
    private(set) var bytes: [UInt8] = []
    private var dateSecond: Int64 = -1
    private var date: [UInt8] = []

    static let flushAt = 32 * 1024

    init(log: AccessLog) {
        self.log = log
        bytes.reserveCapacity(AccessLogBuffer.flushAt + 2048)
    }

    /// What one line says about one request.
    struct Entry {
        var client: [UInt8]
        var request: RequestHead
        /// An intercepted connection's destination: its origin-form targets are logged as the
        /// https:// URLs they stand for.
        var origin: OriginKey?
        var status: Int
        var bodyBytes: Int
        /// Bytes the client sent through a tunnel (CONNECT, WebSocket); 0 otherwise.
        var bytesFromClient = 0
        var cache: StaticString
        var seconds: Double
        var time: Int64
        /// The request came on a stream of an HTTP/2 connection.
        var overHTTP2 = false
    }

    func append(_ e: Entry) {
        if e.time != dateSecond { formatDate(e.time) }
        switch log.format {
        case .combined: appendCombined(e)
        case .json: appendJSON(e)
        }
        if bytes.count >= AccessLogBuffer.flushAt { flush() }
    }

    func flush() {
        guard !bytes.isEmpty else { return }
        log.submit(bytes)
        bytes.removeAll(keepingCapacity: true)
    }

    // combined: client - - [date] "request line" status bytes "referer" "user agent" cache seconds
    private func appendCombined(_ e: Entry) {
        bytes.append(contentsOf: e.client)
        append(" - - [")
        bytes.append(contentsOf: date)
        append("] \"")
        let h = e.request.headers
        h.withBytes(e.request.methodRange) { escaped($0) }
        append(" ")
        urlPrefix(of: e, json: false)
        withLoggedTarget(e) { escaped($0) }
        append(e.overHTTP2 ? " HTTP/2.0\" " : e.request.version == .http10 ? " HTTP/1.0\" " : " HTTP/1.1\" ")
        if e.status > 0 { decimal(e.status) } else { append("-") }
        append(" ")
        decimal(e.bodyBytes)
        append(" \"")
        field(h, "referer")
        append("\" \"")
        field(h, "user-agent")
        append("\" ")
        append(e.cache)
        append(" ")
        seconds(e.seconds)
        append("\n")
    }

    /// The request's target as logged: an `ftp://` URL without its `user:password@`.
    private func withLoggedTarget(_ e: Entry, _ body: (UnsafeRawBufferPointer) -> Void) {
        e.request.headers.withBytes(e.request.target) { target in
            guard target.count > 6, target[0] | 0x20 == 0x66, target[1] | 0x20 == 0x74 else { return body(target) }
            RequestTarget.withoutUserinfo(target).withUnsafeBytes(body)
        }
    }

    private func appendJSON(_ e: Entry) {
        let h = e.request.headers
        append("{\"time\":\"")
        bytes.append(contentsOf: date)
        append("\",\"client\":\"")
        bytes.append(contentsOf: e.client)
        append("\",\"method\":\"")
        h.withBytes(e.request.methodRange) { jsonEscaped($0) }
        append("\",\"url\":\"")
        urlPrefix(of: e, json: true)
        withLoggedTarget(e) { jsonEscaped($0) }
        append(e.overHTTP2 ? "\",\"version\":\"HTTP/2.0\",\"status\":"
               : e.request.version == .http10 ? "\",\"version\":\"HTTP/1.0\",\"status\":" : "\",\"version\":\"HTTP/1.1\",\"status\":")
        decimal(e.status)
        append(",\"bytes\":")
        decimal(e.bodyBytes)
        if e.bytesFromClient > 0 {
            append(",\"bytes_from_client\":")
            decimal(e.bytesFromClient)
        }
        append(",\"referer\":\"")
        if let i = h.firstIndex(of: "referer") { h.withBytes(h.fields[i].value) { jsonEscaped($0) } }
        append("\",\"user_agent\":\"")
        if let i = h.firstIndex(of: "user-agent") { h.withBytes(h.fields[i].value) { jsonEscaped($0) } }
        append("\",\"cache\":\"")
        append(e.cache)
        append("\",\"duration\":")
        seconds(e.seconds)
        append("}\n")
    }

    /// An intercepted request's origin-form target is written after the URL it is relative to.
    private func urlPrefix(of e: Entry, json: Bool) {
        guard let origin = e.origin, e.request.headers.withBytes(e.request.target, { $0.first == 0x2F }) else { return }
        Self.urlPrefix(origin).withUnsafeBytes { json ? jsonEscaped($0) : escaped($0) }
    }

    /// `https://host` (an IPv6 address in brackets), with `:port` unless it is 443: what an
    /// intercepted request's origin-form target is relative to. Escaped like the target when
    /// written, although the host was parsed from the CONNECT target.
    static func urlPrefix(_ origin: OriginKey) -> [UInt8] {
        let host = origin.host.contains(":") ? "[\(origin.host)]" : origin.host
        return Array(("https://" + host + (origin.port == 443 ? "" : ":\(origin.port)")).utf8)
    }

    private func field(_ h: HeaderBlock, _ name: StaticString) {
        if let i = h.firstIndex(of: name) { h.withBytes(h.fields[i].value) { escaped($0) } } else { append("-") }
    }

    private func append(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    private func decimal(_ n: Int) {
        if n < 0 { append("-"); return }
        if n >= 10 { decimal(n / 10) }
        bytes.append(UInt8(0x30 + n % 10))
    }

    private func seconds(_ s: Double) { Self.appendSeconds(s, to: &bytes) }

    /// Seconds with microseconds: 0.000123.
    static func appendSeconds(_ s: Double, to bytes: inout [UInt8]) {
        let micros = Int((max(0, s) * 1_000_000).rounded())
        let whole = micros / 1_000_000
        var divisor = 1
        while divisor <= whole / 10 { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(0x30 + whole / divisor % 10))
            divisor /= 10
        }
        bytes.append(0x2E)
        // Six digits, leading zeros kept, without an array per logged request.
        let frac = micros % 1_000_000
        divisor = 100_000
        while divisor > 0 {
            bytes.append(UInt8(0x30 + frac / divisor % 10))
            divisor /= 10
        }
    }

    /// nginx's escaping: quotes, backslashes, controls and non-ASCII as \xHH.
    private func escaped(_ raw: UnsafeRawBufferPointer) {
        for b in raw {
            if b < 0x20 || b >= 0x7F || b == 0x22 || b == 0x5C { hexEscape(b, prefix: "\\x") } else { bytes.append(b) }
        }
    }

    private func jsonEscaped(_ raw: UnsafeRawBufferPointer) {
        for b in raw {
            if b < 0x20 || b >= 0x7F || b == 0x22 || b == 0x5C { hexEscape(b, prefix: "\\u00") } else { bytes.append(b) }
        }
    }

    private func hexEscape(_ b: UInt8, prefix: StaticString) {
        let hex: StaticString = "0123456789abcdef"
        append(prefix)
        hex.withUTF8Buffer { h in
            bytes.append(h[Int(b >> 4)])
            bytes.append(h[Int(b & 0xF)])
        }
    }

    private func formatDate(_ t: Int64) {
        dateSecond = t
        switch log.format {
        case .json:
            date = Array(RFC3339.format(t).utf8)
        case .combined:
            // 23/Nov/2026:01:02:03 +0000
            let days = Int(HTTPDate.floorDivide(t, 86_400))
            let secs = Int(t - Int64(days) * 86_400)
            let (y, m, d) = RFC3339.civilFromDays(days)
            let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
            date = Array("\(two(d))/\(months[m - 1])/\(y):\(two(secs / 3600)):\(two(secs / 60 % 60)):\(two(secs % 60)) +0000".utf8)
        }
    }
}
