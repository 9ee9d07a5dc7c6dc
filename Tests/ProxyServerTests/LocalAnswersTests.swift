import CachePolicy
import HTTPWire
import Testing
@testable import ProxyServer

struct LocalStatusRow: Sendable, CustomTestStringConvertible {
    var status: Int
    var expected: String
    var testDescription: String { "\(status): \(expected)" }
}

/// The Cache-Status of answers Larder makes itself, under the configured name.
@Suite struct LocalAnswersTests {
    static let answers = LocalAnswers(cacheName: CacheName("edge-7"))

    static let rows: [LocalStatusRow] = [
        LocalStatusRow(status: 200, expected: "edge-7; detail=local"),
        LocalStatusRow(status: 400, expected: "edge-7; detail=bad-request"),
        LocalStatusRow(status: 403, expected: "edge-7; detail=denied"),
        LocalStatusRow(status: 404, expected: "edge-7; detail=not-found"),
        LocalStatusRow(status: 405, expected: "edge-7; detail=method-not-allowed"),
        LocalStatusRow(status: 407, expected: "edge-7; detail=auth-required"),
        LocalStatusRow(status: 408, expected: "edge-7; detail=head-timeout"),
        LocalStatusRow(status: 413, expected: "edge-7; detail=body-too-large"),
        LocalStatusRow(status: 414, expected: "edge-7; detail=uri-too-long"),
        LocalStatusRow(status: 429, expected: "edge-7; detail=too-many-requests"),
        LocalStatusRow(status: 431, expected: "edge-7; detail=head-too-large"),
        LocalStatusRow(status: 501, expected: "edge-7; detail=not-implemented"),
        LocalStatusRow(status: 502, expected: "edge-7; detail=origin-error"),
        LocalStatusRow(status: 503, expected: "edge-7; detail=overloaded"),
        LocalStatusRow(status: 504, expected: "edge-7; detail=only-if-cached"),
        LocalStatusRow(status: 505, expected: "edge-7; detail=bad-request"),
    ]

    @Test("RFC9211 2.8 answers made without the origin: no fwd, a detail", arguments: rows)
    func local(_ row: LocalStatusRow) {
        #expect(String(decoding: Self.answers.local(row.status), as: UTF8.self) == row.expected)
    }

    @Test("RFC9211 2.2 errors after forwarding keep the lookup's fwd")
    func originError() {
        func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
        #expect(text(Self.answers.originError(after: CacheStatus(forward: .uriMiss, forwardStatus: 304)))
                == "edge-7; fwd=uri-miss; detail=origin-error")
        #expect(text(Self.answers.originError(after: CacheStatus(forward: .stale))) == "edge-7; fwd=stale; detail=origin-error")
        #expect(text(Self.answers.originError(after: nil)) == "edge-7; fwd=method; detail=origin-error")
        #expect(text(Self.answers.forwardedForMethod(originStatus: 204)) == "edge-7; fwd=method; fwd-status=204")
    }

    @Test("Canned answers carry the name")
    func canned() {
        let full = String(decoding: ConnectionRefusal.full.response(Self.answers), as: UTF8.self)
        #expect(full.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        #expect(full.contains("\r\nCache-Status: edge-7; detail=overloaded\r\nConnection: close\r\n\r\n"))
        let perClient = String(decoding: ConnectionRefusal.perClient.response(Self.answers), as: UTF8.self)
        #expect(perClient.contains("\r\nCache-Status: edge-7; detail=too-many-connections\r\n"))
        #expect(String(decoding: Self.answers.connectEstablished, as: UTF8.self)
                == "HTTP/1.1 200 Connection Established\r\nCache-Status: edge-7; fwd=method; detail=tunnel\r\n\r\n")
        #expect(String(decoding: Self.answers.connectIntercepted, as: UTF8.self)
                == "HTTP/1.1 200 Connection Established\r\nCache-Status: edge-7; detail=intercepted\r\n\r\n")
    }

    @Test("A local error names its Cache-Status after no-store")
    func errorHead() {
        var w = MessageWriter()
        LocalResponse.error(403, "no", keepAlive: true, cacheStatus: .bytes(Self.answers.local(403)), into: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self).contains(
            "Cache-Control: no-store\r\nCache-Status: edge-7; detail=denied\r\n\r\nno\n"))
    }
}
