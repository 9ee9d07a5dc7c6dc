/// Upstream URL prefixes and what replaces them, e.g. `https://files.pythonhosted.org/` →
/// `http://larder.internal:3128/pypi/files/`: how a mirror points a registry's links back at itself.
///
/// A URL is rewritten when it starts with an upstream prefix; the longest matching prefix wins, so
/// `https://pypi.org/` and a more specific `https://pypi.org/simple/` can both be listed. Scheme
/// and host compare case-insensitively (RFC 3986 §6.2.2.1), the rest byte for byte. Relative URLs
/// never match: a client resolves them against the mirror's own URL, which already is right.
public struct URLPrefixMap: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public let upstream: String
        public let replacement: String
        let upstreamBytes: [UInt8]
        let replacementBytes: [UInt8]
        /// How many of the upstream prefix's bytes are scheme and authority (compared ignoring case).
        let authorityLength: Int

        public init(upstream: String, replacement: String) {
            self.upstream = upstream
            self.replacement = replacement
            upstreamBytes = Array(upstream.utf8)
            replacementBytes = Array(replacement.utf8)
            authorityLength = URLPrefixMap.authorityEnd(of: upstreamBytes)
        }
    }

    /// Longest upstream prefix first, so the first match is the longest.
    public let entries: [Entry]

    public init(_ entries: [Entry]) {
        self.entries = entries.sorted { $0.upstreamBytes.count > $1.upstreamBytes.count }
    }

    public init(_ pairs: KeyValuePairs<String, String>) {
        self.init(pairs.map { Entry(upstream: $0.key, replacement: $0.value) })
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// `url` with its prefix replaced, or nil when no upstream prefix matches.
    public func rewrite(_ url: String) -> String? {
        rewrite(bytes: Array(url.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// As `rewrite(_:)`, on bytes: the replacement followed by the rest of `url`, unchanged.
    public func rewrite<Bytes: Collection<UInt8>>(bytes url: Bytes) -> [UInt8]? {
        guard let (entry, length) = match(url) else { return nil }
        return entry.replacementBytes + url.dropFirst(length)
    }

    /// The entry whose upstream prefix starts `url`, and that prefix's length in bytes.
    func match<Bytes: Collection<UInt8>>(_ url: Bytes) -> (Entry, Int)? {
        for entry in entries where Self.hasPrefix(url, entry) {
            return (entry, entry.upstreamBytes.count)
        }
        return nil
    }

    /// Whether `url` starts with the entry's upstream prefix, ASCII case-insensitively up to the
    /// end of the authority (the first `/` after `://`) and exactly after it.
    private static func hasPrefix<Bytes: Collection<UInt8>>(_ url: Bytes, _ entry: Entry) -> Bool {
        var position = 0
        var urlIndex = url.startIndex
        for expected in entry.upstreamBytes {
            guard urlIndex != url.endIndex else { return false }
            let actual = url[urlIndex]
            if position < entry.authorityLength {
                guard asciiLowercased(actual) == asciiLowercased(expected) else { return false }
            } else {
                guard actual == expected else { return false }
            }
            position += 1
            urlIndex = url.index(after: urlIndex)
        }
        return true
    }

    /// The byte offset in `url` of the path's first `/` after `scheme://host`, or the length.
    fileprivate static func authorityEnd(of bytes: [UInt8]) -> Int {
        var start = 0
        if let schemeEnd = firstOffset(of: Array("://".utf8), in: bytes) { start = schemeEnd + 3 }
        return bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.count
    }

    private static func firstOffset(of needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        for start in 0...(bytes.count - needle.count) where bytes[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }
}

@inline(__always)
func asciiLowercased(_ byte: UInt8) -> UInt8 {
    byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
}
