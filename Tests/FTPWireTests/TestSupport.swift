import FTPWire

/// Test inputs are written as Swift string literals with explicit "\r\n"; this is the byte form.
func wire(_ text: String) -> [UInt8] { Array(text.utf8) }

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// A URL the test knows is valid.
func url(_ text: String) -> FTPURL {
    guard let parsed = FTPURL(text) else { fatalError("test URL does not parse: \(text)") }
    return parsed
}

/// Credentials the test knows are valid.
func credentials(_ user: String, _ password: String) -> FTPCredentials {
    guard let made = FTPCredentials(user: wire(user), password: wire(password)) else { fatalError("bad test credentials") }
    return made
}

/// Every byte an argument must never carry: C0 controls and DEL.
let controlBytes: [UInt8] = Array(0x00...0x1F) + [0x7F]

/// What a caller of `FTPReplyParser` ends up with.
enum ReplyOutcome: Equatable, CustomStringConvertible {
    case replies([FTPReply])
    case failed(FTPWireError)

    var description: String {
        switch self {
        case .replies(let replies):
            return "replies(" + replies.map { "\($0.code) \($0.lines.map(text))" }.joined(separator: ", ") + ")"
        case .failed(let error): return "failed(\(error))"
        }
    }
}

/// Feeds `input` in pieces of the given lengths to a fresh parser.
func parseReplies(_ input: [UInt8], segments: [Int], maxLineBytes: Int = 8_192, maxLines: Int = 256,
                  maxReplyBytes: Int = 65_536) -> ReplyOutcome {
    var parser = FTPReplyParser(maxLineBytes: maxLineBytes, maxLines: maxLines, maxReplyBytes: maxReplyBytes)
    var replies: [FTPReply] = []
    var position = 0
    do throws(FTPWireError) {
        for length in segments {
            let end = min(input.count, position + length)
            replies += try parser.feed(Array(input[position..<end]))
            position = end
        }
    } catch {
        return .failed(error)
    }
    return .replies(replies)
}

/// The one reply a line (without its CRLF) makes, or nil.
func parseOne(_ line: String) -> FTPReply? {
    var parser = FTPReplyParser()
    return (try? parser.feed(wire(line + "\r\n")))?.first
}
