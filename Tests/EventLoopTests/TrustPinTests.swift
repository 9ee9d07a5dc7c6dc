import Testing
@testable import EventLoop

/// `tls.trust` pins: the first entry whose host pattern matches gives the accepted fingerprint.
@Suite struct TrustPinTests {
    @Test func theFirstMatchingPatternDecides() throws {
        let a = String(repeating: "a", count: 64)
        let b = String(repeating: "b", count: 64)
        let c = String(repeating: "c", count: 64)
        let context = try TLSClientContext(pins: [("intranet.example", a), ("*.lab.example", b), ("*", c)])
        #expect(context.pinnedFingerprint(for: "intranet.example") == a)
        #expect(context.pinnedFingerprint(for: "Intranet.Example") == a)
        #expect(context.pinnedFingerprint(for: "box.lab.example") == b)
        #expect(context.pinnedFingerprint(for: "lab.example") == c)
        #expect(context.pinnedFingerprint(for: "anything.test") == c)
        let narrow = try TLSClientContext(pins: [("*.lab.example", b)])
        #expect(narrow.pinnedFingerprint(for: "lab.example") == nil)
        #expect(narrow.pinnedFingerprint(for: "box.lab.example.") == b)
    }
}
