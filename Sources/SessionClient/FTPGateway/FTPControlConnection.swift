import EventLoop
import FTPWire
import Glibc

/// Who hears an FTP control connection's replies: the exchange using it, or nobody while it idles.
protocol FTPControlListener: AnyObject {
    func control(_ control: FTPControlConnection, replied reply: FTPReply)
    /// The connection broke (closed by the server, a socket error or timeout, a reply over its
    /// bounds): nothing more comes on it.
    func controlFailed(_ control: FTPControlConnection, failure: FTPLinkFailure)
}

/// Why a control or data connection ended early. Silence is the server's slowness (a `504`, as
/// for an HTTP origin); anything else is a `502`.
struct FTPLinkFailure: CustomStringConvertible {
    var isSilence: Bool
    var description: String

    static func silence(_ what: String) -> FTPLinkFailure { FTPLinkFailure(isSilence: true, description: what) }
    static func broken(_ what: String) -> FTPLinkFailure { FTPLinkFailure(isSilence: false, description: what) }
}

/// An FTP server's control connection: command lines out, replies in (parsed within bounds, so an
/// endless reply ends the connection rather than growing it). Logged in as one user; returned
/// to the gateway between requests to be reused by the next request of that login.
final class FTPControlConnection: StreamDelegate {
    let login: FTPLoginKey
    private let stream: Stream
    private var replies = FTPReplyParser()
    weak var listener: (any FTPControlListener)?
    private(set) var isClosed = false
    private var idleTimer: Timer?
    private var replyTimeout: Double?
    /// The gateway, told when an idle connection goes.
    var onIdleClose: ((FTPControlConnection) -> Void)?

    init(stream: Stream, login: FTPLoginKey) {
        self.stream = stream
        self.login = login
    }

    /// The server's address: the data connections of this session go there and nowhere else
    /// (a passive reply's host is never used: the FTP bounce).
    var serverAddress: SocketAddress? { SocketAddress.peer(of: stream.fileDescriptor) }

    func start(readTimeout: Double) {
        stream.delegate = self
        replyTimeout = readTimeout
        stream.setTimeouts(read: readTimeout, write: readTimeout)
        stream.enableReading()
    }

    /// A transfer is under way: the server says nothing here until it ends, however long that
    /// takes (the data connection's own silence is what is timed meanwhile).
    func awaitTransfer() {
        guard !isClosed else { return }
        stream.setTimeouts(read: nil, write: replyTimeout)
    }

    /// The next reply is due within `timeout`.
    func awaitReply(timeout: Double) {
        guard !isClosed else { return }
        replyTimeout = timeout
        stream.setTimeouts(read: timeout, write: timeout)
    }

    func send(_ line: [UInt8]) {
        guard !isClosed else { return }
        stream.output.append(line)
    }

    // MARK: Idle, between requests

    /// Kept for the login's next request; closed after `timeout` unused, or when the server
    /// closes it or says anything meanwhile (a `421` before it goes).
    func enterIdle(timeout: Double, loop: EventLoop) {
        listener = nil
        stream.setTimeouts(read: nil, write: nil)
        let t = idleTimer ?? Timer(loop: loop) { [weak self] in self?.closeIdle() }
        idleTimer = t
        t.schedule(after: timeout)
    }

    func leaveIdle(readTimeout: Double, listener: any FTPControlListener) {
        idleTimer?.cancel()
        self.listener = listener
        awaitReply(timeout: readTimeout)
    }

    /// Closed without a `QUIT`: the socket's end says as much, and a server that keeps the
    /// connection after a `QUIT` it never answers cannot hold the gateway.
    private func closeIdle() {
        guard !isClosed else { return }
        close()
        onIdleClose?(self)
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        idleTimer?.cancel()
        idleTimer = nil
        listener = nil
        stream.delegate = nil
        stream.close()
    }

    // MARK: StreamDelegate

    func streamReadable(_ stream: Stream) {
        let input = stream.input
        while input.count > 0, !isClosed {
            var parsed: [FTPReply] = []
            let failure = input.withFirstSegment { bytes -> FTPWireError? in
                do throws(FTPWireError) { parsed = try replies.feed(bytes) } catch { return error }
                return nil
            }
            input.drain(input.withFirstSegment { $0.count })
            if let failure { return fail(.broken("the server's reply broke the rules (\(failure))")) }
            for reply in parsed {
                guard !isClosed else { return }
                guard let listener else {
                    // Nobody asked: an idle connection the server speaks on is not trusted again.
                    closeIdle()
                    return
                }
                listener.control(self, replied: reply)
            }
        }
    }

    func streamDrained(_ stream: Stream) {}

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected: return
        case .endOfStream: fail(.broken("the server closed the control connection"))
        case .error(let e): fail(.broken("control connection error: \(String(cString: strerror(e)))"))
        case .timeout: fail(.silence("the server did not answer in time"))
        }
    }

    private func fail(_ failure: FTPLinkFailure) {
        let listener = self.listener
        let wasIdle = listener == nil
        close()
        if wasIdle { onIdleClose?(self) }
        listener?.controlFailed(self, failure: failure)
    }
}

/// What a control connection is logged in as: host, port and credentials. Only a connection of
/// the same login is reused for a request.
struct FTPLoginKey: Hashable {
    var host: String
    var port: Int
    var user: [UInt8]
    var password: [UInt8]
}
