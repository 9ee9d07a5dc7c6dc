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
    let keyType: CertificateKeyType
    /// Seconds a minted certificate is valid.
    let lifetime: Int
    /// Minted certificates on disk, one PEM file (certificate and key) per name; nil: memory only
    /// (an ephemeral cache writes nothing).
    let directory: String?
    private let contexts = Locked<[String: TLSServerContext]>([:])
    private let logger: Logger

    init(patterns: [HostPattern], authority: CertificateAndKey, keyType: CertificateKeyType, lifetime: Int,
         directory: String?, logger: Logger) {
        self.patterns = patterns
        self.authority = authority
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
            made = try TLSServerContext(identity)
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

/// The interception CA: the configured certificate and key, or Larder's own, generated on first
/// use under the cache directory.
enum InterceptionAuthority {
    static let certificateName = "larder-ca.pem"
    static let keyName = "larder-ca-key.pem"

    static func load(certificateFile: String?, keyFile: String?, cacheDirectory: String,
                     logger: Logger) throws(CertificateError) -> CertificateAndKey {
        if let certificateFile, let keyFile {
            return try CertificateAndKey(certificateFile: certificateFile, keyFile: keyFile)
        }
        let dir = cacheDirectory + "/ca"
        let cert = dir + "/" + certificateName
        let key = dir + "/" + keyName
        if access(cert, F_OK) == 0 {
            return try CertificateAndKey(certificateFile: cert, keyFile: key)
        }
        let made = try generate(into: dir)
        logger.notice("interception: generated a CA in \(cert); install it in the clients whose https traffic Larder may decrypt")
        return made
    }

    /// Writes a new CA certificate (0644) and key (0600) into `dir`.
    static func generate(into dir: String, keyType: CertificateKeyType = .ecP256) throws(CertificateError) -> CertificateAndKey {
        makeDirectories(dir, mode: 0o700)
        let made = try Certificates.makeAuthority(commonName: "Larder interception CA", keyType: keyType)
        guard writeFileAtomically(dir + "/" + keyName, made.keyPEM, mode: 0o600),
              writeFileAtomically(dir + "/" + certificateName, made.certificatePEM, mode: 0o644) else {
            throw CertificateError("cannot write the CA into \(dir): \(String(cString: strerror(errno)))")
        }
        return made
    }
}

/// `mkdir -p`: `dir` and any missing parents, each with `mode` (existing ones are left as they are).
func makeDirectories(_ dir: String, mode: mode_t) {
    var path = dir.hasPrefix("/") ? "" : "."
    for part in dir.split(separator: "/") {
        path += "/" + part
        if mkdir(path, mode) != 0, errno != EEXIST { return }  // the write below reports why
    }
}

/// Writes through a temporary file and a rename, so a crash never leaves half a key behind.
func writeFileAtomically(_ path: String, _ text: String, mode: mode_t) -> Bool {
    let temp = path + ".tmp"
    let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
    guard fd >= 0 else { return false }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    let synced = fsync(fd) == 0
    close(fd)
    guard written == bytes.count, synced, rename(temp, path) == 0 else {
        unlink(temp)
        return false
    }
    return true
}

/// `larder ca init`: the interception CA written where Larder looks for it.
public enum InterceptionCAFiles {
    /// Writes a new CA into `directory` (default: `cache_dir/ca`); refuses to replace one unless
    /// `replace`. Returns the certificate's path and its SHA-256 fingerprint.
    public static func create(in directory: String, keyType: CertificateKeyType, replace: Bool) throws -> (path: String, sha256: String) {
        let cert = directory + "/" + InterceptionAuthority.certificateName
        if !replace, access(cert, F_OK) == 0 {
            throw CertificateError("\(cert) exists; --force replaces it (clients that trust the old CA must be given the new one)")
        }
        let made = try InterceptionAuthority.generate(into: directory, keyType: keyType)
        return (cert, made.sha256)
    }
}
