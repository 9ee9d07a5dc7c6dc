import EventLoop
import Locking

/// Larder's own certificate for its HTTPS listeners and admin endpoint (`tls.certificate_file`,
/// `tls.key_file`). Read again on every reload, so a renewed certificate is served to new
/// connections without a restart; a reload that cannot read it keeps the old one.
final class ServerIdentity: Sendable {
    private let context: Locked<TLSServerContext>

    init(certificateFile: String, keyFile: String) throws(CertificateError) {
        context = Locked(try TLSServerContext(certificateFile: certificateFile, keyFile: keyFile))
    }

    /// What a new connection's handshake uses.
    var current: TLSServerContext { context.withLock { $0 } }

    func reload(certificateFile: String, keyFile: String) throws(CertificateError) {
        let fresh = try TLSServerContext(certificateFile: certificateFile, keyFile: keyFile)
        context.withLock { $0 = fresh }
    }
}
