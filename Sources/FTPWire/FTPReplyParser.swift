/// Incremental reader of control-connection replies (RFC 959 §4.2): feed bytes as they arrive,
/// split anywhere, and get each reply once its last line is complete.
///
/// A multi-line reply starts with `ddd-` and ends with the first line starting `ddd ` (or `ddd`
/// alone) with the same code; lines in between may start with anything. Lines end with CRLF or a
/// bare LF. Empty lines between replies are skipped. Every limit is checked as each byte arrives,
/// so a hostile server cannot make the parser hold more than `maxReplyBytes`, and the error does
/// not depend on how the bytes were split. After a throw the parser must not be used again.
public struct FTPReplyParser: Sendable {
    /// Longest line accepted, without its line ending.
    public let maxLineBytes: Int
    /// Most lines one reply may have.
    public let maxLines: Int
    /// Most bytes one reply may have, line endings included.
    public let maxReplyBytes: Int

    /// The line being read, without its LF.
    private var line: [UInt8] = []
    /// A multi-line reply whose last line has not arrived.
    private var open: FTPReply?
    /// Bytes of the completed lines of the reply being read.
    private var replyBytes = 0

    /// A parser for one control connection; the defaults are far above what real servers send.
    public init(maxLineBytes: Int = 8_192, maxLines: Int = 256, maxReplyBytes: Int = 65_536) {
        self.maxLineBytes = maxLineBytes
        self.maxLines = maxLines
        self.maxReplyBytes = maxReplyBytes
    }

    /// Whether bytes of an unfinished reply are held (a caller seeing the connection close now knows
    /// the server stopped mid-reply).
    public var isInsideReply: Bool { open != nil || !line.isEmpty }

    /// Reads `bytes` and returns the replies they complete, in order (often none, sometimes several).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(FTPWireError) -> [FTPReply] {
        var replies: [FTPReply] = []
        for b in bytes {
            if b == ftpLF {
                replyBytes += line.count + 1
                if replyBytes > maxReplyBytes { throw .replyTooLarge }
                if let reply = try endLine() { replies.append(reply) }
                continue
            }
            line.append(b)
            // A line may reach maxLineBytes + 1 only if that last byte is the CR of its CRLF.
            if line.count > maxLineBytes + 1 || (line.count == maxLineBytes + 1 && b != ftpCR) {
                throw .replyLineTooLong
            }
            if replyBytes + line.count > maxReplyBytes { throw .replyTooLarge }
        }
        return replies
    }

    /// As `feed(_:)` for bytes in an array.
    public mutating func feed(_ bytes: [UInt8]) throws(FTPWireError) -> [FTPReply] {
        let result = bytes.withUnsafeBytes { buffer -> Result<[FTPReply], FTPWireError> in
            do throws(FTPWireError) {
                return .success(try feed(buffer))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Handles the complete line in `line`; returns the reply it finishes, if any.
    private mutating func endLine() throws(FTPWireError) -> FTPReply? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.last == ftpCR { line.removeLast() }
        guard var reply = open else {
            if line.isEmpty {
                replyBytes = 0
                return nil
            }
            guard let code = Self.code(line) else { throw .malformedReply }
            let text = line.count > 4 ? Array(line[4...]) : []
            if line.count == 3 || line[3] == ftpSP {
                replyBytes = 0
                return FTPReply(code: code, lines: [text])
            }
            guard maxLines > 1 else { throw .tooManyReplyLines }  // `ddd-`: the first of several lines
            open = FTPReply(code: code, lines: [text])
            return nil
        }
        guard reply.lines.count < maxLines else { throw .tooManyReplyLines }
        let sameCode = Self.code(line) == reply.code
        if sameCode, line.count == 3 || line[3] == ftpSP {
            reply.lines.append(line.count > 4 ? Array(line[4...]) : [])
            open = nil
            replyBytes = 0
            return reply
        }
        reply.lines.append(sameCode && line[3] == 0x2D ? Array(line[4...]) : line)
        open = reply
        return nil
    }

    /// The code a line starts with: three digits, the first 1–5, followed by the end of the line,
    /// a space or `-`.
    private static func code(_ line: [UInt8]) -> Int? {
        guard line.count >= 3, line[0] &- 0x31 < 5, isDecimal(line[1]), isDecimal(line[2]) else { return nil }
        if line.count > 3, line[3] != ftpSP, line[3] != 0x2D { return nil }
        return Int(line[0] &- 0x30) * 100 + Int(line[1] &- 0x30) * 10 + Int(line[2] &- 0x30)
    }
}
