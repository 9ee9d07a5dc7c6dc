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
}
