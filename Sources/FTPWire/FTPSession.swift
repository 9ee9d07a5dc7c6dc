import HTTPWire
/// The gateway's side of one FTP request as a state machine: it is told what happened
/// (`FTPEvent`) and says what to do (`FTPAction`), and does no I/O, so every exchange can be
/// played from a script. Timeouts are the caller's (answered 504).
///
/// A file: [greeting 220, USER, PASS, TYPE I] then SIZE, MDTM, then for GET: EPSV (PASV when EPSV
/// is not implemented), the data connection, REST for a range, RETR, the answer and the body;
/// the session is done when both the final 226/250 and the end of the data connection were seen,
/// in either order. A SIZE or RETR answered 550 is tried as a directory with CWD: a directory is
/// redirected to its URL with a trailing slash (301), anything else is a 404 with the 550's text.
///
/// A directory: CWD (none for the login directory), EPSV or PASV, MLSD (LIST, on a fresh data
/// connection, when MLSD is not implemented), the listing read to its end, then a 200 page.
///
/// Choices:
/// - Ranges: REST refused means the whole file as a 200 (a cache can cut what it needs). A range
///   with an end short of the file's makes the caller stop after that many bytes; the server then
///   sends a 426 or a late 226 at a moment no one can know, so that connection is not reused.
///   A range starting at or past the end is 416 without a data connection; a range when the size
///   is unknown is ignored.
/// - After a successful CWD the connection is not reused: it is no longer in its login
///   directory, where the relative paths of the next request start.
/// - 1yz replies where a final reply is expected are skipped (RFC 959 §4.2: the final one
///   follows); only RETR, MLSD and LIST are answered with 125/150.
/// - 421 at any time, and any reply or event the current step does not expect, answer 502 (when
///   no answer was given yet) and close: the server is broken or hostile, and nothing it sent is
///   trusted further. Expected failures (550, 450…) are answered per `FTPStatusMapping` and leave
///   the connection reusable when it is logged in and idle.
public struct FTPSession: Sendable {
    /// What this session serves.
    public let request: FTPRequest
    /// The control connection's IPv4 peer, to notice PASV replies naming another host.
    public let controlIPv4: UInt32?
    /// Bounds on a directory listing.
    public let listingLimits: FTPListingLimits

    /// A PASV reply named a host other than the control connection's (it was not used): worth a log line.
    public private(set) var passiveNamedOtherHost = false

    private enum Stage: Sendable {
        case notStarted, greeting, user, password, type
        /// SIZE sent (file).
        case size
        /// MDTM sent (file).
        case modificationTime
        /// CWD sent to learn whether a missing file is a directory; the 550 that sent us here.
        case directoryCheck(notFound: FTPReply)
        /// CWD sent for a directory request.
        case changeDirectory
        /// EPSV (`extended`) or PASV sent.
        case passive(extended: Bool)
        /// `openData` given, waiting for `dataConnected`.
        case dataConnecting
        /// REST sent.
        case restart
        /// RETR, MLSD or LIST sent, waiting for 125/150.
        case transferStarting
        /// The transfer runs: waiting for the final reply and the end of the data connection.
        case transferring
        case finished
    }

    /// What the data connection is for.
    private enum Transfer: Sendable, Equatable {
        case file, mlsd, list
    }

    private var stage: Stage = .notStarted
    private var transfer: Transfer
    private var answered = false
    private var changedDirectory = false
    private var extendedPassiveRefused = false
    private var size: Int?
    private var modified: Int64?
    /// The range to serve once SIZE is known (inclusive end), and whether REST accepted it.
    private var plannedRange: (start: Int, end: Int)?
    private var rangeAccepted = false
    private var finalReplySeen = false
    private var dataEnded = false
    private var listing: FTPListingParser?
    /// 1yz replies heard since the last command.
    private var preliminaries = 0
    static let maxPreliminaries = 4

    /// A session for one request, before `connected`.
    public init(request: FTPRequest, controlIPv4: UInt32? = nil, listingLimits: FTPListingLimits = FTPListingLimits()) {
        self.request = request
        self.controlIPv4 = controlIPv4
        self.listingLimits = listingLimits
        self.transfer = request.url.isDirectory ? .mlsd : .file
    }

    /// Whether the session gave its last action (`done` or `close`); later events are ignored.
    public var isFinished: Bool {
        if case .finished = stage { return true }
        return false
    }

    /// The actions `event` calls for.
    public mutating func handle(_ event: FTPEvent) -> [FTPAction] {
        switch (event, stage) {
        case (_, .finished):
            return []
        case (.connected, .notStarted):
            guard pathCommandsAreSafe else {
                let refusal = errorAnswer(.badRequest, text: "The URL cannot be sent to an FTP server.")
                return finish([.answer(refusal)], reusable: request.isReusedConnection)
            }
            if request.isReusedConnection { return startRequest() }
            stage = .greeting
            return []
        case (.reply(let reply), _):
            return handle(reply)
        case (.dataConnected, .dataConnecting):
            return sendTransferCommand()
        case (.dataEnded, .transferStarting):
            dataEnded = true
            return []
        case (.dataEnded, .transferring):
            dataEnded = true
            return completeTransfer()
        case (.listingData(let bytes), .transferStarting), (.listingData(let bytes), .transferring):
            guard transfer != .file, listing != nil else { return abort(nil, "listing data without a listing") }
            listing?.feed(bytes)
            return listing?.isTruncated == true ? answerListing(complete: false) : []
        case (.dataFailed, _):
            return abort(nil, "The data connection to the FTP server failed.")
        default:
            return abort(nil, "The FTP session went out of order.")
        }
    }

    // MARK: - Replies

    private mutating func handle(_ reply: FTPReply) -> [FTPAction] {
        if reply.code == 421 { return abort(reply) }
        if reply.isPreliminary, !isTransferStart(reply) {
            // RFC 959 allows a 1yz before a command's final reply; a server that sends them without
            // end would keep the exchange (and a core) busy until its timeout.
            preliminaries += 1
            return preliminaries > Self.maxPreliminaries ? abort(reply) : []
        }
        let code = reply.code
        switch stage {
        case .greeting:
            guard code == 220 else { return abort(reply) }
            return send(FTPCommand.user(request.credentials.user), then: .user)
        case .user:
            switch code {
            case 230: return send(FTPCommand.typeImage, then: .type)
            case 331: return send(FTPCommand.pass(request.credentials.password), then: .password)
            case 530, 532: return unauthorized(reply)
            default: return abort(reply)
            }
        case .password:
            switch code {
            case 230, 202: return send(FTPCommand.typeImage, then: .type)
            case 530, 532: return unauthorized(reply)
            default: return abort(reply)
            }
        case .type:
            return code == 200 ? startRequest() : abort(reply)
        case .size:
            return sizeReplied(reply)
        case .modificationTime:
            switch code {
            case 213: modified = reply.modificationTime
            case 450, 500, 501, 502, 504, 550: modified = nil
            default: return abort(reply)
            }
            // GET only: a HEAD answered 200 shows SIZE too, and a revalidating cache compares it
            // (a file replaced with its time kept, `cp -p`, is noticed by its length).
            if request.method == .get, let since = request.ifModifiedSince, let modified, modified <= since {
                return finish([.answer(notModifiedAnswer(modified))], reusable: true)
            }
            return request.method == .head ? finish([.answer(fileAnswer(status: .ok))], reusable: true) : startPassive()
        case .directoryCheck(let notFound):
            if code == 250 || code == 200 {
                changedDirectory = true
                let location = request.url.link(to: request.url.segments, directory: true)
                var answer = errorAnswer(.movedPermanently, text: "This is a directory: \(location)")
                answer.fields.insert(FTPAnswer.Field("Location", location), at: 0)
                return finish([.answer(answer)], reusable: false)
            }
            guard code >= 400 else { return abort(reply) }
            return failed(notFound)
        case .changeDirectory:
            switch code {
            case 250, 200:
                changedDirectory = true
                return request.method == .head ? finish([.answer(directoryHeadAnswer())], reusable: false) : startPassive()
            case 550, 450, 451: return failed(reply)
            case 530: return unauthorized(reply)
            default: return abort(reply)
            }
        case .passive(let extended):
            return passiveReplied(reply, extended: extended)
        case .restart:
            guard code == 350 || code >= 400 else { return abort(reply) }
            rangeAccepted = code == 350
            return send(FTPCommand.retr(request.url.commandPath), then: .transferStarting)
        case .transferStarting:
            return transferStartReplied(reply)
        case .transferring:
            guard code == 226 || code == 250 else { return abort(reply) }
            finalReplySeen = true
            return completeTransfer()
        case .notStarted, .dataConnecting, .finished:
            return abort(reply)
        }
    }

    private func isTransferStart(_ reply: FTPReply) -> Bool {
        if case .transferStarting = stage { return reply.code == 125 || reply.code == 150 }
        return false
    }

    /// Logged in and in binary mode: the request's own commands start.
    private mutating func startRequest() -> [FTPAction] {
        let path = request.url.commandPath
        if !request.url.isDirectory { return send(FTPCommand.size(path), then: .size) }
        if !path.isEmpty { return send(FTPCommand.cwd(path), then: .changeDirectory) }
        return request.method == .head ? finish([.answer(directoryHeadAnswer())], reusable: true) : startPassive()
    }

    private mutating func sizeReplied(_ reply: FTPReply) -> [FTPAction] {
        switch reply.code {
        case 213:
            size = reply.fileSize
        case 500, 501, 502, 504:
            size = nil
        case 550:
            return send(FTPCommand.cwd(request.url.commandPath), then: .directoryCheck(notFound: reply))
        case 450, 451:
            return failed(reply)
        case 530:
            return unauthorized(reply)
        default:
            return abort(reply)
        }
        if request.method == .get, let range = request.range, let size {
            guard range.start < size else {
                var answer = errorAnswer(.rangeNotSatisfiable, text: "The file has \(size) bytes.")
                answer.fields.append(FTPAnswer.Field("Content-Range", "bytes */\(size)"))
                return finish([.answer(answer)], reusable: true)
            }
            let end = min(range.end ?? size - 1, size - 1)
            if range.start > 0 || end < size - 1 { plannedRange = (range.start, end) }
        }
        return send(FTPCommand.mdtm(request.url.commandPath), then: .modificationTime)
    }

    private mutating func startPassive() -> [FTPAction] {
        extendedPassiveRefused ? send(FTPCommand.pasv, then: .passive(extended: false))
                               : send(FTPCommand.epsv, then: .passive(extended: true))
    }

    private mutating func passiveReplied(_ reply: FTPReply, extended: Bool) -> [FTPAction] {
        if extended {
            if [500, 501, 502, 504].contains(reply.code) {
                extendedPassiveRefused = true
                return startPassive()
            }
            guard let port = reply.extendedPassivePort else { return abort(reply) }
            stage = .dataConnecting
            return [.openData(port: port)]
        }
        guard let passive = reply.passivePort(controlIPv4: controlIPv4) else { return abort(reply) }
        passiveNamedOtherHost = passiveNamedOtherHost || passive.namedOtherHost
        stage = .dataConnecting
        return [.openData(port: passive.port)]
    }

    private mutating func sendTransferCommand() -> [FTPAction] {
        finalReplySeen = false
        dataEnded = false
        switch transfer {
        case .file:
            if let plannedRange { return send(FTPCommand.rest(plannedRange.start), then: .restart) }
            return send(FTPCommand.retr(request.url.commandPath), then: .transferStarting)
        case .mlsd:
            listing = newListing(.mlsd)
            return send(FTPCommand.mlsd, then: .transferStarting)
        case .list:
            listing = newListing(.list)
            return send(FTPCommand.list, then: .transferStarting)
        }
    }

    private func newListing(_ format: FTPListingParser.Format) -> FTPListingParser {
        FTPListingParser(format: format, maxEntries: listingLimits.maxEntries, maxLineBytes: listingLimits.maxLineBytes,
                         maxBytes: listingLimits.maxBytes, now: request.now)
    }

    private mutating func transferStartReplied(_ reply: FTPReply) -> [FTPAction] {
        let code = reply.code
        switch code {
        case 125, 150, 226, 250:
            finalReplySeen = code == 226 || code == 250
            stage = .transferring
            let started: [FTPAction] = transfer == .file ? [.answer(fileAnswer(status: nil)), .streamData] : [.collectListing]
            if transfer == .file { answered = true }
            let completion = completeTransfer()
            return started + completion
        case 500, 501, 502, 504:
            guard transfer == .mlsd else { return abort(reply) }
            transfer = .list
            return [.closeData] + startPassive()
        case 550 where transfer == .file:
            // Some servers give a directory a SIZE; RETR is where it fails.
            return [.closeData] + send(FTPCommand.cwd(request.url.commandPath), then: .directoryCheck(notFound: reply))
        case 425, 426, 450, 451, 452, 550:
            return [.closeData] + failed(reply)
        case 530:
            return unauthorized(reply)
        default:
            return abort(reply)
        }
    }

    /// The end of a transfer, once both the final reply and the end of the data connection came.
    private mutating func completeTransfer() -> [FTPAction] {
        if transfer == .file, rangeAccepted, let plannedRange, let size, plannedRange.end < size - 1, dataEnded {
            return finish([], reusable: false)
        }
        guard finalReplySeen, dataEnded else { return [] }
        if transfer == .file { return finish([], reusable: !changedDirectory) }
        return answerListing(complete: true)
    }

    private mutating func answerListing(complete: Bool) -> [FTPAction] {
        guard var parser = listing else { return abort(nil, "no listing") }
        if complete { parser.finish() }
        let page = FTPListingPage.render(url: request.url, entries: parser.entries, truncated: parser.isTruncated)
        let answer = FTPAnswer(status: .ok, fields: [FTPAnswer.Field("Content-Type", "text/html; charset=utf-8"),
                                                      FTPAnswer.Field("Content-Length", "\(page.count)")],
                               body: .bytes(page))
        listing = nil
        if complete { return finish([.answer(answer)], reusable: !changedDirectory) }
        return finish([.answer(answer), .closeData], reusable: false)
    }

    // MARK: - Answers

    /// The answer for the file: 206 when REST took the planned range, else 200 (`status` nil), or
    /// the given status (HEAD's 200).
    private func fileAnswer(status: HTTPStatus?) -> FTPAnswer {
        var fields: [FTPAnswer.Field] = []
        let name = request.url.segments.last ?? []
        fields.append(FTPAnswer.Field("Content-Type", ContentTypes.mediaType(forName: name)))
        var length = size
        var chosen = status ?? .ok
        if status == nil, rangeAccepted, let plannedRange, let size {
            chosen = .partialContent
            length = plannedRange.end - plannedRange.start + 1
            fields.append(FTPAnswer.Field("Content-Range", "bytes \(plannedRange.start)-\(plannedRange.end)/\(size)"))
        }
        if let length { fields.append(FTPAnswer.Field("Content-Length", "\(length)")) }
        if let modified { fields.append(FTPAnswer.Field("Last-Modified", String(decoding: HTTPDate.format(modified), as: UTF8.self))) }
        return FTPAnswer(status: chosen, fields: fields, body: request.method == .head ? .none : .stream(length: length))
    }

    /// RFC 9110 §15.4.5: no body, and the validator the stored response is checked against.
    private func notModifiedAnswer(_ modified: Int64) -> FTPAnswer {
        FTPAnswer(status: .notModified, fields: [FTPAnswer.Field("Last-Modified", String(decoding: HTTPDate.format(modified), as: UTF8.self))],
                  body: .none)
    }

    private func directoryHeadAnswer() -> FTPAnswer {
        FTPAnswer(status: .ok, fields: [FTPAnswer.Field("Content-Type", "text/html; charset=utf-8")], body: .none)
    }

    /// A short text/plain answer (no body for HEAD).
    private func errorAnswer(_ status: HTTPStatus, text: String) -> FTPAnswer {
        errorAnswer(status, body: Array(text.utf8) + [ftpLF])
    }

    private func errorAnswer(_ status: HTTPStatus, body: [UInt8]) -> FTPAnswer {
        FTPAnswer(status: status, fields: [FTPAnswer.Field("Content-Type", "text/plain; charset=utf-8"),
                                           FTPAnswer.Field("Content-Length", "\(body.count)")],
                  body: request.method == .head ? .none : .bytes(body))
    }

    /// An expected failure reply: answered per `FTPStatusMapping`, the connection still logged in.
    private mutating func failed(_ reply: FTPReply) -> [FTPAction] {
        let answer = errorAnswer(FTPStatusMapping.status(forReplyCode: reply.code), body: FTPStatusMapping.body(for: reply))
        return finish([.answer(answer)], reusable: !changedDirectory)
    }

    /// 530: the client may try again with credentials.
    private mutating func unauthorized(_ reply: FTPReply) -> [FTPAction] {
        guard !answered else { return close() }
        var answer = errorAnswer(.unauthorized, body: FTPStatusMapping.body(for: reply))
        answer.fields.append(FTPAnswer.Field("WWW-Authenticate", "Basic realm=\"FTP \(request.url.authority)\""))
        answered = true
        stage = .finished
        return [.answer(answer), .close]
    }

    /// The server said something that does not fit, or a connection failed: 502 (when nothing was
    /// answered yet) and close.
    private mutating func abort(_ reply: FTPReply?, _ text: String = "") -> [FTPAction] {
        guard !answered else { return close() }
        let body = reply.map { FTPStatusMapping.body(for: $0) } ?? Array(text.utf8) + [ftpLF]
        answered = true
        stage = .finished
        return [.answer(errorAnswer(.badGateway, body: body)), .close]
    }

    private mutating func close() -> [FTPAction] {
        stage = .finished
        return [.close]
    }

    private mutating func finish(_ actions: [FTPAction], reusable: Bool) -> [FTPAction] {
        answered = true
        stage = .finished
        return actions + [.done(reusable: reusable)]
    }

    /// `send(command)` and move to `next`; a command that cannot be built (an unsafe argument,
    /// which `FTPURL` and `FTPCredentials` already refuse) is a 400.
    private mutating func send(_ command: [UInt8]?, then next: Stage) -> [FTPAction] {
        guard let command else {
            guard !answered else { return close() }
            answered = true
            stage = .finished
            return [.answer(errorAnswer(.badRequest, text: "The request cannot be sent to an FTP server.")), .close]
        }
        stage = next
        preliminaries = 0
        return [.send(command)]
    }

    private var pathCommandsAreSafe: Bool {
        FTPCommand.isSafeArgument(request.url.commandPath)
            && (request.isReusedConnection || FTPCommand.isSafeArgument(request.credentials.user)
                && FTPCommand.isSafeArgument(request.credentials.password))
    }
}
