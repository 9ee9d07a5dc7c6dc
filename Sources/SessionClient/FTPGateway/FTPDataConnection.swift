import EventLoop
import Glibc

/// Who hears a data connection: the exchange that opened it.
protocol FTPDataListener: AnyObject {
    func dataConnected(_ data: FTPDataConnection)
    func dataReadable(_ data: FTPDataConnection)
    /// The server closed it: the transfer's bytes are all there (its end is the control
    /// connection's `226` to confirm).
    func dataEnded(_ data: FTPDataConnection)
    func dataFailed(_ data: FTPDataConnection, failure: FTPLinkFailure)
}

/// One passive-mode data connection, opened to the control connection's server address at the
/// port a passive reply named, within the connect timeout; its bytes are read as the exchange
/// has room for them.
final class FTPDataConnection: StreamDelegate {
    let stream: Stream
    private weak var listener: (any FTPDataListener)?
    private var connectTimer: Timer?
    private var connected = false
    private(set) var isClosed = false

    private init(stream: Stream, listener: any FTPDataListener) {
        self.stream = stream
        self.listener = listener
    }

    /// Connects to `address`; nil when the socket cannot even be made.
    static func open(to address: SocketAddress, loop: EventLoop, connectTimeout: Double, readTimeout: Double,
                     listener: any FTPDataListener) -> FTPDataConnection? {
        switch Stream.connect(loop: loop, to: address) {
        case .failure:
            return nil
        case .success(let stream):
            let data = FTPDataConnection(stream: stream, listener: listener)
            stream.delegate = data
            stream.setTimeouts(read: readTimeout, write: readTimeout)
            let timer = Timer(loop: loop) { [weak data] in data?.fail(.silence("the data connection did not open in time")) }
            timer.schedule(after: connectTimeout)
            data.connectTimer = timer
            return data
        }
    }

    func resumeReading() { if !isClosed { stream.enableReading() } }
    func pauseReading() { if !isClosed { stream.disableReading() } }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        connectTimer?.cancel()
        connectTimer = nil
        listener = nil
        stream.delegate = nil
        stream.close()
    }

    func streamReadable(_ stream: Stream) { listener?.dataReadable(self) }
    func streamDrained(_ stream: Stream) {}

    func stream(_ stream: Stream, event: StreamEvent) {
        switch event {
        case .connected:
            connected = true
            connectTimer?.cancel()
            connectTimer = nil
            stream.enableReading()
            listener?.dataConnected(self)
        case .endOfStream:
            let listener = self.listener
            stream.disableReading()
            listener?.dataEnded(self)
        case .error(let e):
            fail(.broken(connected ? "data connection error: \(String(cString: strerror(e)))"
                                   : "the data connection was refused: \(String(cString: strerror(e)))"))
        case .timeout:
            fail(.silence("the data connection was silent too long"))
        }
    }

    private func fail(_ failure: FTPLinkFailure) {
        let listener = self.listener
        close()
        listener?.dataFailed(self, failure: failure)
    }
}
