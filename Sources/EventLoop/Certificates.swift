import COpenSSL
import Glibc

/// Key types for certificates Larder makes.
public enum CertificateKeyType: String, Sendable, CaseIterable {
    case ecP256 = "ec-p256"
    case rsa2048 = "rsa-2048"
}

public struct CertificateError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ what: String) {
        // The deepest OpenSSL reason, when there is one, says more than our own words alone.
        var code = ERR_get_error()
        var last: UInt = 0
        while code != 0 { last = code; code = ERR_get_error() }
        if last != 0, let reason = ERR_reason_error_string(last) {
            description = what + ": " + String(cString: reason)
        } else {
            description = what
        }
    }
}

/// A certificate and its private key, owned (freed with this object).
public final class CertificateAndKey: @unchecked Sendable {
    let certificate: OpaquePointer
    let key: OpaquePointer

    init(certificate: OpaquePointer, key: OpaquePointer) {
        self.certificate = certificate
        self.key = key
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }

    /// Reads a PEM certificate (the first in the file) and a PEM private key, and checks they match.
    public convenience init(certificateFile: String, keyFile: String) throws(CertificateError) {
        guard let cert = Certificates.readCertificate(file: certificateFile) else {
            throw CertificateError("cannot read a PEM certificate from \(certificateFile)")
        }
        guard let key = Certificates.readKey(file: keyFile) else {
            X509_free(cert)
            throw CertificateError("cannot read a PEM private key from \(keyFile)")
        }
        guard X509_check_private_key(cert, key) == 1 else {
            X509_free(cert)
            EVP_PKEY_free(key)
            throw CertificateError("the key in \(keyFile) does not belong to the certificate in \(certificateFile)")
        }
        self.init(certificate: cert, key: key)
    }

    /// Parses PEM text holding a certificate and a key (either order).
    public convenience init(pem: String) throws(CertificateError) {
        guard let cert = Certificates.withMemoryBIO(pem, { PEM_read_bio_X509($0, nil, nil, nil) }) else {
            throw CertificateError("no PEM certificate")
        }
        guard let key = Certificates.withMemoryBIO(pem, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else {
            X509_free(cert)
            throw CertificateError("no PEM private key")
        }
        self.init(certificate: cert, key: key)
    }

    public var certificatePEM: String { Certificates.pem { PEM_write_bio_X509($0, certificate) } }
    public var keyPEM: String { Certificates.pem { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) } }

    /// Seconds until the certificate expires (negative once it has).
    public var secondsUntilExpiry: Int {
        var days: Int32 = 0
        var seconds: Int32 = 0
        guard ASN1_TIME_diff(&days, &seconds, nil, X509_get0_notAfter(certificate)) == 1 else { return -1 }
        return Int(days) * 86_400 + Int(seconds)
    }

    /// Whether `issuer` signed this certificate.
    public func isIssued(by issuer: CertificateAndKey) -> Bool {
        X509_verify(certificate, issuer.key) == 1
    }

    /// SHA-256 of the DER certificate, as lowercase hex.
    public var sha256: String { Certificates.sha256(of: certificate) }
}

/// Making certificates: a CA for interception (`larder ca init`), and leaf certificates it signs
/// for the names clients ask for.
public enum Certificates {
    /// A new self-signed CA certificate: CA:TRUE, keyCertSign and cRLSign, `years` of validity.
    public static func makeAuthority(commonName: String, keyType: CertificateKeyType = .ecP256,
                                     years: Int = 10) throws(CertificateError) -> CertificateAndKey {
        let key = try generateKey(keyType)
        guard let cert = X509_new() else {
            EVP_PKEY_free(key)
            throw CertificateError("X509_new failed")
        }
        let made = CertificateAndKey(certificate: cert, key: key)
        try fill(cert, subject: commonName, publicKey: key, notBefore: -3_600, lifetime: years * 365 * 86_400)
        guard X509_set_issuer_name(cert, X509_get_subject_name(cert)) == 1 else { throw CertificateError("issuer name") }
        try addExtensions(cert, issuer: cert, [
            (NID_basic_constraints, "critical,CA:TRUE"),
            (NID_key_usage, "critical,keyCertSign,cRLSign"),
            (NID_subject_key_identifier, "hash"),
        ])
        guard X509_sign(cert, key, EVP_sha256()) > 0 else { throw CertificateError("cannot sign the CA certificate") }
        return made
    }

    /// A leaf certificate for `name` (a DNS name or an IP address, which becomes its only subject
    /// alternative name), signed by `authority`.
    public static func issue(for name: String, by authority: CertificateAndKey, keyType: CertificateKeyType,
                             lifetime: Int) throws(CertificateError) -> CertificateAndKey {
        let key = try generateKey(keyType)
        guard let cert = X509_new() else {
            EVP_PKEY_free(key)
            throw CertificateError("X509_new failed")
        }
        let made = CertificateAndKey(certificate: cert, key: key)
        // Backdated an hour for clients whose clocks lag; a subject CN for old clients, the SAN for all.
        try fill(cert, subject: String(name.prefix(64)), publicKey: key, notBefore: -3_600, lifetime: lifetime)
        guard X509_set_issuer_name(cert, X509_get_subject_name(authority.certificate)) == 1 else {
            throw CertificateError("issuer name")
        }
        let isAddress = name.contains(":") || name.allSatisfy { $0 == "." || $0.isNumber }
        try addExtensions(cert, issuer: authority.certificate, [
            (NID_subject_alt_name, (isAddress ? "IP:" : "DNS:") + name),
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature,keyEncipherment"),
            (NID_ext_key_usage, "serverAuth"),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid"),
        ])
        guard X509_sign(cert, authority.key, EVP_sha256()) > 0 else {
            throw CertificateError("cannot sign the certificate for \(name)")
        }
        return made
    }

    /// SHA-256 of a DER certificate, lowercase hex without separators.
    static func sha256(of cert: OpaquePointer) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        guard X509_digest(cert, EVP_sha256(), &digest, &length) == 1 else { return "" }
        return hex(digest.prefix(Int(length)))
    }

    static func hex<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: OpenSSL plumbing

    private static func generateKey(_ type: CertificateKeyType) throws(CertificateError) -> OpaquePointer {
        let algorithm = type == .ecP256 ? "EC" : "RSA"
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw CertificateError("no \(algorithm) key support")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw CertificateError("key generation") }
        switch type {
        case .ecP256:
            guard EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1 else { throw CertificateError("curve P-256") }
        case .rsa2048:
            guard EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) == 1 else { throw CertificateError("RSA 2048") }
        }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(ctx, &key) == 1, let key else { throw CertificateError("key generation") }
        return key
    }

    private static func fill(_ cert: OpaquePointer, subject: String, publicKey: OpaquePointer, notBefore: Int,
                             lifetime: Int) throws(CertificateError) {
        guard X509_set_version(cert, 2) == 1 else { throw CertificateError("version") }
        // 127 random bits: positive, unique enough that no two issued certificates collide.
        guard let serial = BN_new() else { throw CertificateError("BN_new") }
        defer { BN_free(serial) }
        guard BN_rand(serial, 127, -1, 0) == 1, BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert)) != nil else {
            throw CertificateError("serial number")
        }
        guard X509_gmtime_adj(X509_getm_notBefore(cert), notBefore) != nil,
              X509_gmtime_adj(X509_getm_notAfter(cert), lifetime) != nil else {
            throw CertificateError("validity")
        }
        guard X509_set_pubkey(cert, publicKey) == 1 else { throw CertificateError("public key") }
        let name = X509_get_subject_name(cert)
        let added = Array(subject.utf8).withUnsafeBufferPointer { p in
            X509_NAME_add_entry_by_txt(name, "CN", larder_MBSTRING_ASC, p.baseAddress, Int32(p.count), -1, 0)
        }
        guard added == 1 else { throw CertificateError("subject name \(subject)") }
    }

    private static func addExtensions(_ cert: OpaquePointer, issuer: OpaquePointer,
                                      _ extensions: [(Int32, String)]) throws(CertificateError) {
        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuer, cert, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &ctx, nid, value) else {
                throw CertificateError("extension \(value)")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(cert, ext, -1) == 1 else { throw CertificateError("extension \(value)") }
        }
    }

    static func readCertificate(file: String) -> OpaquePointer? {
        guard let bio = BIO_new_file(file, "r") else { return nil }
        defer { BIO_free(bio) }
        return PEM_read_bio_X509(bio, nil, nil, nil)
    }

    static func readKey(file: String) -> OpaquePointer? {
        guard let bio = BIO_new_file(file, "r") else { return nil }
        defer { BIO_free(bio) }
        return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
    }

    static func withMemoryBIO<R>(_ text: String, _ body: (OpaquePointer) -> R?) -> R? {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBytes { raw -> R? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }

    static func pem(_ write: (OpaquePointer) -> Int32) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { return "" }
        var data: UnsafeMutablePointer<CChar>?
        let n = larder_BIO_get_mem_data(bio, &data)
        guard n > 0, let data else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: n), as: UTF8.self)
    }
}
