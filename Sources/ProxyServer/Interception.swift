import EventLoop
import Glibc
import HTTPWire
import LarderConfig
import Locking
import Logging

/// Opt-in TLS interception (`tls.intercept`): which CONNECT destinations are decrypted, and the
/// certificates shown to clients for them. Each is minted on first use for the name the client
/// asked for, signed by the interception CA, and kept in memory and on disk for the next
/// connections and restarts. Shared by all workers.
final class Interception: @unchecked Sendable {
    let patterns: [HostPattern]
    let authority: CertificateAndKey
    /// The CA certificate clients must trust, for messages.
    let authorityFile: String?
    let keyType: CertificateKeyType
    /// Seconds a minted certificate is valid.
    let lifetime: Int
    /// Minted certificates on disk, one PEM file (certificate and key) per name; nil: memory only
    /// (an ephemeral cache writes nothing).
    let directory: String?
    private let contexts = Locked<[String: TLSServerContext]>([:])
    private let logger: Logger

    /// Intercepted clients may speak HTTP/2 (`http2.enabled`): the minted contexts offer `h2`.
    let offerH2: Bool

    init(patterns: [HostPattern], authority: CertificateAndKey, authorityFile: String?, keyType: CertificateKeyType,
         lifetime: Int, directory: String?, offerH2: Bool = false, logger: Logger) {
        self.patterns = patterns
        self.offerH2 = offerH2
        self.authority = authority
        self.authorityFile = authorityFile
        self.keyType = keyType
        self.lifetime = lifetime
        self.directory = directory
        self.logger = logger
        if let directory { mkdir(directory, 0o700) }
    }

    func matches(host: [UInt8]) -> Bool {
        patterns.contains { $0.matches(host) }
    }

    /// The server context presenting a certificate for `host`: from memory, from disk (when the
    /// current CA issued it and it has more than a day left), or minted now.
    func context(for host: String) -> Result<TLSServerContext, CertificateError> {
        let name = host.lowercased()
        if let known = contexts.withLock({ $0[name] }), known.identity.secondsUntilExpiry > 86_400 {
            return .success(known)
        }
        let made: TLSServerContext
        do throws(CertificateError) {
            let identity: CertificateAndKey
            if let stored = storedCertificate(for: name) { identity = stored } else { identity = try mint(for: name) }
            made = try TLSServerContext(identity, offerH2: offerH2)
        } catch {
            return .failure(error)
        }
        contexts.withLock { $0[name] = made }
        return .success(made)
    }

    private func path(for name: String) -> String? {
        // IPv6 literals have colons; nothing else outside [a-z0-9.-] reaches here (the host was parsed).
        directory.map { $0 + "/" + String(name.map { $0 == ":" ? "_" : $0 }) + ".pem" }
    }

    private func storedCertificate(for name: String) -> CertificateAndKey? {
        guard let file = path(for: name), let text = ConfigLoader.readFile(file), let stored = try? CertificateAndKey(pem: text),
              stored.isIssued(by: authority), stored.secondsUntilExpiry > 86_400 else { return nil }
        return stored
    }

    private func mint(for name: String) throws(CertificateError) -> CertificateAndKey {
        let issued = try Certificates.issue(for: name, by: authority, keyType: keyType, lifetime: lifetime)
        if let file = path(for: name), !writeFileAtomically(file, issued.certificatePEM + issued.keyPEM, mode: 0o600) {
            logger.warning("could not store the certificate for \(name) in \(file): \(String(cString: strerror(errno)))")
        }
        logger.info("interception: minted a certificate for \(name)")
        return issued
    }
}
