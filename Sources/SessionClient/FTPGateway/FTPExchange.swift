import EventLoop
import FTPWire
import HTTPWire

/// One ftp:// request through the gateway. The task's HTTP/1.1 request is read from its memory
/// stream, turned into an `FTPRequest`, and carried out by an `FTPSession` (the protocol, as a
/// state machine) over a control connection from the gateway's pool or a new one, and passive
/// data connections opened to that control connection's own server address. The answer is written
/// back as HTTP/1.1, its body paced by how fast the task takes it.
final class FTPExchange: MemoryStreamPeer, FTPControlListener, FTPDataListener {
    private unowned(unsafe) let gateway: FTPGateway
    private let origin: OriginKey
    private let client: [UInt8]?
    /// The task's end; set right after creation.
    var stream: Stream!
    private var session: FTPSession?
    private var request: FTPRequest?
    private var requestRead = false
    /// Replies heard on the current control connection in this exchange: a kept connection that
    /// fails before the first (the server closed it while it idled) is replaced once.
    private var repliesSeen = 0
    private var login: FTPLoginKey?
    private var control: FTPControlConnection?
    private var connector: Connector?
    private var data: FTPDataConnection?
    private var dataMode = DataMode.held
    /// The server closed the data connection before the session said what its bytes are for.
    private var dataEndedEarly = false
    private var answered = false
    /// Body bytes still owed after the head: nil for a body framed in chunks (no SIZE).
    private var bodyLeft: Int?
    private var chunked = false
    private var ended = false

    private enum DataMode { case held, body, listing }

    /// Bytes queued for the task beyond which the data connection is not read.
    private static let highWater = 256 * 1024
    private static let requestLimits = HeadLimits(maxHeadBytes: 64 * 1024, maxHeaderCount: 256, maxRequestLineBytes: 16 * 1024)

    init(gateway: FTPGateway, origin: OriginKey, client: [UInt8]?) {
        self.gateway = gateway
        self.origin = origin
        self.client = client
    }

    private var configuration: SessionConfiguration { gateway.session.configuration }

    // MARK: - The task's request

    func memoryStreamHasOutput(_ stream: Stream) {
        let output = stream.output
        guard !requestRead, !ended else {
            output.drain(output.count)  // nothing more is read after the head (GET and HEAD have no body)
            return
        }
        var head = RequestHead()
        let complete: Bool
        do throws(HTTPWireError) {
            complete = try output.withContiguousPrefix(maxBytes: Self.requestLimits.maxHeadBytes) { bytes throws(HTTPWireError) in
                try RequestParser.parse(bytes, into: &head, limits: Self.requestLimits) != nil
            }
        } catch {
            return answerAlone(400, "the request to the FTP gateway is not valid HTTP (\(error))")
        }
        guard complete else {
            if output.count >= Self.requestLimits.maxHeadBytes { answerAlone(431, "request head too large") }
            return
        }
        output.drain(output.count)
        requestRead = true
        start(head)
    }

    private func start(_ head: RequestHead) {
        let method: FTPRequest.Method
        switch head.method {
        case .get: method = .get
        case .head: method = .head
        default: return answerAlone(405, "ftp:// URLs are only read (GET or HEAD)", extra: "Allow: GET, HEAD\r\n")
        }
        guard let url = head.headers.withBytes(head.target, { FTPURL($0) }) else {
            return answerAlone(400, "not an ftp:// URL the gateway can ask for (control characters, or malformed)")
        }
        let authorization = head.headers.firstIndex(of: "authorization").map { Self.value(head.headers, at: $0) }
        guard let credentials = FTPCredentials.forRequest(url: url, authorization: authorization) else {
            return answerAlone(400, "the FTP credentials contain characters no FTP command may carry")
        }
        // With If-Range the client splices the range onto a copy it has: the gateway has no
        // validator to compare (RFC 9110 §13.1.5), so it sends the whole file (a 200) instead.
        let range = method == .get && head.headers.firstIndex(of: "if-range") == nil
            ? head.headers.firstIndex(of: "range").flatMap { Self.singleRange(Self.value(head.headers, at: $0)) }
            : nil
        let login = FTPLoginKey(host: origin.host, port: origin.port, user: credentials.user, password: credentials.password)
        self.login = login
        var request = FTPRequest(method: method, url: url, credentials: credentials, range: range,
                                 now: gateway.session.clock.wallSeconds)
        // RFC 9110 §13.2.2: If-None-Match, when present, is the condition (and no FTP file has a
        // tag); §13.1.3: a field given twice is not one date.
        if head.headers.firstIndex(of: "if-none-match") == nil,
           let value = head.headers.withOnlyValue("if-modified-since", { Array($0) }) {
            request.ifModifiedSince = value.withUnsafeBytes { HTTPDate.parse($0, now: request.now ?? 0) }
        }
        if let reused = gateway.takeIdle(login) {
            reused.leaveIdle(readTimeout: configuration.timeoutIntervalForRequest, listener: self)
            control = reused
            request.isReusedConnection = true
            begin(request, control: reused)
            return
        }
        connectFresh(request)
    }

    private func connectFresh(_ request: FTPRequest) {
        guard let login else { return }
        connector = gateway.connect(origin, client: client) { [weak self] result in
            guard let self else { return }
            self.connector = nil
            switch result {
            case .failure(let error):
                self.answerAlone(error.status, error.message)
            case .success(let socket):
                guard !self.ended else { return socket.close() }
                let c = FTPControlConnection(stream: socket, login: login)
                c.listener = self
                c.start(readTimeout: self.configuration.timeoutIntervalForRequest)
                self.control = c
                self.begin(request, control: c)
            }
        }
    }

    private func begin(_ request: FTPRequest, control: FTPControlConnection) {
        self.request = request
        repliesSeen = 0
        var ipv4: UInt32?
        if let address = control.serverAddress, !address.isIPv6 {
            ipv4 = address.addressBytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
        session = FTPSession(request: request, controlIPv4: ipv4)
        handle(.connected)
    }

    private static func value(_ headers: HeaderBlock, at i: Int) -> [UInt8] {
        headers.withBytes(headers.fields[i].value) { Array($0) }
    }

    /// `bytes=first-[last]`, one range only; anything else is answered whole (RFC 9110 §14.2
    /// lets a server ignore a Range), and the cache cuts what the client asked for.
    static func singleRange(_ value: [UInt8]) -> FTPByteRange? {
        guard value.count > 6, value[0..<6].elementsEqual("bytes=".utf8) else { return nil }
        let spec = value[6...]
        guard let dash = spec.firstIndex(of: 0x2D) else { return nil }
        func number(_ digits: ArraySlice<UInt8>) -> Int? {
            guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(isDigit) else { return nil }
            return digits.reduce(0) { $0 * 10 + Int($1 &- 0x30) }
        }
        guard let first = number(spec[..<dash]) else { return nil }
        let rest = spec[(dash + 1)...]
        if rest.isEmpty { return FTPByteRange(start: first) }
        guard let last = number(rest) else { return nil }
        return FTPByteRange(start: first, end: last)
    }

    // MARK: - The session's actions

    private func handle(_ event: FTPEvent) {
        guard session != nil, !ended else { return }
        // In place: a copy would copy the listing it holds on every piece of a listing.
        let actions = session!.handle(event)
        for action in actions {
            guard !ended else { return }
            perform(action)
        }
    }

    private func perform(_ action: FTPAction) {
        switch action {
        case .send(let line):
            control?.send(line)
        case .openData(let port):
            // Only the control connection's server, and not at a port below 1024 (a service of
            // that host's other than its FTP data), nor anywhere the session may not connect.
            guard port >= 1024, let address = control?.serverAddress?.withPort(port),
                  gateway.session.addressGate?(address) == nil else { return handle(.dataFailed) }
            data = FTPDataConnection.open(to: address, loop: gateway.session.loop,
                                          connectTimeout: configuration.connectTimeout,
                                          readTimeout: configuration.timeoutIntervalForRequest, listener: self)
            dataMode = .held
            dataEndedEarly = false
            if data == nil { handle(.dataFailed) }
        case .closeData:
            data?.close()
            data = nil
        case .streamData:
            dataMode = .body
            control?.awaitTransfer()
            pump()
        case .collectListing:
            dataMode = .listing
            control?.awaitTransfer()
            pump()
        case .answer(let answer):
            writeHead(answer)
        case .done(let reusable):
            finish(reusable: reusable)
        case .close:
            abort()
        }
    }

    // MARK: - The answer

    private func writeHead(_ answer: FTPAnswer) {
        guard !answered else { return }
        answered = true
        var text = "HTTP/1.1 \(answer.status.code) \(answer.status.reason)\r\n"
        // A HEAD answer keeps the GET's length; any other body's framing is written below, from
        // what is actually sent.
        var isHeadAnswer = false
        if case .none = answer.body { isHeadAnswer = true }
        for f in answer.fields where isHeadAnswer || f.name.lowercased() != "content-length" {
            text += "\(f.name): \(f.value)\r\n"
        }
        switch answer.body {
        case .none:
            break
        case .bytes(let bytes):
            text += "Content-Length: \(bytes.count)\r\n"
        case .stream(let length):
            if let length {
                text += "Content-Length: \(length)\r\n"
                bodyLeft = length
            } else {
                text += "Transfer-Encoding: chunked\r\n"
                chunked = true
            }
        }
        if answer.status.code >= 500 || answer.status.code == 403 { text += "Cache-Control: no-store\r\n" }
        text += "Connection: close\r\n\r\n"
        deliver(Array(text.utf8))
        if case .bytes(let bytes) = answer.body { deliver(bytes) }
    }

    /// An answer from the gateway itself, before or without a session (a refusal, a connect
    /// error); the exchange ends with it.
    private func answerAlone(_ status: Int, _ message: String, extra: String = "") {
        guard !answered, !ended else { return abort() }
        answered = true
        let body = Array((message + "\n").utf8)
        let reason: String
        switch status {
        case 400: reason = "Bad Request"
        case 403: reason = "Forbidden"
        case 405: reason = "Method Not Allowed"
        case 431: reason = "Request Header Fields Too Large"
        case 503: reason = "Service Unavailable"
        case 504: reason = "Gateway Timeout"
        default: reason = "Bad Gateway"
        }
        let head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + "Content-Length: \(body.count)\r\nCache-Control: no-store\r\n\(extra)Connection: close\r\n\r\n"
        deliver(Array(head.utf8))
        deliver(body)
        end(reusable: false, complete: true)
    }

    private func deliver(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { stream.peerAppend($0) }
    }

    private func finish(reusable: Bool) {
        if chunked { deliver(Array("0\r\n\r\n".utf8)) }
        end(reusable: reusable, complete: true)
    }

    /// Something failed: an answer not given yet becomes a 502; a body under way is cut, so the
    /// task sees an incomplete response (never stored).
    private func abort() {
        guard !ended else { return }
        if !answered {
            answerAlone(502, "the FTP exchange failed")
            return
        }
        end(reusable: false, complete: false)
    }

    private func end(reusable: Bool, complete: Bool) {
        guard !ended else { return }
        ended = true
        connector?.cancel()
        connector = nil
        data?.close()
        data = nil
        if let control {
            if reusable, complete {
                gateway.keep(control)  // the session says so: logged in, binary, in its login directory
            } else {
                control.close()
            }
        }
        control = nil
        if complete { stream.peerEnded() } else { stream.peerAborted() }
        gateway.exchangeEnded(self)
    }

    // MARK: - Data

    /// Moves the data connection's bytes on: into the answer's body as the task takes them, or
    /// into the session's listing.
    private func pump() {
        guard let data, !ended else { return }
        let input = data.stream.input
        switch dataMode {
        case .held:
            if input.count >= Self.highWater { data.pauseReading() }
            return
        case .listing:
            while input.count > 0 {
                let chunk = input.withFirstSegment { Array($0) }
                input.drain(chunk.count)
                handle(.listingData(chunk))
                guard !ended, self.data != nil else { return }
            }
            data.resumeReading()
        case .body:
            while input.count > 0, stream.input.count < Self.highWater {
                var n = input.withFirstSegment { $0.count }
                if let left = bodyLeft { n = min(n, left) }
                if chunked { deliver(Array("\(String(n, radix: 16))\r\n".utf8)) }
                input.withFirstSegment { stream.peerAppend(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                if chunked { deliver([0x0D, 0x0A]) }
                input.drain(n)
                if let left = bodyLeft {
                    bodyLeft = left - n
                    if left - n == 0 {
                        // The whole Content-Length is relayed: whatever else the server sends is not the file's.
                        data.close()
                        self.data = nil
                        control?.awaitReply(timeout: configuration.timeoutIntervalForRequest)
                        return handle(.dataEnded)
                    }
                }
            }
            if stream.input.count < Self.highWater { data.resumeReading() } else { data.pauseReading() }
        }
        if dataEndedEarly, input.count == 0 { dataEnded(data) }
    }

    func dataConnected(_ data: FTPDataConnection) {
        guard data === self.data else { return }
        handle(.dataConnected)
    }

    func dataReadable(_ data: FTPDataConnection) {
        guard data === self.data else { return }
        pump()
    }

    func dataEnded(_ data: FTPDataConnection) {
        guard data === self.data, !ended else { return }
        if dataMode == .held || data.stream.input.count > 0 {
            dataEndedEarly = true
            if dataMode != .held { pump() }
            return
        }
        data.close()
        self.data = nil
        if dataMode == .body, let left = bodyLeft, left > 0 {
            // The server closed before the size it announced: the body is cut.
            return abort()
        }
        control?.awaitReply(timeout: configuration.timeoutIntervalForRequest)
        handle(.dataEnded)
    }

    func dataFailed(_ data: FTPDataConnection, failure: FTPLinkFailure) {
        guard data === self.data else { return }
        self.data = nil
        // The session's answer to a failed data connection is a 502; silence is a 504.
        if !answered, failure.isSilence { return answerAlone(504, "FTP server \(origin): \(failure)") }
        handle(.dataFailed)
    }

    // MARK: - Control

    func control(_ control: FTPControlConnection, replied reply: FTPReply) {
        guard control === self.control else { return }
        repliesSeen += 1
        handle(.reply(reply))
    }

    func controlFailed(_ control: FTPControlConnection, failure: FTPLinkFailure) {
        guard control === self.control else { return }
        self.control = nil
        if var retry = request, retry.isReusedConnection, repliesSeen == 0, !answered, !ended {
            data?.close()
            data = nil
            dataMode = .held
            retry.isReusedConnection = false
            session = nil
            return connectFresh(retry)
        }
        if answered { return end(reusable: false, complete: false) }
        answerAlone(failure.isSilence ? 504 : 502, "FTP server \(origin): \(failure)")
    }

    // MARK: - MemoryStreamPeer

    func memoryStreamConsumed(_ stream: Stream, count: Int) {
        if dataMode == .body { pump() }
    }

    func memoryStreamFinished(_ stream: Stream, reset: Bool) {
        // The task is done with the answer: early (a timeout, a client gone) unless everything was given.
        guard !ended else { return }
        end(reusable: false, complete: false)
    }
}
