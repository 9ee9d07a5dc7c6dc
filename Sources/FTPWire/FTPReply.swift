/// One complete reply on the FTP control connection (RFC 959 §4.2): its three-digit code and its
/// lines of text, without the code prefix and without the line endings.
public struct FTPReply: Sendable, Equatable {
    /// 100...599; the first digit says how the command went (1 preliminary, 2 done, 3 more needed,
    /// 4 transient failure, 5 permanent failure).
    public var code: Int
    /// Text of each line: the first and last without `ddd-` / `ddd `, intermediate lines as sent
    /// (minus a `ddd-` prefix repeating the reply's code, which many servers write).
    public var lines: [[UInt8]]

    /// A reply as the parser makes it.
    public init(code: Int, lines: [[UInt8]]) {
        self.code = code
        self.lines = lines
    }

    /// A one-line reply, as tests and callers write them.
    public init(_ code: Int, _ text: String) {
        self.init(code: code, lines: [Array(text.utf8)])
    }

    /// 1yz: the command was accepted and another reply will follow.
    public var isPreliminary: Bool { code / 100 == 1 }

    /// The reply as a human reads it, for an HTTP error body: `code text` lines joined with LF,
    /// control bytes other than tab removed (so nothing the server sends can pass for framing or
    /// terminal escapes), at most `maxBytes` bytes.
    public func text(maxBytes: Int = 4_096) -> [UInt8] {
        var out: [UInt8] = []
        appendDecimal(code, to: &out)
        for (index, line) in lines.enumerated() {
            if index > 0 { out.append(ftpLF) }
            if index == 0 { out.append(ftpSP) }
            for b in line where !isControlByte(b) || b == ftpHTAB { out.append(b) }
            if out.count >= maxBytes { break }
        }
        return Array(out.prefix(maxBytes))
    }
}
