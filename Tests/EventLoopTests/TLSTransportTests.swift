import Glibc
import Testing
@testable import EventLoop

/// The TLS transport: a server stream (`acceptTLS`) and a client stream (`startTLS`) on the two
/// ends of one connection, with a leaf certificate for "localhost" minted by a test authority.
@Suite struct TLSTransportTests {
    /// Both ends of a finished handshake, and what each reported.
    struct Pair {
        let loop: EventLoop
        let server: Stream
        let client: Stream
        let serverEvents: StreamRecorder
        let clientEvents: StreamRecorder
        let leaf: CertificateAndKey

        func close() {
            server.close()
            client.close()
        }
    }

    /// The authority's certificate in a file, as `TLSClientContext` takes it.
    private func caFile(_ authority: CertificateAndKey) -> String {
        var template = Array("/tmp/larder-test-ca-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        precondition(fd >= 0)
        let pem = Array(authority.certificatePEM.utf8)
        precondition(write(fd, pem, pem.count) == pem.count)
        close(fd)
        return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Runs the handshake over `sockets` (server end, client end); nil when it did not finish.
    private func handshake(over sockets: (Int32, Int32), trusting: CertificateAndKey? = nil) throws -> Pair? {
        let loop = EventLoop()
        let authority = try Certificates.makeAuthority(commonName: "Stream Test CA")
        let leaf = try Certificates.issue(for: "localhost", by: authority, keyType: .ecP256, lifetime: 3_600)
        let path = caFile(trusting ?? authority)
        defer { unlink(path) }
        let clientContext = try TLSClientContext(caFile: path)
        guard let server = Stream.acceptTLS(loop: loop, socket: sockets.0, context: try TLSServerContext(leaf)) else {
            Issue.record("acceptTLS failed")
            return nil
        }
        guard case .success(let client) = Stream.startTLS(loop: loop, socket: sockets.1, context: clientContext,
                                                          serverName: "localhost", origin: "localhost:443") else {
            Issue.record("startTLS failed")
            return nil
        }
        let serverEvents = StreamRecorder(loop: loop)
        let clientEvents = StreamRecorder(loop: loop)
        server.delegate = serverEvents
        client.delegate = clientEvents
        let done = { !serverEvents.events.isEmpty && !clientEvents.events.isEmpty }
        serverEvents.until = { _ in done() }
        clientEvents.until = { _ in done() }
        runLoop(loop, atMost: 5)
        serverEvents.until = { _ in false }
        clientEvents.until = { _ in false }
        return Pair(loop: loop, server: server, client: client, serverEvents: serverEvents, clientEvents: clientEvents,
                    leaf: leaf)
    }

    @Test func theHandshakeCompletesAndBytesCrossBothWays() throws {
        guard let pair = try handshake(over: socketPair()) else { return }
        defer { pair.close() }
        #expect(pair.serverEvents.events == [.connected])
        #expect(pair.clientEvents.events == [.connected])
        #expect(pair.server.isTLS && pair.client.isTLS)
        #expect(pair.client.peerCertificateSHA256 == pair.leaf.sha256)
        #expect(pair.client.tlsFailureReason == nil)

        pair.server.enableReading()
        pair.client.enableReading()
        pair.serverEvents.until = { $0.received.count == 7 }
        pair.client.output.append("request")
        runLoop(pair.loop, atMost: 2)
        #expect(pair.serverEvents.received == Array("request".utf8))
        #expect(pair.clientEvents.drained > 0)

        let body = [UInt8](repeating: 9, count: 700_000)   // several TLS records and slices
        pair.serverEvents.until = { _ in false }
        pair.clientEvents.until = { $0.received.count == body.count }
        pair.server.output.append(body)
        runLoop(pair.loop, atMost: 5)
        #expect(pair.clientEvents.received.count == body.count)
        #expect(pair.clientEvents.received.allSatisfy { $0 == 9 })
        #expect(pair.server.output.count == 0)
    }

    /// Each end counts the bytes on the wire: the payload plus records and handshake, what one
    /// end wrote is what the other read, and the counts outlive the stream. A plain stream has none.
    @Test func theBytesOnTheWireAreCountedAndOutliveTheStream() throws {
        guard let pair = try handshake(over: socketPair()) else { return }
        defer { pair.close() }
        pair.server.enableReading()
        pair.serverEvents.until = { $0.received.count == 50_000 }
        pair.client.output.append([UInt8](repeating: 3, count: 50_000))
        runLoop(pair.loop, atMost: 5)
        #expect(pair.serverEvents.received.count == 50_000)
        let server = try #require(pair.server.tlsBytesCarried)
        let client = try #require(pair.client.tlsBytesCarried)
        #expect(server.fromPeer > 50_000 && server.fromPeer < 52_000)
        #expect(server.fromPeer == client.toPeer)
        #expect(server.toPeer > 0)
        pair.server.close()
        #expect(pair.server.tlsBytesCarried! == server)

        let (a, b) = socketPair()
        let plain = Stream(loop: pair.loop, acceptedSocket: a)
        defer { plain.close(); close(b) }
        #expect(plain.tlsBytesCarried == nil)
    }

    /// A client that rejects the server's certificate says so in an alert: the server's reason
    /// names it, which the proxy's log turns into a hint about its interception CA.
    @Test func theServerHearsWhyTheClientRejectedItsCertificate() throws {
        let stranger = try Certificates.makeAuthority(commonName: "Someone Else")
        guard let pair = try handshake(over: socketPair(), trusting: stranger) else { return }
        defer { pair.close() }
        #expect(pair.serverEvents.events.first != .connected)
        let reason = pair.server.tlsFailureReason
        #expect(reason?.contains("alert unknown ca") == true, "\(String(describing: reason))")
    }

    /// Records sent at once (`sendNowOrQueue`) and staged bytes (`sendStaged`) go out in the order
    /// they were given, also once the socket takes no more: then records and staged bytes are
    /// queued behind what is there, and libevent finishes the record OpenSSL holds from the same
    /// bytes. The client reads nothing until everything is given.
    @Test func recordsSentAtOnceAndStagedBytesKeepTheirOrderThroughAFullSocket() throws {
        guard let pair = try handshake(over: socketPair()) else { return }
        defer { pair.close() }
        var expected: [UInt8] = []
        var refused = 0
        var sentAtOnce = 0
        for i in 0..<400 {
            // A record of its own, then a few small pieces staged behind it.
            let record = (0..<(16_000 + i % 384)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }
            expected += record
            let sent = record.withUnsafeBytes { pair.server.sendNowOrQueue($0) }
            if sent { sentAtOnce += 1 } else { refused += 1 }
            for piece in 0..<3 {
                let small = [UInt8](repeating: UInt8(truncatingIfNeeded: i &+ piece), count: 100 + piece * 700)
                expected += small
                pair.server.stagedOutput.append(small)
            }
            if i % 2 == 1 { pair.server.sendStaged() }
        }
        pair.server.sendStaged()
        #expect(sentAtOnce > 0 && refused > 0, "sent at once \(sentAtOnce), refused \(refused)")
        #expect(pair.server.stagedOutput.count == 0)
        pair.client.enableReading()
        pair.clientEvents.until = { $0.received.count >= expected.count }
        runLoop(pair.loop, atMost: 10)
        let received = pair.clientEvents.received
        #expect(received.count == expected.count)
        // Where they first differ (megabytes of arrays are slow to print when they do).
        let firstDifference = (0..<min(received.count, expected.count)).first { received[$0] != expected[$0] }
        #expect(firstDifference == nil)
        #expect(pair.server.output.count == 0)
    }

    /// Staging is for TLS: a plain stream stages into its output, and queues what it is asked to
    /// send at once there too (its own loop writes it at the end of the pass).
    @Test func aPlainStreamStagesAndQueuesIntoItsOutput() {
        let loop = EventLoop()
        let (a, b) = socketPair()
        let plain = Stream(loop: loop, acceptedSocket: a)
        defer { plain.close(); close(b) }
        plain.stagedOutput.append([1, 2, 3])
        #expect(plain.output.count == 3)
        plain.sendStaged()
        #expect(plain.output.count == 3)
        #expect([UInt8](repeating: 0, count: 10).withUnsafeBytes { plain.sendNowOrQueue($0) } == false)
        #expect(plain.output.count == 13)
    }

    @Test func aHalfCloseDeliversEverythingThenEndOfStream() throws {
        guard let pair = try handshake(over: socketPair()) else { return }
        defer { pair.close() }
        pair.client.enableReading()
        pair.clientEvents.until = { !$0.events.dropFirst().isEmpty }
        pair.server.output.append([UInt8](repeating: 4, count: 300_000))
        pair.server.shutdownWriteWhenFlushed()
        runLoop(pair.loop, atMost: 5)
        #expect(pair.clientEvents.received.count == 300_000)
        // A shutdown without close_notify: OpenSSL 3 reports it as an error, not an end.
        #expect(pair.clientEvents.events.first == .connected)
        #expect(pair.clientEvents.events.dropFirst() == [.endOfStream] || pair.clientEvents.events.dropFirst() == [.error(0)])
    }

    @Test func readingPausesAtTheHighWatermarkAndUnreadBytesAreReported() throws {
        guard let pair = try handshake(over: socketPair()) else { return }
        defer { pair.close() }
        #expect(pair.server.unreadInput == .nothing)
        pair.serverEvents.consume = false
        pair.server.setReadHighWatermark(16_384)
        pair.server.enableReading()
        pair.client.output.append([UInt8](repeating: 5, count: 100_000))
        runLoop(pair.loop, atMost: 0.5)
        #expect(pair.server.input.count >= 16_384)
        #expect(pair.server.input.count < 100_000)   // bounded, whatever the peer sends
        #expect(pair.server.unreadInput == .bytes)
        // Draining below the watermark resumes reading by itself.
        let first = pair.server.input.count
        pair.server.input.drain(first)
        pair.serverEvents.consume = true
        pair.serverEvents.until = { $0.received.count >= 100_000 - first }
        runLoop(pair.loop, atMost: 5)
        #expect(first + pair.serverEvents.received.count == 100_000)
    }

    @Test func aReadTimeoutIsReported() throws {
        guard let pair = try handshake(over: socketPair()) else { return }
        defer { pair.close() }
        pair.server.setTimeouts(read: 0.1, write: nil)
        pair.server.enableReading()
        pair.serverEvents.until = { $0.events.count > 1 }
        runLoop(pair.loop, atMost: 2)
        #expect(pair.serverEvents.events == [.connected, .timeout])
    }

    @Test func anUntrustedCertificateFailsWithTheVerificationReason() throws {
        let stranger = try Certificates.makeAuthority(commonName: "Someone Else")
        guard let pair = try handshake(over: socketPair(), trusting: stranger) else { return }
        defer { pair.close() }
        guard case .error = pair.clientEvents.events.first else {
            Issue.record("client reported \(pair.clientEvents.events)")
            return
        }
        #expect(pair.client.tlsFailureReason?.hasPrefix("certificate verification failed") == true)
    }

    /// A socket a plain stream had (an intercepted CONNECT) goes to OpenSSL with the kernel's
    /// default unsent limit: TLS streams time out writes without counting acknowledged bytes.
    @Test func aSocketHandedToOpenSSLGetsTheKernelDefaultsBack() throws {
        let loop = EventLoop()
        let (fd, peer) = tcpPair()
        defer { close(peer) }
        let plain = Stream(loop: loop, acceptedSocket: fd)
        #expect(unsentLimit(of: fd) == Stream.unsentLimit)
        guard let handed = plain.detachSocket() else {
            Issue.record("no socket handed over")
            return
        }
        let authority = try Certificates.makeAuthority(commonName: "Stream Test CA")
        let leaf = try Certificates.issue(for: "localhost", by: authority, keyType: .ecP256, lifetime: 3_600)
        guard let tls = Stream.acceptTLS(loop: loop, socket: handed, context: try TLSServerContext(leaf)) else {
            Issue.record("acceptTLS failed")
            return
        }
        #expect(tls.fileDescriptor == handed)
        #expect(unsentLimit(of: handed) == 0)
        #expect(urgentDataInline(handed))
        #expect(tls.detachSocket() == nil)   // plain streams only
        tls.close()
        #expect(tls.fileDescriptor == -1)
        #expect(tls.unreadInput == .endOfStream)
    }
}
