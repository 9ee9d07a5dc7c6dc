import HTTPWire

/// The name a cache gives itself in `Cache-Status` (RFC 9211 §2), serialized once per
/// configuration: an sf-token when the name is one, else an sf-string (bytes an sf-string cannot
/// hold, controls and non-ASCII, dropped), so responses append it without looking at it again.
public struct CacheName: Sendable, Equatable {
    public let serialized: [UInt8]

    public init(_ name: String) {
        var out: [UInt8] = []
        CacheStatus.appendTokenOrString(name, to: &out)
        serialized = out
    }
}

/// The RFC 9211 `Cache-Status` value Larder adds to every response it forwards or serves.
public struct CacheStatus: Sendable, Equatable {
    public enum Forward: String, Sendable, Equatable {
        case bypass, method, uriMiss = "uri-miss", varyMiss = "vary-miss", miss, request, stale, partial

        /// The `fwd` value for a lookup that decided to fetch.
        /// The raw value, without going through `String`.
        var token: StaticString {
            switch self {
            case .bypass: return "bypass"
            case .method: return "method"
            case .uriMiss: return "uri-miss"
            case .varyMiss: return "vary-miss"
            case .miss: return "miss"
            case .request: return "request"
            case .stale: return "stale"
            case .partial: return "partial"
            }
        }

        public init(_ reason: FetchReason) {
            switch reason {
            case .uriMiss: self = .uriMiss
            case .varyMiss: self = .varyMiss
            case .miss: self = .miss
            case .request: self = .request
            case .bypass: self = .bypass
            }
        }
    }

    public var hit = false
    public var forward: Forward?
    /// Status of the origin's response when forwarded (fwd-status).
    public var forwardStatus: Int?
    public var stored = false
    public var collapsed = false
    /// Remaining freshness in seconds (negative when stale).
    public var ttl: Int64?
    /// Free-form token for why (e.g. `no-store`, `revalidated-head`, `stale-if-error`).
    public var detail: Detail?

    /// A `detail` value: a literal in the source, so a status is plain bytes to copy (no reference
    /// counting for every response that carries one) and writing it needs no `String`.
    public struct Detail: Sendable, Equatable, ExpressibleByStringLiteral, CustomStringConvertible {
        public let text: StaticString

        public init(stringLiteral text: StaticString) { self.text = text }

        public var description: String { text.description }

        public static func == (a: Detail, b: Detail) -> Bool {
            a.text.withUTF8Buffer { x in b.text.withUTF8Buffer { y in x.elementsEqual(y) } }
        }
    }

    public init(hit: Bool = false, forward: Forward? = nil, forwardStatus: Int? = nil, stored: Bool = false,
                collapsed: Bool = false, ttl: Int64? = nil, detail: Detail? = nil) {
        self.hit = hit; self.forward = forward; self.forwardStatus = forwardStatus; self.stored = stored
        self.collapsed = collapsed; self.ttl = ttl; self.detail = detail
    }

    /// `edge; hit; ttl=42` or `edge; fwd=stale; fwd-status=304; stored; detail=revalidated-head`,
    /// for a cache named `edge`. `detail` is written as a token when it is one, otherwise as a
    /// quoted string.
    ///
    /// Parameters in the order hit / fwd, fwd-status, stored, collapsed, ttl, detail (RFC 9211 §2).
    public func serialized(cacheName: CacheName) -> [UInt8] {
        var w = MessageWriter(capacity: 64)
        write(cacheName: cacheName, into: &w)
        return w.bytes
    }

    /// `serialized(cacheName:)` written straight into a head.
    public func write(cacheName: CacheName, into w: inout MessageWriter) {
        w.append(cacheName.serialized)
        if hit { w.append("; hit") }
        if let forward {
            w.append("; fwd=")
            w.append(forward.token)
        }
        if let forwardStatus {
            w.append("; fwd-status=")
            w.appendDecimal(forwardStatus)
        }
        if stored { w.append("; stored") }
        if collapsed { w.append("; collapsed") }
        if let ttl {
            w.append("; ttl=")
            w.appendDecimal(Int(ttl))
        }
        if let detail {
            w.append("; detail=")
            detail.text.withUTF8Buffer { text in
                let bytes = UnsafeRawBufferPointer(text)
                if Self.isToken(bytes) {
                    w.append(bytes)
                } else {
                    var quoted: [UInt8] = []
                    Self.appendQuoted(bytes, to: &quoted)
                    w.append(quoted)
                }
            }
        }
    }

    /// RFC 8941 sf-token when `text` is one (`(ALPHA / "*") *(tchar / ":" / "/")`), else sf-string.
    static func appendTokenOrString(_ text: String, to out: inout [UInt8]) {
        if isToken(text) {
            out.append(contentsOf: text.utf8)
            return
        }
        var text = text
        text.withUTF8 { appendQuoted(UnsafeRawBufferPointer($0), to: &out) }
    }

    /// RFC 8941 sf-string: controls and non-ASCII dropped, quote and backslash escaped.
    private static func appendQuoted(_ text: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(asciiQuote)
        for b in text where b >= 0x20 && b < 0x7F {
            if b == asciiQuote || b == asciiBackslash { out.append(asciiBackslash) }
            out.append(b)
        }
        out.append(asciiQuote)
    }

    private static func isToken(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { isToken(UnsafeRawBufferPointer($0)) }
    }

    /// Over the bytes rather than the String's view: the detail is checked on every response.
    private static func isToken(_ text: UnsafeRawBufferPointer) -> Bool {
        var first = true
        for b in text {
            if first {
                guard isAlpha(b) || b == 0x2A else { return false }
                first = false
            } else if !(isTchar(b) || b == asciiColon || b == byteSlash) {
                return false
            }
        }
        return !first
    }
}
