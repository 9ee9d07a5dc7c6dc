import Testing
@testable import ProxyServer

/// What a failed client TLS handshake is logged as: the destination under interception, and the
/// hint that the client does not trust Larder's CA when its answer says so.
@Suite struct ClientHandshakeFailureTests {
    static let hint = "; the client probably does not trust Larder's interception CA: install /etc/larder/ca/larder-ca.pem "
        + "in its trust store"

    struct Row: Sendable, CustomTestStringConvertible {
        var destination: String?
        var cause: ClientHandshakeFailure.Cause
        var expected: String?
        var testDescription: String { "\(destination ?? "listener"): \(cause)" }
    }

    static let rows: [Row] = [
        Row(destination: "pypi.org:443", cause: .failed("TLS handshake failed: tlsv1 alert unknown ca"),
            expected: "TLS handshake with client 10.0.0.7:40000 for pypi.org:443 (intercepted) failed: TLS handshake failed: "
                + "tlsv1 alert unknown ca" + hint),
        Row(destination: "pypi.org:443", cause: .failed("TLS handshake failed: sslv3 alert bad certificate"),
            expected: "TLS handshake with client 10.0.0.7:40000 for pypi.org:443 (intercepted) failed: TLS handshake failed: "
                + "sslv3 alert bad certificate" + hint),
        Row(destination: "pypi.org:443", cause: .failed("TLS handshake failed: sslv3 alert certificate unknown"),
            expected: "TLS handshake with client 10.0.0.7:40000 for pypi.org:443 (intercepted) failed: TLS handshake failed: "
                + "sslv3 alert certificate unknown" + hint),
        Row(destination: "pypi.org:443", cause: .closed(sentBytes: true),
            expected: "TLS handshake with client 10.0.0.7:40000 for pypi.org:443 (intercepted) failed: the client closed "
                + "the connection during the handshake" + hint),
        // Nothing about the certificate: no hint.
        Row(destination: "pypi.org:443", cause: .failed("TLS handshake failed: no shared cipher"),
            expected: "TLS handshake with client 10.0.0.7:40000 for pypi.org:443 (intercepted) failed: TLS handshake failed: "
                + "no shared cipher"),
        Row(destination: "pypi.org:443", cause: .timedOut,
            expected: "TLS handshake with client 10.0.0.7:40000 for pypi.org:443 (intercepted) failed: timed out"),
        // A client that never started the handshake: no line.
        Row(destination: "pypi.org:443", cause: .closed(sentBytes: false), expected: nil),
        Row(destination: nil, cause: .closed(sentBytes: false), expected: nil),
        // Larder's own TLS listener: its certificate is the operator's, not the interception CA's.
        Row(destination: nil, cause: .failed("TLS handshake failed: tlsv1 alert unknown ca"),
            expected: "TLS handshake with client 10.0.0.7:40000 failed: TLS handshake failed: tlsv1 alert unknown ca"),
        Row(destination: nil, cause: .closed(sentBytes: true),
            expected: "TLS handshake with client 10.0.0.7:40000 failed: the client closed the connection during the handshake"),
    ]

    @Test(arguments: rows) func message(_ row: Row) {
        let failure = ClientHandshakeFailure(peer: "10.0.0.7:40000", destination: row.destination,
                                             caFile: "/etc/larder/ca/larder-ca.pem", cause: row.cause)
        #expect(failure.message == row.expected)
    }

    /// An end of stream is the client hanging up, whether OpenSSL says so or says nothing.
    @Test(arguments: [
        (false, "TLS handshake failed: tlsv1 alert unknown ca" as String?, true,
         ClientHandshakeFailure.Cause.failed("TLS handshake failed: tlsv1 alert unknown ca")),
        (false, "TLS handshake failed: unexpected eof while reading", true, .closed(sentBytes: true)),
        (false, "TLS handshake failed: unexpected eof while reading", false, .closed(sentBytes: false)),
        (false, nil, true, .closed(sentBytes: true)),
        (false, nil, false, .closed(sentBytes: false)),
        (true, nil, true, .timedOut),
    ])
    func cause(_ timedOut: Bool, _ reason: String?, _ sentBytes: Bool, _ expected: ClientHandshakeFailure.Cause) {
        #expect(ClientHandshakeFailure.cause(timedOut: timedOut, reason: reason, clientSentBytes: sentBytes) == expected)
    }
}
