@preconcurrency import CLibevent
import COpenSSL
import Glibc

/// OpenSSL server settings: Larder's own certificate for its HTTPS listener and admin endpoint, or
/// a certificate minted for an intercepted destination. TLS 1.2 and 1.3, ALPN `h2` (where the
/// context offers it) and `http/1.1`.
public final class TLSServerContext: @unchecked Sendable {
    let ctx: OpaquePointer
    /// The certificate served (kept for its lifetime checks).
    public let identity: CertificateAndKey

    /// `offerH2`: ALPN picks `h2` when the client offers it (the proxy's listeners, not the admin
    /// endpoint, which speaks HTTP/1.1 only).
    public init(_ identity: CertificateAndKey, offerH2: Bool = false) throws(CertificateError) {
        guard let c = SSL_CTX_new(TLS_server_method()) else { throw CertificateError("SSL_CTX_new failed") }
        ctx = c
        self.identity = identity
        _ = larder_SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION)
        _ = SSL_CTX_set_options(c, larder_SSL_OP_NO_COMPRESSION | larder_SSL_OP_NO_RENEGOTIATION)
        guard SSL_CTX_use_certificate(c, identity.certificate) == 1,
              SSL_CTX_use_PrivateKey(c, identity.key) == 1 else {
            throw CertificateError("cannot use the certificate and key")
        }
        // The callback's argument only says whether h2 may be chosen: any non-nil pointer.
        let h2: UnsafeMutableRawPointer? = offerH2 ? UnsafeMutableRawPointer(bitPattern: 1) : nil
        SSL_CTX_set_alpn_select_cb(c, TLSServerContext.selectALPN, h2)
    }

    /// The certificate and key files of the configuration, checked to belong together. Further
    /// certificates in the certificate file are sent as its chain.
    public convenience init(certificateFile: String, keyFile: String, offerH2: Bool = false) throws(CertificateError) {
        let identity = try CertificateAndKey(certificateFile: certificateFile, keyFile: keyFile)
        try self.init(identity, offerH2: offerH2)
        guard SSL_CTX_use_certificate_chain_file(ctx, certificateFile) == 1 else {
            throw CertificateError("cannot read the certificate chain in \(certificateFile)")
        }
    }

    deinit { SSL_CTX_free(ctx) }

    /// Picks `h2` when allowed and offered, else `http/1.1` when offered; otherwise no ALPN (the
    /// client decides).
    private static let selectALPN: @convention(c) (OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
                                                   UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?, UInt32,
                                                   UnsafeMutableRawPointer?) -> Int32 = { _, out, outlen, offered, count, h2 in
        guard let offered, let out, let outlen else { return SSL_TLSEXT_ERR_NOACK }
        var http11: Int?
        var i = 0
        let n = Int(count)
        while i < n {
            let len = Int(offered[i])
            guard i + 1 + len <= n else { break }
            let name = UnsafeBufferPointer(start: offered + i + 1, count: len)
            if h2 != nil, len == 2, name.elementsEqual("h2".utf8) {
                out.pointee = offered + i + 1
                outlen.pointee = 2
                return SSL_TLSEXT_ERR_OK
            }
            if len == 8, http11 == nil, name.elementsEqual("http/1.1".utf8) { http11 = i + 1 }
            i += 1 + len
        }
        guard let http11 else { return SSL_TLSEXT_ERR_NOACK }
        out.pointee = offered + http11
        outlen.pointee = 8
        return SSL_TLSEXT_ERR_OK
    }
}

extension Stream {
    /// Wraps an accepted socket in a server-side TLS handshake with `context`; `.connected`
    /// reports the handshake done, an error event its failure (`tlsFailureReason` says why).
    public static func acceptTLS(loop: EventLoop, socket fd: Int32, context: TLSServerContext) -> Stream? {
        guard let ssl = SSL_new(context.ctx) else {
            Glibc.close(fd)
            return nil
        }
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                       Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            SSL_free(ssl)
            Glibc.close(fd)
            return nil
        }
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        SocketOptions.setNoDelay(fd)
        SocketOptions.keepUrgentDataInline(fd)
        // An intercepted client's socket was a plain stream's, limited (`Stream.unsentLimit`).
        SocketOptions.limitUnsent(fd, to: 0)
        return Stream(TLSTransport(bev))
    }
}
