import EventLoop
import HTTPWire

/// One connection to an origin: idle in its pool, or serving exactly one task at a time.
final class OriginConnection: StreamDelegate {
    let stream: Stream
    unowned let pool: HostPool
    /// The task using the connection; nil while idle. Strong, as a URLSession holds its running
    /// tasks: a resumed task lives until it finishes, whoever else still refers to it. The task
    /// lets go of the connection when it finishes, and releasing the connection clears this.
    var task: SessionTask?
    /// Room for the response heads read on this connection, lent to each task in turn: parsing
    /// reuses its capacity instead of allocating for every response.
    var headSpace = ResponseHead()
    /// When it last went idle, in the session's order (`Session.closeLongestIdle`).
    var idleOrder = 0
    private var idleDeadline: Deadline?
    private var sessionKept = false
    /// A stream of an HTTP/2 connection that was open already: a request it fails before any
    /// answer (the origin refused the stream, or went away) is tried once more, as on a reused
    /// connection.
    var ridesSharedConnection = false

    init(stream: Stream, pool: HostPool) {
        self.stream = stream
        self.pool = pool
        stream.delegate = self
    }

    func enterIdle(timeout: Double) {
        task = nil
        keepSession()
        stream.setTimeouts(read: nil, write: nil)
        stream.enableReading()   // notice the origin closing an idle connection
        let t = idleDeadline ?? Deadline(loop: pool.session.loop) { [unowned self] in
            self.pool.idleConnectionEnded(self)
        }
        idleDeadline = t
        t.schedule(after: timeout)
    }

    func leaveIdle() {
        idleDeadline?.cancel()
    }

    /// The stream now belongs to someone else; stop watching it.
    func detach() {
        idleDeadline?.cancel()
        idleDeadline = nil
        task = nil
    }

    func close() {
        idleDeadline?.cancel()
        idleDeadline = nil
        task = nil
        keepSession()
        stream.close()
    }

    /// A TLS 1.3 session ticket arrives after the handshake, with the first response bytes: by the
    /// time the connection goes idle or closes it is here, and the next connection can resume.
    private func keepSession() {
        guard stream.isTLS, !sessionKept else { return }
        sessionKept = true
        pool.session.tls.rememberSession(of: stream, origin: pool.key.description)
    }

    func streamReadable(_ stream: Stream) {
        if let task { task.originReadable() } else if stream.input.count > 0 {
            // Bytes from an idle origin are not an answer to anything: the connection is unusable.
            pool.session.noteDiscardedUnsafe()
            pool.idleConnectionEnded(self)
        }
    }

    func streamDrained(_ stream: Stream) {
        task?.originDrained()
    }

    func stream(_ stream: Stream, event: StreamEvent) {
        if let task { task.originEvent(event) } else { pool.idleConnectionEnded(self) }
    }
}
