/// The log line of a client's failed TLS handshake, on a TLS listener or under interception. Under
/// interception it names the destination, and says when the client most likely refused the
/// certificate Larder minted because it does not trust Larder's CA: it answered with an alert
/// about the certificate, or hung up once it had seen it. Pure, for the tests.
struct ClientHandshakeFailure {
    enum Cause: Equatable {
        /// OpenSSL's reason.
        case failed(String)
        case timedOut
        /// The client closed or reset the connection; `sentBytes`: after starting the handshake.
        case closed(sentBytes: Bool)
    }

    /// What ended the handshake: a timeout, OpenSSL's reason, or, when there is none or it only
    /// says the stream ended ("unexpected eof while reading"), the client closing or resetting
    /// the connection.
    static func cause(timedOut: Bool, reason: String?, clientSentBytes: Bool) -> Cause {
        if timedOut { return .timedOut }
        guard let reason, !reason.lowercased().contains("unexpected eof") else {
            return .closed(sentBytes: clientSentBytes)
        }
        return .failed(reason)
    }

    /// The client's address.
    var peer: String
    /// The intercepted CONNECT's destination, HOST:PORT; nil on a TLS listener.
    var destination: String?
    /// The interception CA's certificate, for the hint.
    var caFile: String?
    var cause: Cause

    /// Alerts a client sends when it rejects the certificate it was shown (RFC 8446 §6.2), as
    /// OpenSSL words them.
    static let certificateRefusals = ["alert unknown ca", "alert bad certificate", "alert certificate unknown",
                                      "alert unsupported certificate"]

    /// nil when there is nothing worth a line: a client that closed or reset the connection before
    /// it sent a byte (a port probe, a load balancer's TCP check) started no handshake.
    var message: String? {
        let why: String
        switch cause {
        case .failed(let reason): why = reason
        case .timedOut: why = "timed out"
        case .closed(let sentBytes):
            guard sentBytes else { return nil }
            why = "the client closed the connection during the handshake"
        }
        var line = "TLS handshake with client \(peer)"
        if let destination { line += " for \(destination) (intercepted)" }
        line += " failed: \(why)"
        if destination != nil, clientRefusedTheCertificate {
            line += "; the client probably does not trust Larder's interception CA: install "
                + (caFile ?? "the CA (`larder ca init` prints where it is)") + " in its trust store"
        }
        return line
    }

    private var clientRefusedTheCertificate: Bool {
        switch cause {
        case .failed(let reason):
            let lowered = reason.lowercased()
            return Self.certificateRefusals.contains { lowered.contains($0) }
        case .closed(sentBytes: true): return true
        default: return false
        }
    }
}
