/// Why the FTP control connection's bytes were refused. Every case ends the session: the gateway
/// answers 502 and closes the connection, since the server is broken or hostile.
public enum FTPWireError: Error, Equatable, Sendable {
    /// A reply line longer than the parser's `maxLineBytes`.
    case replyLineTooLong
    /// A multi-line reply with more lines than the parser's `maxLines`.
    case tooManyReplyLines
    /// A reply with more bytes than the parser's `maxReplyBytes`.
    case replyTooLarge
    /// A line that should start a reply does not start with a code 100–599 followed by space,
    /// `-` or the end of the line.
    case malformedReply
}
