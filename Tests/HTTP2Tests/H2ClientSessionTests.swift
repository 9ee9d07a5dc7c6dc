import CNghttp2
import Testing
@testable import HTTP2

/// Larder's two sessions talking to each other, bytes moved by hand: the client side that speaks
/// to origins and the server side that clients speak to.
final class ClientRecorder: H2ClientSessionDelegate {
    var heads: [Int32: H2ResponseHead] = [:]
    var bodies: [Int32: [UInt8]] = [:]
    var ended: Set<Int32> = []
    var closed: [Int32: UInt32] = [:]
    var uploads: [Int32: [UInt8]] = [:]

    func h2Response(_ stream: Int32, head: H2ResponseHead, endStream: Bool) {
        heads[stream] = head
        if endStream { ended.insert(stream) }
    }
    func h2ResponseBody(_ stream: Int32, _ bytes: UnsafeRawBufferPointer) { bodies[stream, default: []] += bytes }
    func h2ResponseEnded(_ stream: Int32) { ended.insert(stream) }
    func h2StreamClosed(_ stream: Int32, errorCode: UInt32) { closed[stream] = errorCode }
    func h2RequestBody(_ stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        let rest = uploads[stream] ?? []
        let n = min(rest.count, buffer.count)
        buffer.copyBytes(from: rest[..<n])
        uploads[stream] = Array(rest[n...])
        return .bytes(n, end: n == rest.count)
    }
}

func shuttle(_ client: H2ClientSession, _ server: H2ServerSession) throws {
    for _ in 0..<200 {
        var a: [UInt8] = []
        try client.send { a += $0; return true }
        if !a.isEmpty {
            let failure = a.withUnsafeBytes { b -> H2SessionError? in
                do throws(H2SessionError) { try server.receive(b) } catch { return error }
                return nil
            }
            if let failure { throw failure }
        }
        var b: [UInt8] = []
        try server.send { b += $0; return true }
        if !b.isEmpty {
            let failure = b.withUnsafeBytes { bytes -> H2SessionError? in
                do throws(H2SessionError) { try client.receive(bytes) } catch { return error }
                return nil
            }
            if let failure { throw failure }
        }
        if a.isEmpty && b.isEmpty { return }
    }
}

/// Larder's client session and its server session, talking through `shuttle`, with the
/// recorders that are their delegates (held here: a session does not hold its delegate).
private final class SessionPair {
    let client: H2ClientSession
    let server: H2ServerSession
    let c = ClientRecorder()
    let s = Recorder()

    init(streamWindow: Int = 256 * 1024, connectionWindow: Int = 1 << 20) throws {
        client = try H2ClientSession(streamWindow: streamWindow, connectionWindow: connectionWindow)
        server = try H2ServerSession(settings: H2Settings())
        client.delegate = c
        server.delegate = s
    }
}

private func fields(_ pairs: [(String, String)]) -> [(name: [UInt8], value: [UInt8])] {
    pairs.map { (Array($0.0.utf8), Array($0.1.utf8)) }
}

@Test func aRequestWithABodyGoesBothWaysBetweenLardersSessions() throws {
    let pair = try SessionPair()
    let (client, server, c, s) = (pair.client, pair.server, pair.c, pair.s)
    defer { withExtendedLifetime(pair) {} }  // the sessions do not hold their delegates
    let upload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
    let id = try #require(client.request(fields([(":method", "POST"), (":scheme", "https"), (":authority", "o.test"),
                                                 (":path", "/up"), ("content-length", "300000")]), hasBody: true))
    c.uploads[id] = upload
    try shuttle(client, server)
    // The server takes the body as it arrives, opening the windows as a reader would.
    for _ in 0..<40 where (s.bodies[id]?.count ?? 0) < upload.count {
        server.consumed(id, s.bodies[id]?.count ?? 0)
        s.bodies[id] = s.bodies[id]  // (counted once below)
        try shuttle(client, server)
        if s.ended.contains(id) { break }
    }
    #expect(s.bodies[id] == upload && s.ended.contains(id))
    s.responseBodies[id] = Array("stored".utf8)
    #expect(server.respond(id, status: 201, fields: fields([("content-length", "6")]), hasBody: true))
    try shuttle(client, server)
    #expect(c.heads[id]?.status == 201 && c.bodies[id] == Array("stored".utf8) && c.ended.contains(id))
    #expect(c.closed[id] == 0 && client.openStreams == 0)
}

@Test func windowsForAnswersOpenOnlyAsTheyAreConsumed() throws {
    let pair = try SessionPair(streamWindow: 65_535, connectionWindow: 65_535)
    let (client, server, c, s) = (pair.client, pair.server, pair.c, pair.s)
    defer { withExtendedLifetime(pair) {} }  // the sessions do not hold their delegates
    let id = try #require(client.request(fields([(":method", "GET"), (":scheme", "https"), (":authority", "o.test"),
                                                 (":path", "/big")]), hasBody: false))
    try shuttle(client, server)
    s.responseBodies[id] = [UInt8](repeating: 1, count: 200_000)
    #expect(server.respond(id, status: 200, fields: [], hasBody: true))
    try shuttle(client, server)
    #expect(c.bodies[id]?.count == 65_535)  // the window, and no more, until the client reads
    client.consumed(id, 65_535)
    try shuttle(client, server)
    #expect((c.bodies[id]?.count ?? 0) > 65_535)
}

@Test func aStreamWhoseBodyIsNotTakenLeavesTheConnectionsWindowOpenToTheOthers() throws {
    let pair = try SessionPair(streamWindow: 65_535, connectionWindow: 65_535)
    let (client, server, c, s) = (pair.client, pair.server, pair.c, pair.s)
    defer { withExtendedLifetime(pair) {} }  // the sessions do not hold their delegates
    func get(_ path: String) throws -> Int32 {
        try #require(client.request(fields([(":method", "GET"), (":scheme", "https"), (":authority", "o.test"),
                                            (":path", path)]), hasBody: false))
    }
    let stalled = try get("/stalled"), other = try get("/other")
    try shuttle(client, server)
    s.responseBodies[stalled] = [UInt8](repeating: 1, count: 200_000)
    #expect(server.respond(stalled, status: 200, fields: [], hasBody: true))
    try shuttle(client, server)
    // The stream's window is spent and nothing of it taken; so would the connection's be.
    #expect(c.bodies[stalled]?.count == 65_535)
    s.responseBodies[other] = [UInt8](repeating: 2, count: 1_000)
    #expect(server.respond(other, status: 200, fields: [], hasBody: true))
    try shuttle(client, server)
    #expect(c.bodies[other]?.count == 1_000 && c.ended.contains(other))
    #expect(c.bodies[stalled]?.count == 65_535)  // still held back by its own window
}

@Test func aStreamTheServerRefusesClosesWithItsCode() throws {
    let pair = try SessionPair()
    let (client, server, c) = (pair.client, pair.server, pair.c)
    defer { withExtendedLifetime(pair) {} }  // the sessions do not hold their delegates
    let id = try #require(client.request(fields([(":method", "GET"), (":scheme", "https"), (":authority", "o.test"),
                                                 (":path", "/")]), hasBody: false))
    try shuttle(client, server)
    server.reset(id, code: UInt32(NGHTTP2_REFUSED_STREAM.rawValue))
    try shuttle(client, server)
    #expect(c.closed[id] == UInt32(NGHTTP2_REFUSED_STREAM.rawValue) && c.heads[id] == nil)
}

@Test func anAnswerHeadWithoutAValidStatusIsRefused() throws {
    let pair = try SessionPair()
    let (client, server, c) = (pair.client, pair.server, pair.c)
    defer { withExtendedLifetime(pair) {} }  // the sessions do not hold their delegates
    let id = try #require(client.request(fields([(":method", "GET"), (":scheme", "https"), (":authority", "o.test"),
                                                 (":path", "/")]), hasBody: false))
    try shuttle(client, server)
    _ = server.respond(id, status: 2000, fields: [], hasBody: false)  // four digits
    try shuttle(client, server)
    #expect(c.heads[id] == nil)
    #expect(c.closed[id] != nil && c.closed[id] != 0)
}
