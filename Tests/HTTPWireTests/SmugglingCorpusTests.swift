import Testing
import HTTPWire

/// Request-smuggling corpus: framing ambiguities a front-end and a back-end could read differently
/// (RFC 9112 §11.2). Each row either is rejected with the named error or parses to one framing only.
enum SmugglingCorpus {
    static let start = "POST /upload HTTP/1.1\r\nHost: example.com\r\n"

    static func row(_ name: String, _ fields: String, _ error: HTTPWireError) -> RequestRow {
        reject(name, start + fields + "\r\n", error)
    }

    static func row(_ name: String, _ fields: String, framing: BodyFraming) -> RequestRow {
        accept(name, start + fields + "\r\n", method: .post, target: "/upload", framing: framing)
    }

    static let rows: [RequestRow] = [
        // CL.TE and TE.CL: both framing fields.
        row("§6.1 CL.TE: Content-Length then Transfer-Encoding",
            "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", .contentLengthWithTransferEncoding),
        row("§6.1 TE.CL: Transfer-Encoding then Content-Length",
            "Transfer-Encoding: chunked\r\nContent-Length: 6\r\n", .contentLengthWithTransferEncoding),
        row("§6.1 CL: 0 with TE", "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", .contentLengthWithTransferEncoding),
        row("§6.1 CL with an unknown TE", "Content-Length: 6\r\nTransfer-Encoding: gzip\r\n", .contentLengthWithTransferEncoding),
        row("§6.1 CL with an empty TE", "Content-Length: 6\r\nTransfer-Encoding:\r\n", .contentLengthWithTransferEncoding),
        row("§6.1 lowercase names CL.TE", "content-length: 6\r\ntransfer-encoding: chunked\r\n",
            .contentLengthWithTransferEncoding),

        // TE.TE obfuscations.
        row("§6.1 TE.TE: xchunked", "Transfer-Encoding: xchunked\r\n", .unsupportedTransferEncoding),
        row("§6.1 TE.TE: chunkedx", "Transfer-Encoding: chunkedx\r\n", .unsupportedTransferEncoding),
        row("§6.1 TE.TE: chunk", "Transfer-Encoding: chunk\r\n", .unsupportedTransferEncoding),
        row("§6.1 TE.TE: quoted \"chunked\"", "Transfer-Encoding: \"chunked\"\r\n", .unsupportedTransferEncoding),
        row("§6.1 TE.TE: chunked then x in a second field", "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n",
            .unsupportedTransferEncoding),
        row("§6.1 TE.TE: x then chunked in a second field", "Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n",
            .unsupportedTransferEncoding),
        row("§6.1 TE.TE: chunked, identity", "Transfer-Encoding: chunked, identity\r\n", .unsupportedTransferEncoding),
        row("§6.1 TE.TE: identity, chunked", "Transfer-Encoding: identity, chunked\r\n", .unsupportedTransferEncoding),
        row("§6.1 TE.TE: chunked, chunked", "Transfer-Encoding: chunked, chunked\r\n", .unsupportedTransferEncoding),
        row("§6.1 TE.TE: gzip , chunked (OWS around comma)", "Transfer-Encoding: gzip , chunked\r\n",
            .unsupportedTransferEncoding),
        row("§6.1 TE.TE: chunked with no-break space (obs-text)", "Transfer-Encoding: chunked\u{A0}\r\n",
            .unsupportedTransferEncoding),
        row("§6.1 TE.TE: space inside the coding", "Transfer-Encoding: chun ked\r\n", .unsupportedTransferEncoding),
        row("§5.1 TE.TE: Transfer-Encoding : chunked", "Transfer-Encoding : chunked\r\n", .whitespaceBeforeColon),
        row("§5.1 TE.TE: Transfer-Encoding<HTAB>: chunked", "Transfer-Encoding\t: chunked\r\n", .whitespaceBeforeColon),
        row("§5.2 TE.TE: obs-fold value", "Transfer-Encoding:\r\n chunked\r\n", .obsoleteLineFolding),
        row("§5.2 TE.TE: obs-fold after a coding", "Transfer-Encoding: identity\r\n chunked\r\n", .obsoleteLineFolding),
        row("§5.2 TE.TE: field line starting with a space", "X: y\r\n Transfer-Encoding: chunked\r\n",
            .obsoleteLineFolding),
        row("§5.5 TE.TE: vertical tab before chunked", "Transfer-Encoding: \u{0B}chunked\r\n", .invalidFieldValue),
        row("§5.5 TE.TE: form feed after chunked", "Transfer-Encoding: chunked\u{0C}\r\n", .invalidFieldValue),
        row("§2.2 TE.TE: NUL in the field name", "Transfer\0-Encoding: chunked\r\n", .nulByte),
        row("§2.2 TE.TE: NUL in the value", "Transfer-Encoding: chunked\0\r\n", .nulByte),
        row("§2.2 TE.TE: bare CR inside the value", "Transfer-Encoding: chunked\rx\r\n", .bareCarriageReturn),
        row("§2.2 TE.TE: line ended by bare LF", "Transfer-Encoding: chunked\n", .bareLineFeed),
        row("§5.1 TE.TE: non-ASCII letter in the name", "Transfer-Encodıng: chunked\r\n", .invalidFieldName),
        row("§6.1 TE valid: Transfer-Encoding:<HTAB>chunked", "Transfer-Encoding:\tchunked\r\n", framing: .chunked),
        row("§6.1 TE valid: no space after colon", "Transfer-Encoding:chunked\r\n", framing: .chunked),
        row("§6.1 TE valid: mixed case", "TRANSFER-ENCODING: ChUnKeD\r\n", framing: .chunked),
        row("§5.1 TE valid: Transfer_Encoding is another field", "Transfer_Encoding: chunked\r\n", framing: .none),

        // Content-Length obfuscations.
        row("§6.3 CL.CL: duplicate list 5, 5", "Content-Length: 5, 5\r\n", .conflictingContentLength),
        row("§6.3 CL.CL: two fields", "Content-Length: 5\r\nContent-Length: 50\r\n", .conflictingContentLength),
        row("§6.3 CL.CL: 0 then 5", "Content-Length: 0\r\nContent-Length: 5\r\n", .conflictingContentLength),
        row("§6.3 CL: leading +", "Content-Length: +5\r\n", .invalidContentLength),
        row("§6.3 CL: leading -", "Content-Length: -5\r\n", .invalidContentLength),
        row("§6.3 CL: space inside", "Content-Length: 5 5\r\n", .invalidContentLength),
        row("§6.3 CL: HTAB inside", "Content-Length: 1\t0\r\n", .invalidContentLength),
        row("§6.3 CL: hex 0x5", "Content-Length: 0x5\r\n", .invalidContentLength),
        row("§6.3 CL: trailing letter", "Content-Length: 5a\r\n", .invalidContentLength),
        row("§6.3 CL: quoted", "Content-Length: \"5\"\r\n", .invalidContentLength),
        row("§6.3 CL: semicolon", "Content-Length: 5;\r\n", .invalidContentLength),
        row("§6.3 CL: full-width digit", "Content-Length: ５\r\n", .invalidContentLength),
        row("§6.3 CL: 2^63 overflow", "Content-Length: 9223372036854775808\r\n", .invalidContentLength),
        row("§6.3 CL: 2^64 + 5 wraps to 5 if unchecked", "Content-Length: 18446744073709551621\r\n",
            .invalidContentLength),
        row("§5.1 CL: Content-Length : 5", "Content-Length : 5\r\n", .whitespaceBeforeColon),
        row("§5.2 CL: obs-fold value", "Content-Length:\r\n 5\r\n", .obsoleteLineFolding),
        row("§2.2 CL: NUL in the name", "Content\0-Length: 5\r\n", .nulByte),
        row("§2.2 CL: NUL after the digits", "Content-Length: 5\0\r\n", .nulByte),
        row("§6.3 CL valid: OWS around the value", "Content-Length: \t 5 \t\r\n", framing: .contentLength(5)),
        row("§6.3 CL valid: Content_Length is another field", "Content_Length: 5\r\n", framing: .none),

        // Host ambiguity.
        row("§3.2 Host twice", "Host: evil.example\r\n", .invalidHost),
    ]
}

@Suite("Request smuggling corpus")
struct SmugglingCorpusTests {
    @Test("smuggling row", arguments: SmugglingCorpus.rows)
    func smuggling(_ row: RequestRow) { checkRequestRow(row) }

    @Test("every prefix", arguments: SmugglingCorpus.rows)
    func prefixes(_ row: RequestRow) { checkRequestPrefixes(row) }
}
