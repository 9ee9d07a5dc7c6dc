import CachePolicy
import HTTPWire
import Testing

/// Pieces of representations (`PartialContent`): which 206s are pieces, what a request takes from
/// one, how a completion is asked for and judged, and the head of the whole they make.
@Suite struct PartialContentTests {
    struct PieceRow: CustomTestStringConvertible, Sendable {
        var name: String
        var fields: [String]
        var status = 206
        var piece: StoredPiece?
        var testDescription: String { name }
    }

    static func piece(_ first: Int, _ last: Int, _ complete: Int) -> StoredPiece {
        StoredPiece(first: first, last: last, completeLength: complete)
    }

    static let pieceRows: [PieceRow] = [
        PieceRow(name: "first-last/complete", fields: ["Content-Range: bytes 0-4/10"], piece: piece(0, 4, 10)),
        PieceRow(name: "the unit in another case", fields: ["Content-Range: BYTES 5-9/10"], piece: piece(5, 9, 10)),
        PieceRow(name: "one byte", fields: ["Content-Range: bytes 9-9/10"], piece: piece(9, 9, 10)),
        PieceRow(name: "the whole", fields: ["Content-Range: bytes 0-9/10"], piece: piece(0, 9, 10)),
        PieceRow(name: "not a 206", fields: ["Content-Range: bytes 0-4/10"], status: 200),
        PieceRow(name: "no Content-Range (multipart)", fields: ["Content-Type: multipart/byteranges; boundary=x"]),
        PieceRow(name: "unknown complete length", fields: ["Content-Range: bytes 0-4/*"]),
        PieceRow(name: "unsatisfied-range form", fields: ["Content-Range: bytes */10"]),
        PieceRow(name: "last before first", fields: ["Content-Range: bytes 4-0/10"]),
        PieceRow(name: "last past the end", fields: ["Content-Range: bytes 0-10/10"]),
        PieceRow(name: "two fields", fields: ["Content-Range: bytes 0-4/10", "Content-Range: bytes 0-4/10"]),
        PieceRow(name: "spaces inside", fields: ["Content-Range: bytes 0 - 4/10"]),
        PieceRow(name: "another unit", fields: ["Content-Range: items 0-4/10"]),
        PieceRow(name: "a sign", fields: ["Content-Range: bytes +0-4/10"]),
        PieceRow(name: "a length no origin has", fields: ["Content-Range: bytes 0-4/9999999999999999999"]),
        PieceRow(name: "empty parts", fields: ["Content-Range: bytes -4/10"]),
    ]

    @Test(arguments: pieceRows) func pieces(_ row: PieceRow) {
        #expect(PartialContent.piece(of: response(row.fields, status: row.status)) == row.piece)
    }

    struct StorableRow: CustomTestStringConvertible, Sendable {
        var name: String
        var request: [String]
        var method = "GET"
        var response: [String]
        var storable: Bool
        var testDescription: String { name }
    }

    static let storableRows: [StorableRow] = [
        StorableRow(name: "the range asked for", request: ["Range: bytes=0-4"],
                    response: ["Content-Range: bytes 0-4/10", "Content-Length: 5"], storable: true),
        StorableRow(name: "another range than asked (the origin's to choose)", request: ["Range: bytes=-5"],
                    response: ["Content-Range: bytes 0-4/10", "Content-Length: 5"], storable: true),
        StorableRow(name: "a length other than the range's", request: ["Range: bytes=0-4"],
                    response: ["Content-Range: bytes 4-9/10", "Content-Length: 5"], storable: false),
        StorableRow(name: "chunked: the length is not known before", request: ["Range: bytes=0-4"],
                    response: ["Content-Range: bytes 0-4/10", "Transfer-Encoding: chunked"], storable: false),
        StorableRow(name: "no Range sent", request: [],
                    response: ["Content-Range: bytes 0-4/10", "Content-Length: 5"], storable: false),
        StorableRow(name: "several ranges asked", request: ["Range: bytes=0-4,6-7"],
                    response: ["Content-Range: bytes 0-4/10", "Content-Length: 5"], storable: false),
        StorableRow(name: "a HEAD", request: ["Range: bytes=0-4"], method: "HEAD",
                    response: ["Content-Range: bytes 0-4/10", "Content-Length: 5"], storable: false),
    ]

    @Test(arguments: storableRows) func storable(_ row: StorableRow) {
        let answer = response(row.response, status: 206)
        #expect(PartialContent.isStorablePiece(request: request(row.request, method: row.method), response: answer)
                == row.storable)
    }

    struct UseRow: CustomTestStringConvertible, Sendable {
        var name: String
        var piece: StoredPiece
        var fields: [String]
        var method = "GET"
        var use: PieceUse
        var testDescription: String { name }
    }

    static let usesRows: [UseRow] = [
        UseRow(name: "a range inside", piece: piece(4, 8, 10), fields: ["Range: bytes=6-8"], use: .serve(start: 6, end: 8)),
        UseRow(name: "open-ended, clipped inside", piece: piece(5, 9, 10), fields: ["Range: bytes=6-"], use: .serve(start: 6, end: 9)),
        UseRow(name: "a suffix inside", piece: piece(5, 9, 10), fields: ["Range: bytes=-1"], use: .serve(start: 9, end: 9)),
        UseRow(name: "open-ended past the piece", piece: piece(4, 8, 10), fields: ["Range: bytes=6-"], use: .none),
        UseRow(name: "starting before the piece", piece: piece(4, 8, 10), fields: ["Range: bytes=3-5"], use: .none),
        UseRow(name: "past the end of the whole", piece: piece(0, 4, 10), fields: ["Range: bytes=10-"], use: .unsatisfiable),
        UseRow(name: "the whole, from a prefix", piece: piece(0, 4, 10), fields: [], use: .complete(from: 5)),
        UseRow(name: "the whole, from a piece further in", piece: piece(4, 9, 10), fields: [], use: .none),
        UseRow(name: "a malformed range is the whole", piece: piece(0, 4, 10), fields: ["Range: bytes=4-1"], use: .complete(from: 5)),
        UseRow(name: "several ranges", piece: piece(0, 4, 10), fields: ["Range: bytes=0-1,3-4"], use: .none),
        UseRow(name: "If-Range", piece: piece(0, 4, 10), fields: ["Range: bytes=0-1", "If-Range: \"v1\""], use: .none),
        UseRow(name: "a conditional", piece: piece(0, 4, 10), fields: ["If-None-Match: \"v1\""], use: .none),
        UseRow(name: "a precondition", piece: piece(0, 4, 10), fields: ["Range: bytes=0-1", "If-Match: \"v1\""], use: .none),
        UseRow(name: "HEAD", piece: piece(0, 4, 10), fields: ["Range: bytes=0-1"], method: "HEAD", use: .none),
    ]

    @Test(arguments: usesRows) func uses(_ row: UseRow) throws {
        let head = request(row.fields, method: row.method)
        let facts = try RequestFacts.make(head, rulePolicy: nil, settings: PolicySettings())
        #expect(PartialContent.use(of: row.piece, request: head, facts: facts) == row.use)
    }

    @Test func completionFieldsNameTheRestAndTheStrongTagOnly() {
        let prefix = Self.piece(0, 99, 1000)
        #expect(text(PartialContent.completionFields(for: prefix, etag: wire("\"v1\"")))
                == "Range: bytes=100-\r\nIf-Range: \"v1\"\r\n")
        #expect(text(PartialContent.completionFields(for: prefix, etag: wire("W/\"v1\""))) == "Range: bytes=100-\r\n")
        #expect(text(PartialContent.completionFields(for: prefix, etag: nil)) == "Range: bytes=100-\r\n")
    }

    struct CompletionRow: CustomTestStringConvertible, Sendable {
        var name: String
        var storedETag: String?
        var storedFields: [String] = []
        var status = 206
        var fields: [String]
        var answer: CompletionAnswer
        var testDescription: String { name }
    }

    static let completionRows: [CompletionRow] = [
        CompletionRow(name: "the rest, same strong tag", storedETag: "\"v1\"",
                      fields: ["ETag: \"v1\"", "Content-Range: bytes 100-999/1000", "Content-Length: 900"], answer: .combine),
        CompletionRow(name: "another tag", storedETag: "\"v1\"",
                      fields: ["ETag: \"v2\"", "Content-Range: bytes 100-999/1000", "Content-Length: 900"], answer: .refetch),
        CompletionRow(name: "weak tags", storedETag: "W/\"v1\"",
                      fields: ["ETag: W/\"v1\"", "Content-Range: bytes 100-999/1000", "Content-Length: 900"], answer: .refetch),
        CompletionRow(name: "no tags", storedETag: nil,
                      fields: ["Content-Range: bytes 100-999/1000", "Content-Length: 900"], answer: .refetch),
        CompletionRow(name: "another complete length", storedETag: "\"v1\"",
                      fields: ["ETag: \"v1\"", "Content-Range: bytes 100-1999/2000", "Content-Length: 1900"], answer: .refetch),
        CompletionRow(name: "not from where the prefix ends", storedETag: "\"v1\"",
                      fields: ["ETag: \"v1\"", "Content-Range: bytes 50-999/1000", "Content-Length: 950"], answer: .refetch),
        CompletionRow(name: "not to the end", storedETag: "\"v1\"",
                      fields: ["ETag: \"v1\"", "Content-Range: bytes 100-500/1000", "Content-Length: 401"], answer: .refetch),
        CompletionRow(name: "a body length other than the range's", storedETag: "\"v1\"",
                      fields: ["ETag: \"v1\"", "Content-Range: bytes 100-999/1000", "Content-Length: 10"], answer: .refetch),
        CompletionRow(name: "chunked", storedETag: "\"v1\"",
                      fields: ["ETag: \"v1\"", "Content-Range: bytes 100-999/1000", "Transfer-Encoding: chunked"], answer: .refetch),
        CompletionRow(name: "a whole 200 (If-Range failed)", storedETag: "\"v1\"", status: 200,
                      fields: ["ETag: \"v2\"", "Content-Length: 5"], answer: .relay),
        CompletionRow(name: "a 404", storedETag: "\"v1\"", status: 404, fields: ["Content-Length: 0"], answer: .relay),
        CompletionRow(name: "a 503", storedETag: "\"v1\"", status: 503, fields: ["Content-Length: 0"], answer: .relay),
        CompletionRow(name: "a 416: the representation shrank", storedETag: "\"v1\"", status: 416,
                      fields: ["Content-Range: bytes */50", "Content-Length: 0"], answer: .refetch),
        CompletionRow(name: "another 2xx", storedETag: "\"v1\"", status: 204, fields: [], answer: .refetch),
        CompletionRow(name: "a 200 carrying Content-Range: maybe a piece labelled whole", storedETag: "\"v1\"",
                      status: 200, fields: ["Content-Range: bytes 100-999/1000", "Content-Length: 900"], answer: .refetch),
        CompletionRow(name: "the same tag, another coding", storedETag: "\"v1\"",
                      fields: ["ETag: \"v1\"", "Content-Encoding: gzip", "Content-Range: bytes 100-999/1000",
                               "Content-Length: 900"], answer: .refetch),
        CompletionRow(name: "the same tag and coding, spelled otherwise", storedETag: "\"v1\"", storedFields: ["Content-Encoding: gzip"],
                      fields: ["ETag: \"v1\"", "Content-Encoding:  GZIP ", "Content-Range: bytes 100-999/1000",
                               "Content-Length: 900"], answer: .combine),
    ]

    @Test(arguments: completionRows) func completions(_ row: CompletionRow) {
        let answer = response(row.fields, status: row.status)
        let stored = response((row.storedETag.map { ["ETag: \($0)"] } ?? []) + row.storedFields, status: 206)
        #expect(PartialContent.judgeCompletion(of: Self.piece(0, 99, 1000), stored: stored, answer: answer) == row.answer)
    }

    @Test func onlyAPrefixWithAStrongTagIsCompleted() {
        #expect(PartialContent.isCompletable(response(["ETag: \"v1\""], status: 206)))
        #expect(!PartialContent.isCompletable(response(["ETag: W/\"v1\""], status: 206)))
        #expect(!PartialContent.isCompletable(response(["Last-Modified: \(Dates.minus1000)"], status: 206)))
    }

    @Test func theCombinedHeadIsTheStoredOneUpdatedAsAWhole200() throws {
        let stored = response(["Content-Type: text/plain", "ETag: \"v1\"", "Cache-Control: max-age=60", "A: 1",
                               "Content-Range: bytes 0-99/1000", "Content-Length: 100"], status: 206)
        let answer = response(["ETag: \"v1\"", "Cache-Control: max-age=600", "A: 2", "Content-Range: bytes 100-999/1000",
                               "Content-Length: 900"], status: 206)
        let whole = try #require(PartialContent.combinedHead(stored: stored, answer: answer, omitFields: [],
                                                              completeLength: 1000))
        #expect(whole.status == 200)
        #expect(whole.framing == .contentLength(1000))
        #expect(whole.headers.value(of: "content-range") == nil)
        #expect(whole.headers.value(of: "cache-control") == "max-age=600")
        #expect(whole.headers.value(of: "a") == "2")
        #expect(whole.headers.value(of: "content-type") == "text/plain")
        let qualified = try #require(PartialContent.combinedHead(stored: stored, answer: answer, omitFields: [wire("a")],
                                                                  completeLength: 1000))
        #expect(qualified.headers.value(of: "a") == nil)
        let clients = try #require(PartialContent.combinedHead(stored: stored, answer: answer, omitFields: [],
                                                                completeLength: 1000, personal: wire("Set-Cookie: s=1\r\n")))
        #expect(clients.headers.value(of: "set-cookie") == "s=1" && clients.framing == .contentLength(1000))
    }

    @Test func aPieceThatIsTheWholeBecomesA200() throws {
        let head = response(["ETag: \"v1\"", "Content-Range: bytes 0-9/10", "Content-Length: 10"], status: 206)
        let whole = try #require(PartialContent.wholeHead(of: head, completeLength: 10))
        #expect(whole.status == 200 && whole.framing == .contentLength(10))
        #expect(whole.headers.value(of: "content-range") == nil && whole.headers.value(of: "etag") == "\"v1\"")
    }
}
