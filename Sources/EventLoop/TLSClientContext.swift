@preconcurrency import CLibevent
import COpenSSL
import Glibc
import HTTPWire

/// OpenSSL client settings for connections to https origins: peer verification against the system
/// store or a CA file, hostname checks, SNI, ALPN (`h2` and `http/1.1`), protocol version bounds.
public final class TLSClientContext: @unchecked Sendable {
    let ctx: OpaquePointer
    /// Per-host exceptions: hosts matching a pattern are accepted on their pinned fingerprint alone.
    let pins: [(pattern: HostPattern, sha256: String)]
    /// The last resumable session per origin (`host:port`), offered on the next connection there.
    /// One context serves one loop, so no lock.
    private var sessions: [String: OpaquePointer] = [:]

    public struct SetupError: Error, CustomStringConvertible {
        public let description: String
    }

    /// - Parameters:
    ///   - minimumVersion, maximumVersion: "1.2" or "1.3".
    ///   - caFile: PEM bundle; nil uses OpenSSL's default verify paths (the system store).
    ///   - pins: host patterns and the SHA-256 (hex) of the certificate accepted for them; the first
    ///     pattern that matches a host decides.
    public init(minimumVersion: String = "1.2", maximumVersion: String = "1.3", caFile: String? = nil,
                pins: [(pattern: HostPattern, sha256: String)] = [], offerH2: Bool = false) throws(SetupError) {
        guard let c = SSL_CTX_new(TLS_client_method()) else { throw SetupError(description: "SSL_CTX_new failed") }
        ctx = c
        self.pins = pins
        guard let lo = TLSClientContext.version(minimumVersion), let hi = TLSClientContext.version(maximumVersion) else {
            throw SetupError(description: "TLS versions must be 1.2 or 1.3")
        }
        _ = larder_SSL_CTX_set_min_proto_version(c, lo)
        _ = larder_SSL_CTX_set_max_proto_version(c, hi)
        SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nil)
        if let caFile {
            guard SSL_CTX_load_verify_locations(c, caFile, nil) == 1 else {
                throw SetupError(description: "cannot load CA file \(caFile)")
            }
        } else {
            SSL_CTX_set_default_verify_paths(c)
        }
        _ = SSL_CTX_set_options(c, larder_SSL_OP_NO_COMPRESSION | larder_SSL_OP_NO_RENEGOTIATION)
        // `h2` first where HTTP/2 to origins is on: the origin picks.
        let alpn: [UInt8] = (offerH2 ? [2] + Array("h2".utf8) : []) + [8] + Array("http/1.1".utf8)
        _ = alpn.withUnsafeBufferPointer { SSL_CTX_set_alpn_protos(c, $0.baseAddress, UInt32($0.count)) }
        _ = larder_SSL_CTX_set_session_cache_mode(c, Int(SSL_SESS_CACHE_CLIENT))
    }

    deinit {
        for session in sessions.values { SSL_SESSION_free(session) }
        SSL_CTX_free(ctx)
    }

    /// The fingerprint pinned for `host`, if a trust exception covers it.
    public func pinnedFingerprint(for host: String) -> String? {
        pins.first { $0.pattern.matches(host) }?.sha256
    }

    /// Keeps (a copy of) `stream`'s session, if it can be resumed, for the next connection to `origin`.
    public func rememberSession(of stream: Stream, origin: String) {
        guard let ssl = stream.tls?.ssl, let current = SSL_get_session(ssl),
              SSL_SESSION_is_resumable(current) == 1 else { return }
        // A copy: the connection's own session is marked unusable when the connection is freed
        // without a TLS shutdown, which is how pooled connections usually end.
        guard let copy = SSL_SESSION_dup(current) else { return }
        if let kept = sessions[origin] { SSL_SESSION_free(kept) }
        sessions[origin] = copy
    }

    /// Whether `stream`'s handshake resumed a kept session.
    public func resumedSession(_ stream: Stream) -> Bool {
        guard let ssl = stream.tls?.ssl else { return false }
        return SSL_session_reused(ssl) == 1
    }

    static func version(_ s: String) -> Int32? {
        switch s {
        case "1.2": return TLS1_2_VERSION
        case "1.3": return TLS1_3_VERSION
        default: return nil
        }
    }

    /// A client SSL object for `serverName`: SNI for names, and the name (or IP) checked against the
    /// certificate.
    func makeSSL(serverName: String, origin: String) -> OpaquePointer? {
        guard let ssl = SSL_new(ctx) else { return nil }
        if let kept = sessions[origin] { _ = SSL_set_session(ssl, kept) }
        // A pinned host is judged by its fingerprint after the handshake, not by the chain.
        if pinnedFingerprint(for: serverName) != nil { SSL_set_verify(ssl, SSL_VERIFY_NONE, nil) }
        if SocketAddress(ipLiteral: serverName, port: 0) != nil {
            _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
        } else {
            _ = larder_SSL_set_tlsext_host_name(ssl, serverName)
            _ = SSL_set1_host(ssl, serverName)
        }
        return ssl
    }
}

extension Stream {
    /// Starts a TCP connection and a TLS handshake; `.connected` follows once the handshake is done.
    public static func connectTLS(loop: EventLoop, to address: SocketAddress, context: TLSClientContext,
                                  serverName: String, origin: String) -> Result<Stream, StreamConnectError> {
        guard let ssl = context.makeSSL(serverName: serverName, origin: origin) else {
            return .failure(StreamConnectError(errno: ENOMEM))
        }
        guard let bev = bufferevent_openssl_socket_new(loop.base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                       Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            SSL_free(ssl)
            return .failure(StreamConnectError(errno: ENOMEM))
        }
        // Many servers close without close_notify; treat that as an ordinary end of stream.
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        let stream = Stream(TLSTransport(bev))
        let rc = address.withSockaddr { sa, len in bufferevent_socket_connect(bev, sa, Int32(len)) }
        if rc != 0 {
            let e = errno
            stream.close()
            return .failure(StreamConnectError(errno: e == 0 ? ECONNREFUSED : e))
        }
        return .success(stream)
    }

    /// Starts a TLS handshake as a client on a connected socket (a tunnel a parent proxy opened);
    /// `.connected` follows once it is done. The socket becomes the stream's, also on failure.
    public static func startTLS(loop: EventLoop, socket fd: Int32, context: TLSClientContext,
                                serverName: String, origin: String) -> Result<Stream, StreamConnectError> {
        guard let ssl = context.makeSSL(serverName: serverName, origin: origin) else {
            Glibc.close(fd)
            return .failure(StreamConnectError(errno: ENOMEM))
        }
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                       Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            SSL_free(ssl)
            Glibc.close(fd)
            return .failure(StreamConnectError(errno: ENOMEM))
        }
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        // A tunnel's socket through a parent proxy was a plain stream's, limited (`unsentLimit`).
        SocketOptions.limitUnsent(fd, to: 0)
        return .success(Stream(TLSTransport(bev)))
    }

    /// SHA-256 (lowercase hex) of the certificate the peer presented, if any.
    public var peerCertificateSHA256: String? {
        guard let ssl = tls?.ssl, let cert = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(cert) }
        return Certificates.sha256(of: cert)
    }

    /// Why a TLS connection failed, in words (certificate verification first), if it did.
    public var tlsFailureReason: String? {
        guard let tls else { return nil }
        if let ssl = tls.ssl {
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                return "certificate verification failed: " + String(cString: X509_verify_cert_error_string(verify))
            }
        }
        let last = tls.lastOpenSSLError()
        if last != 0, let reason = ERR_reason_error_string(last) {
            return "TLS handshake failed: " + String(cString: reason)
        }
        return nil
    }
}
