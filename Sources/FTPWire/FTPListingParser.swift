/// Reads a directory listing as the data connection delivers it, split anywhere, into entries.
///
/// Lines end with CRLF or LF; a line that is not an entry is skipped. The listing is bounded: at
/// `maxEntries` entries, a line longer than `maxLineBytes`, or more than `maxBytes` in all, the
/// parser keeps what it has, says `isTruncated` and ignores everything after, so an endless or
/// huge listing costs bounded memory and the gateway can answer with what it has.
public struct FTPListingParser: Sendable {
    /// Which command produced the listing.
    public enum Format: Sendable, Equatable {
        /// MLSD's machine-readable lines.
        case mlsd
        /// LIST's `ls -l` or DOS lines.
        case list
    }

    public let format: Format
    /// Most entries kept.
    public let maxEntries: Int
    /// Longest line read, without its line ending.
    public let maxLineBytes: Int
    /// Most listing bytes read in all.
    public let maxBytes: Int
    /// The caller's clock, only to give a year to LIST dates written with a time of day.
    public let now: Int64?

    /// Entries read so far, in listing order.
    public private(set) var entries: [FTPListingEntry] = []
    /// A bound was reached: entries after these were not read.
    public private(set) var isTruncated = false

    private var line: [UInt8] = []
    private var bytesSeen = 0

    /// A parser for one listing in `format`; the defaults fit the largest real directories.
    public init(format: Format, maxEntries: Int = 10_000, maxLineBytes: Int = 4_096, maxBytes: Int = 4 << 20,
                now: Int64? = nil) {
        self.format = format
        self.maxEntries = maxEntries
        self.maxLineBytes = maxLineBytes
        self.maxBytes = maxBytes
        self.now = now
    }

    /// Reads the next bytes of the listing.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard !isTruncated else { return }
        let accepted = min(bytes.count, maxBytes - bytesSeen)
        bytesSeen += accepted
        var start = 0
        while start < accepted {
            let end = (start..<accepted).first { bytes[$0] == ftpLF } ?? accepted
            line.append(contentsOf: bytes[start..<end])
            if line.count > maxLineBytes + 1 || (line.count == maxLineBytes + 1 && line.last != ftpCR) {
                truncate()
                return
            }
            if end < accepted { endLine() }
            if isTruncated { return }
            start = end + 1
        }
        if accepted < bytes.count { truncate() }
    }

    /// As `feed(_:)` for bytes in an array.
    public mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// The listing ended: reads a last line that had no line ending.
    public mutating func finish() {
        guard !isTruncated, !line.isEmpty else { return }
        endLine()
    }

    private mutating func endLine() {
        defer { line.removeAll(keepingCapacity: true) }
        var content = line[...]
        if content.last == ftpCR { content = content.dropLast() }
        let entry = format == .mlsd ? MLSDLine.parse(content) : LISTLine.parse(content, now: now)
        guard let entry else { return }
        guard entries.count < maxEntries else {
            truncate()
            return
        }
        entries.append(entry)
    }

    private mutating func truncate() {
        isTruncated = true
        line = []
    }
}

/// Limits on a directory listing (see `FTPListingParser`).
public struct FTPListingLimits: Sendable, Equatable {
    public var maxEntries: Int
    public var maxLineBytes: Int
    public var maxBytes: Int

    /// The parser's defaults.
    public init(maxEntries: Int = 10_000, maxLineBytes: Int = 4_096, maxBytes: Int = 4 << 20) {
        self.maxEntries = maxEntries
        self.maxLineBytes = maxLineBytes
        self.maxBytes = maxBytes
    }
}
