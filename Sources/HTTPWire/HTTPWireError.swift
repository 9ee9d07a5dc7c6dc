/// Why a message was rejected. Every case maps to one status code a proxy answers with
/// (requests) or treats as a bad gateway (responses).
public enum HTTPWireError: Error, Equatable, Sendable {
    /// The head did not end within `HeadLimits.maxHeadBytes`.
    case headTooLarge
    /// More header fields than `HeadLimits.maxHeaderCount`.
    case tooManyHeaderFields
    /// The request line is longer than `HeadLimits.maxRequestLineBytes` (URI too long).
    case requestLineTooLong
    /// The request line is not `method SP target SP HTTP-version`.
    case malformedRequestLine
    /// The method is empty or has a character outside `tchar`.
    case invalidMethod
    /// The request target has a byte that is not allowed (controls, space, non-ASCII).
    case invalidTarget
    /// Not HTTP/1.0 or HTTP/1.1.
    case unsupportedVersion
    /// The status line is not `HTTP-version SP 3DIGIT SP reason`.
    case malformedStatusLine
    /// A field name is empty or has a character outside `tchar`.
    case invalidFieldName
    /// Whitespace between a field name and its colon (RFC 9112 §5.1).
    case whitespaceBeforeColon
    /// A field line starting with whitespace: obsolete line folding (RFC 9112 §5.2).
    case obsoleteLineFolding
    /// A CR not followed by LF.
    case bareCarriageReturn
    /// A NUL byte anywhere in the head.
    case nulByte
    /// A field value with a forbidden control character.
    case invalidFieldValue
    /// A line ended with a bare LF where CRLF is required (requests).
    case bareLineFeed
    /// A request without a Host field, with more than one, or with a value that is not
    /// `uri-host [ ":" port ]` (RFC 9112 §3.2).
    case invalidHost
    /// `Content-Length` that is not a decimal number, or too large.
    case invalidContentLength
    /// Several `Content-Length` values that differ (or repeated fields, which we refuse).
    case conflictingContentLength
    /// Both `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.3: smuggling risk).
    case contentLengthWithTransferEncoding
    /// A request `Transfer-Encoding` whose final coding is not `chunked`, or a coding we do not know.
    case unsupportedTransferEncoding
    /// A chunk-size line that is not hex digits, or one that overflows.
    case invalidChunkSize
    /// A chunk extension that does not follow the grammar.
    case invalidChunkExtension
    /// A chunk-size line or trailer line longer than the decoder's limit.
    case chunkLineTooLong
    /// Chunk data not followed by CRLF.
    case invalidChunkTerminator
    /// A malformed trailer section, or one over the limit.
    case invalidTrailer

    /// The status a proxy answers a client with when that client's request fails this way.
    public var requestStatus: Int {
        switch self {
        case .headTooLarge, .tooManyHeaderFields: return 431
        case .requestLineTooLong: return 414
        case .unsupportedVersion: return 505
        case .unsupportedTransferEncoding: return 501
        default: return 400
        }
    }

    /// A short, human-readable cause for error bodies and log lines.
    public var reason: String {
        switch self {
        case .headTooLarge: return "request head too large"
        case .tooManyHeaderFields: return "too many header fields"
        case .requestLineTooLong: return "request line too long"
        case .malformedRequestLine: return "malformed request line"
        case .invalidMethod: return "invalid method"
        case .invalidTarget: return "invalid request target"
        case .unsupportedVersion: return "unsupported HTTP version"
        case .malformedStatusLine: return "malformed status line"
        case .invalidFieldName: return "invalid header field name"
        case .whitespaceBeforeColon: return "whitespace before colon in header field"
        case .obsoleteLineFolding: return "obsolete line folding"
        case .bareCarriageReturn: return "bare CR in head"
        case .nulByte: return "NUL byte in head"
        case .invalidFieldValue: return "invalid header field value"
        case .bareLineFeed: return "line ended by bare LF"
        case .invalidHost: return "missing, repeated or invalid Host"
        case .invalidContentLength: return "invalid Content-Length"
        case .conflictingContentLength: return "conflicting Content-Length"
        case .contentLengthWithTransferEncoding: return "Content-Length together with Transfer-Encoding"
        case .unsupportedTransferEncoding: return "unsupported Transfer-Encoding"
        case .invalidChunkSize: return "invalid chunk size"
        case .invalidChunkExtension: return "invalid chunk extension"
        case .chunkLineTooLong: return "chunk line too long"
        case .invalidChunkTerminator: return "chunk data not followed by CRLF"
        case .invalidTrailer: return "invalid trailer section"
        }
    }
}
