import SessionClient
import Testing
@testable import ProxyServer

/// The request time in an access log line: seconds with exactly six decimals, as nginx writes it.
@Suite struct AccessLogFormatTests {
    @Test("seconds with microseconds", arguments: [
        (0.0, "0.000000"), (0.000123, "0.000123"), (0.1, "0.100000"), (1.0, "1.000000"),
        (9.9999996, "10.000000"), (12.5, "12.500000"), (123_456.000001, "123456.000001"), (-3.0, "0.000000"),
    ])
    func seconds(_ value: Double, _ expected: String) {
        var bytes: [UInt8] = []
        AccessLogBuffer.appendSeconds(value, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
    }

    /// An intercepted request's origin-form target is logged after the URL it is relative to.
    @Test("the https:// prefix of an intercepted request's target", arguments: [
        ("pypi.org", 443, "https://pypi.org"), ("pypi.org", 8443, "https://pypi.org:8443"),
        ("127.0.0.1", 443, "https://127.0.0.1"), ("::1", 443, "https://[::1]"), ("fd00::5", 9443, "https://[fd00::5]:9443"),
    ])
    func urlPrefix(_ host: String, _ port: Int, _ expected: String) {
        let prefix = AccessLogBuffer.urlPrefix(OriginKey(scheme: .https, host: host, port: port))
        #expect(String(decoding: prefix, as: UTF8.self) == expected)
    }
}
