import EventLoop
import Glibc
import LarderConfig
import Logging

/// Which of the CA's two files a directory holds.
enum CAFilesPresence: Equatable, Sendable {
    case none, both, certificateOnly, keyOnly
}

/// What start-up does with Larder's own interception CA, from what its directory
/// (`tls.intercept_ca_dir`) and the place earlier versions used (`cache_dir/ca`) hold. A new CA is
/// made only when neither holds any part of one: clients trust the CA, so it is never replaced by
/// itself (only `larder ca init --force` does that).
enum OwnCAPlan: Equatable, Sendable {
    /// Use the CA directory's; `legacyToo`: `cache_dir/ca` holds files as well (a migration cut
    /// short, or another CA), to be settled after the load.
    case load(legacyToo: Bool)
    /// Copy `cache_dir/ca`'s CA into the CA directory (the copy there is kept, with a note).
    case migrate
    /// Nothing anywhere: make one.
    case generate
    /// Half a CA: refuse to start, saying what is missing where.
    case refuse(String)

    static func decide(current: CAFilesPresence, legacy: CAFilesPresence, directory: String,
                       legacyDirectory: String) -> OwnCAPlan {
        switch current {
        case .both: return .load(legacyToo: legacy != .none)
        case .certificateOnly, .keyOnly: return .refuse(halfCA(current, in: directory))
        case .none: break
        }
        switch legacy {
        case .both: return .migrate
        case .none: return .generate
        case .certificateOnly, .keyOnly: return .refuse(halfCA(legacy, in: legacyDirectory))
        }
    }

    private static func halfCA(_ presence: CAFilesPresence, in directory: String) -> String {
        let (there, missing) = presence == .certificateOnly
            ? (InterceptionAuthority.certificateName, InterceptionAuthority.keyName)
            : (InterceptionAuthority.keyName, InterceptionAuthority.certificateName)
        return "\(directory) holds \(there) without \(missing)"
    }
}

/// The interception CA: the configured certificate and key, or Larder's own in `tls.intercept_ca_dir`.
enum InterceptionAuthority {
    static let certificateName = "larder-ca.pem"
    static let keyName = "larder-ca-key.pem"
    /// Left in `cache_dir/ca` by the move, saying where the CA is now.
    static let movedNoteName = "MOVED.txt"
    static let neverReplaced = "; Larder does not replace its CA by itself, as clients trust it: restore the files, "
        + "or make a new CA with `larder ca init --force` and give it to the clients"

    /// `legacyDirectory`: where earlier versions kept Larder's own CA (`cache_dir/ca`), moved from
    /// there into `directory`; nil: not looked at (an ephemeral cache's directory is never touched).
    static func load(certificateFile: String?, keyFile: String?, directory: String, legacyDirectory: String?,
                     logger: Logger) throws(CertificateError) -> CertificateAndKey {
        if let certificateFile, let keyFile {
            return try CertificateAndKey(certificateFile: certificateFile, keyFile: keyFile)
        }
        let current = try presence(in: directory)
        var legacy = CAFilesPresence.none
        if let legacyDirectory { legacy = try presence(in: legacyDirectory) }
        let cert = absolutePath(directory + "/" + certificateName)
        switch OwnCAPlan.decide(current: current, legacy: legacy, directory: directory,
                                legacyDirectory: legacyDirectory ?? "") {
        case .refuse(let why):
            throw CertificateError(why + neverReplaced)
        case .load(let legacyToo):
            let ca = try loadExisting(directory)
            logger.info("interception: CA \(cert), SHA-256 \(ca.sha256)")
            if legacyToo, let legacyDirectory { settleLegacy(legacyDirectory, using: ca, in: directory, logger: logger) }
            return ca
        case .migrate:
            // Copied, not moved: the copy left in cache_dir/ca is read again should the CA directory
            // be lost (a container re-created without a volume for it), rather than a new CA made.
            let from = legacyDirectory ?? ""
            let ca = try loadExisting(from)
            try copyCA(from: from, to: directory)
            let copied = try loadExisting(directory)
            guard copied.sha256 == ca.sha256 else { throw CertificateError("the CA copied into \(directory) differs from \(from)'s") }
            let old = absolutePath(from + "/" + certificateName)
            _ = writeFileAtomically(from + "/" + movedNoteName, "Larder keeps its interception CA in \(cert) now "
                                    + "(tls.intercept_ca_dir), apart from the cache. The files here are no longer read while "
                                    + "that one exists: remove them once it is kept (in a container, on a volume of its own).\n",
                                    mode: 0o644)
            logger.notice("interception: copied the CA from \(old) to \(cert) (SHA-256 \(ca.sha256)), where it is kept apart from the cache; clients keep trusting it. The copy in the cache directory is no longer read: remove it once \(absolutePath(directory)) is kept")
            return copied
        case .generate:
            let made = try generate(into: directory)
            logger.notice("interception: generated a CA in \(cert) (SHA-256 \(made.sha256)); install it in the clients whose https traffic Larder may decrypt")
            return made
        }
    }

    /// Which CA files `directory` holds; anything but "there" or "not there" (no permission, an
    /// unreadable mount) is an error rather than a reason to make a new CA.
    static func presence(in directory: String) throws(CertificateError) -> CAFilesPresence {
        func exists(_ name: String) throws(CertificateError) -> Bool {
            let path = directory + "/" + name
            if access(path, F_OK) == 0 { return true }
            if errno == ENOENT { return false }
            throw CertificateError("cannot look for \(path): \(String(cString: strerror(errno)))")
        }
        switch (try exists(certificateName), try exists(keyName)) {
        case (true, true): return .both
        case (true, false): return .certificateOnly
        case (false, true): return .keyOnly
        case (false, false): return .none
        }
    }

    private static func loadExisting(_ directory: String) throws(CertificateError) -> CertificateAndKey {
        do throws(CertificateError) {
            return try CertificateAndKey(certificateFile: directory + "/" + certificateName,
                                         keyFile: directory + "/" + keyName)
        } catch {
            throw CertificateError("the CA in \(directory) cannot be used: \(error)" + neverReplaced)
        }
    }

    /// The CA's files copied as they are (certificate 0644, key 0600) into `directory`.
    private static func copyCA(from: String, to directory: String) throws(CertificateError) {
        makeDirectories(directory, mode: 0o755)
        for (name, mode) in [(keyName, mode_t(0o600)), (certificateName, mode_t(0o644))] {
            guard let text = ConfigLoader.readFile(from + "/" + name),
                  writeFileAtomically(directory + "/" + name, text, mode: mode) else {
                throw CertificateError("cannot copy \(from)/\(name) into \(directory): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// `cache_dir/ca` next to a CA directory that has one: the same CA is the copy left by the move
    /// (noted, kept); another is not in use, and said so.
    private static func settleLegacy(_ legacy: String, using ca: CertificateAndKey, in directory: String, logger: Logger) {
        if let old = try? CertificateAndKey(certificateFile: legacy + "/" + certificateName, keyFile: legacy + "/" + keyName),
           old.sha256 == ca.sha256 {
            logger.info("interception: \(absolutePath(legacy)) still holds the copy of this CA left by its move; it is not read while \(absolutePath(directory)) has the CA")
            return
        }
        logger.warning("interception: \(absolutePath(legacy)) holds a CA (or part of one) that is not in use; Larder's is in \(absolutePath(directory)). Remove it, or move it there to use it")
    }

    /// Removes the CA's files and, when nothing else is in it, the directory; returns what stayed.
    static func removeCA(in directory: String) -> [String] {
        var stayed: [String] = []
        for name in [keyName, certificateName, movedNoteName] {
            let path = directory + "/" + name
            if unlink(path) != 0, errno != ENOENT { stayed.append("\(path) (\(String(cString: strerror(errno))))") }
        }
        rmdir(directory)  // only if empty
        return stayed
    }

    /// Writes a new CA certificate (0644) and key (0600) into `dir` (0755 when made here, so
    /// clients can read the certificate).
    static func generate(into dir: String, keyType: CertificateKeyType = .ecP256) throws(CertificateError) -> CertificateAndKey {
        makeDirectories(dir, mode: 0o755)
        let made = try Certificates.makeAuthority(commonName: "Larder interception CA", keyType: keyType)
        guard writeFileAtomically(dir + "/" + keyName, made.keyPEM, mode: 0o600),
              writeFileAtomically(dir + "/" + certificateName, made.certificatePEM, mode: 0o644) else {
            throw CertificateError("cannot write the CA into \(dir): \(String(cString: strerror(errno)))")
        }
        return made
    }
}

/// `mkdir -p`: `dir` and any missing parents, each made with exactly `mode` (whatever the umask);
/// existing ones are left as they are.
func makeDirectories(_ dir: String, mode: mode_t) {
    var path = dir.hasPrefix("/") ? "" : "."
    for part in dir.split(separator: "/") {
        path += "/" + part
        if mkdir(path, mode) == 0 {
            chmod(path, mode)
        } else if errno != EEXIST {
            return  // the write below reports why
        }
    }
}

/// Writes through a temporary file and a rename, so a crash never leaves half a key behind; the file
/// gets exactly `mode`, whatever the umask.
func writeFileAtomically(_ path: String, _ text: String, mode: mode_t) -> Bool {
    let temp = path + ".tmp"
    let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
    guard fd >= 0 else { return false }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    let moded = fchmod(fd, mode) == 0
    let synced = fsync(fd) == 0
    close(fd)
    guard written == bytes.count, moded, synced, rename(temp, path) == 0 else {
        let saved = errno
        unlink(temp)
        errno = saved
        return false
    }
    return true
}

/// `larder ca init`: the interception CA written where Larder looks for it.
public enum InterceptionCAFiles {
    /// Writes a new CA into `directory`; refuses to replace one (or part of one) unless `replace`.
    /// `legacyDirectory`: where earlier versions kept Larder's CA (`cache_dir/ca`); one there would
    /// be copied into `directory` at the next start, so it counts as existing, and `replace` removes it.
    /// Returns the certificate's path, its SHA-256 fingerprint and what `replace` removed.
    public static func create(in directory: String, legacyDirectory: String?, keyType: CertificateKeyType,
                              replace: Bool) throws -> (path: String, sha256: String, removed: String?) {
        let cert = directory + "/" + InterceptionAuthority.certificateName
        let legacy = try legacyDirectory.map { try InterceptionAuthority.presence(in: $0) } ?? CAFilesPresence.none
        if !replace {
            if try InterceptionAuthority.presence(in: directory) != .none {
                throw CertificateError("\(directory) holds a CA; --force replaces it (clients that trust the old CA "
                                       + "must be given the new one)")
            }
            if let legacyDirectory, legacy != .none {
                throw CertificateError("\(legacyDirectory) holds the CA earlier versions kept in the cache directory, which "
                                       + "Larder copies to \(directory) at its next start; --force makes a new one instead "
                                       + "(and removes that one)")
            }
        }
        let made = try InterceptionAuthority.generate(into: directory, keyType: keyType)
        var removed: String?
        if let legacyDirectory, legacy != .none {
            _ = InterceptionAuthority.removeCA(in: legacyDirectory)
            removed = legacyDirectory
        }
        return (cert, made.sha256, removed)
    }
}
