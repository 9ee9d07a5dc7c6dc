import Testing
@testable import ProxyServer

/// A stored head is written without its final empty line (the answer's own fields follow it);
/// a head without one is written whole.
@Suite struct CachedResponseWriterTests {
    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\nA: b\r\n\r\n", "HTTP/1.1 200 OK\r\nA: b\r\n"),
        ("HTTP/1.1 200 OK\r\nA: b\r\n", "HTTP/1.1 200 OK\r\nA: b\r\n"),
        ("\r\n\r\n", "\r\n"),
        ("\r\n\r", "\r\n\r"),
        ("\n\r\n", "\n\r\n"),
        ("A\r\n\n\n", "A\r\n\n\n"),
        ("A\r\r\r\n", "A\r\r\r\n"),
        ("", ""),
    ])
    func aStoredHeadLosesOnlyAFinalEmptyLine(_ head: String, _ written: String) {
        #expect(Array(CachedResponseWriter.withoutBlankLine(Array(head.utf8))) == Array(written.utf8))
    }
}
