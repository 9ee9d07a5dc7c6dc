import EventLoop
import Locking

/// Larder's own certificate for its HTTPS listeners and admin endpoint (`tls.certificate_file`,
/// `tls.key_file`). Read again on every reload, so a renewed certificate is served to new
/// connections without a restart; a reload that cannot read it keeps the old one.
final class ServerIdentity: Sendable {
    /// The proxy's listeners' (offering `h2` when HTTP/2 is on) and the admin endpoint's.
    private let contexts: Locked<(proxy: TLSServerContext, admin: TLSServerContext)>
    private let offerH2: Bool

    init(certificateFile: String, keyFile: String, offerH2: Bool) throws(CertificateError) {
        self.offerH2 = offerH2
        contexts = Locked(try ServerIdentity.make(certificateFile, keyFile, offerH2: offerH2))
    }

    private static func make(_ certificateFile: String, _ keyFile: String,
                             offerH2: Bool) throws(CertificateError) -> (proxy: TLSServerContext, admin: TLSServerContext) {
        let admin = try TLSServerContext(certificateFile: certificateFile, keyFile: keyFile)
        let proxy = offerH2 ? try TLSServerContext(certificateFile: certificateFile, keyFile: keyFile, offerH2: true) : admin
        return (proxy, admin)
    }

    /// What a new proxy connection's handshake uses.
    var current: TLSServerContext { contexts.withLock { $0.proxy } }

    /// What a new admin connection's handshake uses (HTTP/1.1 only).
    var admin: TLSServerContext { contexts.withLock { $0.admin } }

    func reload(certificateFile: String, keyFile: String) throws(CertificateError) {
        let fresh = try ServerIdentity.make(certificateFile, keyFile, offerH2: offerH2)
        contexts.withLock { $0 = fresh }
    }
}
