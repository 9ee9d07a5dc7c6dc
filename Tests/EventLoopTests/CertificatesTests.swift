import Testing
@testable import EventLoop

/// The CA and leaf certificates interception makes, checked through their own API (the
/// integration suite checks them with OpenSSL clients and curl).
@Suite struct CertificatesTests {
    @Test(arguments: CertificateKeyType.allCases)
    func aMintedCertificateIsSignedByItsAuthorityAndLivesAsLongAsAsked(_ keyType: CertificateKeyType) throws {
        let ca = try Certificates.makeAuthority(commonName: "Test CA", keyType: keyType)
        let other = try Certificates.makeAuthority(commonName: "Other CA")
        #expect(ca.isIssued(by: ca))
        #expect(ca.secondsUntilExpiry > 9 * 365 * 86_400)
        for name in ["localhost", "127.0.0.1", "::1", "pkg.example.com"] {
            let leaf = try Certificates.issue(for: name, by: ca, keyType: keyType, lifetime: 86_400)
            #expect(leaf.isIssued(by: ca))
            #expect(!leaf.isIssued(by: other))
            #expect(abs(leaf.secondsUntilExpiry - 86_400) < 60)
            _ = try TLSServerContext(leaf)
        }
    }

    @Test func pemRoundTripKeepsTheCertificateAndKey() throws {
        let ca = try Certificates.makeAuthority(commonName: "Test CA")
        let leaf = try Certificates.issue(for: "example.org", by: ca, keyType: .ecP256, lifetime: 3_600)
        let back = try CertificateAndKey(pem: leaf.certificatePEM + leaf.keyPEM)
        #expect(back.sha256 == leaf.sha256)
        #expect(back.sha256.count == 64)
        #expect(back.keyPEM == leaf.keyPEM)
        #expect(throws: CertificateError.self) { try CertificateAndKey(pem: leaf.certificatePEM) }
        #expect(throws: CertificateError.self) { try CertificateAndKey(pem: "not pem") }
    }

    @Test func twoCertificatesForOneNameDiffer() throws {
        let ca = try Certificates.makeAuthority(commonName: "Test CA")
        let a = try Certificates.issue(for: "example.org", by: ca, keyType: .ecP256, lifetime: 3_600)
        let b = try Certificates.issue(for: "example.org", by: ca, keyType: .ecP256, lifetime: 3_600)
        #expect(a.sha256 != b.sha256)   // random serial numbers and keys
    }
}
