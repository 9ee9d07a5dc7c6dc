import CNghttp2
import Testing
@testable import HTTP2

/// Records what the session under test reports, and answers bodies from a table.
final class Recorder: H2ServerSessionDelegate {
    var requests: [(Int32, H2RequestHead, Bool)] = []
    var bodies: [Int32: [UInt8]] = [:]
    var ended: Set<Int32> = []
    var closed: [Int32: UInt32] = [:]
    var responseBodies: [Int32: [UInt8]] = [:]
    var waiting: Set<Int32> = []
    /// Streams whose bodies stay here until their frames are written (`.ready`), and the frames
    /// to refuse once each before writing them (a socket backed up).
    var noCopy: Set<Int32> = []
    var blockOnce: Set<Int32> = []
    var failOnce: Set<Int32> = []
    /// Streams whose answers break off (an origin that failed): nghttp2 resets them.
    var cut: Set<Int32> = []
    /// Where the session's output and the frames written here go, in order (`exchange`).
    var wire: [UInt8] = []

    func h2Request(_ stream: Int32, head: inout H2RequestHead, endStream: Bool) { requests.append((stream, head, endStream)) }
    func h2RequestBody(_ stream: Int32, _ bytes: UnsafeRawBufferPointer) { bodies[stream, default: []] += bytes }
    func h2RequestEnded(_ stream: Int32) { ended.insert(stream) }
    func h2StreamClosed(_ stream: Int32, errorCode: UInt32) { closed[stream] = errorCode }
    func h2ResponseBody(_ stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        if waiting.contains(stream) { return .wait }
        if cut.contains(stream) { return .cut }
        let rest = responseBodies[stream] ?? []
        let n = min(rest.count, buffer.count)
        if noCopy.contains(stream) { return .ready(n, end: n == rest.count) }
        buffer.copyBytes(from: rest[..<n])
        responseBodies[stream] = Array(rest[n...])
        return .bytes(n, end: n == rest.count)
    }

    func h2SendResponseBody(_ stream: Int32, frameHeader: UnsafeRawBufferPointer, count: Int) -> H2FrameWrite {
        if blockOnce.remove(stream) != nil { return .wouldBlock }
        if failOnce.remove(stream) != nil { return .failed }
        guard let rest = responseBodies[stream], rest.count >= count else { return .failed }
        wire += frameHeader
        wire += rest[..<count]
        responseBodies[stream] = Array(rest[count...])
        return .written
    }
}

/// A minimal HTTP/2 client over nghttp2 that collects responses: the peer of the session under test.
final class TestClient {
    var session: OpaquePointer?
    var statuses: [Int32: String] = [:]
    /// Every field of each stream's answer head, `:status` first.
    var heads: [Int32: [String]] = [:]
    var bodies: [Int32: [UInt8]] = [:]
    var closed: [Int32: UInt32] = [:]
    var goAwayCode: UInt32?

    init() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nl, value, vl, _, user in
            let me = Unmanaged<TestClient>.fromOpaque(user!).takeUnretainedValue()
            let n = String(decoding: UnsafeBufferPointer(start: name!, count: nl), as: UTF8.self)
            let v = String(decoding: UnsafeBufferPointer(start: value!, count: vl), as: UTF8.self)
            me.heads[frame!.pointee.hd.stream_id, default: []].append("\(n): \(v)")
            if n == ":status" {
                me.statuses[frame!.pointee.hd.stream_id] = String(decoding: UnsafeBufferPointer(start: value!, count: vl), as: UTF8.self)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, id, data, length, user in
            let me = Unmanaged<TestClient>.fromOpaque(user!).takeUnretainedValue()
            me.bodies[id, default: []] += UnsafeBufferPointer(start: data!, count: length)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, id, code, user in
            Unmanaged<TestClient>.fromOpaque(user!).takeUnretainedValue().closed[id] = code
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            if UInt32(frame!.pointee.hd.type) == NGHTTP2_GOAWAY.rawValue {
                Unmanaged<TestClient>.fromOpaque(user!).takeUnretainedValue().goAwayCode = frame!.pointee.goaway.error_code
            }
            return 0
        }
        nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        nghttp2_session_callbacks_del(callbacks)
        nghttp2_submit_settings(session, 0, nil, 0)
    }

    deinit { nghttp2_session_del(session) }

    @discardableResult
    func request(_ fields: [(String, String)], body: [UInt8]? = nil) -> Int32 {
        let pairs = fields.map { (name: Array($0.0.utf8), value: Array($0.1.utf8)) }
        return H2ServerSession.withNameValues(pairs) { nva in
            nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil)
        }
    }

    func output() -> [UInt8] {
        var out: [UInt8] = []
        while true {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n <= 0 { return out }
            out += UnsafeBufferPointer(start: data!, count: n)
        }
    }

    func receive(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBufferPointer { nghttp2_session_mem_recv(session, $0.baseAddress, $0.count) }
    }
}

/// Hands `bytes` to the server; the error it answered them with, if any.
func deliver(_ bytes: [UInt8], to server: H2ServerSession) -> H2SessionError? {
    bytes.withUnsafeBytes { b -> H2SessionError? in
        do throws(H2SessionError) { try server.receive(b) } catch { return error }
        return nil
    }
}

/// Moves bytes both ways until neither side has anything to say.
func exchange(_ client: TestClient, _ server: H2ServerSession) throws {
    for _ in 0..<50 {
        let toServer = client.output()
        if let failure = deliver(toServer, to: server) { throw failure }
        var toClient: [UInt8] = []
        if let recorder = server.delegate as? Recorder {
            // One sink for the session's output and the frames the recorder writes, in order.
            try server.send { recorder.wire += $0; return true }
            toClient = recorder.wire
            recorder.wire.removeAll()
        } else {
            try server.send { toClient += $0; return true }
        }
        if toServer.isEmpty && toClient.isEmpty { return }
        client.receive(toClient)
    }
}

let get = [(":method", "GET"), (":scheme", "http"), (":authority", "origin.test:8080"), (":path", "/a?b")]

@Test func aRequestArrivesWithItsPseudoHeadersAndFields() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let id = client.request(get + [("accept", "*/*")])
    try exchange(client, server)
    #expect(recorder.requests.count == 1)
    let (stream, head, endStream) = recorder.requests[0]
    #expect(stream == id && endStream)
    #expect(head.method == Array("GET".utf8) && head.authority == Array("origin.test:8080".utf8))
    #expect(head.path == Array("/a?b".utf8) && head.scheme == Array("http".utf8))
    #expect(head.fields.count == 1 && head.fields.nameIs(0, Array("accept".utf8)))
}

@Test func eachRequestGetsOnlyItsOwnFieldsThoughTheHeadIsReused() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    client.request(get + [("accept", "*/*"), ("x-first", "1")])
    try exchange(client, server)
    client.request([(":method", "POST"), (":scheme", "https"), (":authority", "b"), (":path", "/longer/path")])
    client.request(get)
    try exchange(client, server)
    #expect(recorder.requests.count == 3)
    let heads = recorder.requests.map(\.1)
    #expect(heads[0].fields.pairs.map { String(decoding: $0.name, as: UTF8.self) } == ["accept", "x-first"])
    #expect(heads[1].fields.isEmpty && heads[1].method == Array("POST".utf8) && heads[1].scheme == Array("https".utf8))
    #expect(heads[1].authority == Array("b".utf8) && heads[1].path == Array("/longer/path".utf8))
    #expect(heads[2].fields.isEmpty && heads[2].path == Array("/a?b".utf8) && heads[2].method == Array("GET".utf8))
}

@Test func aResponseWithABodyReachesTheClient() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let id = client.request(get)
    try exchange(client, server)
    recorder.responseBodies[id] = Array(repeating: 7, count: 100_000)
    #expect(server.respond(id, status: 200, fields: [(Array("content-length".utf8), Array("100000".utf8))], hasBody: true))
    try exchange(client, server)
    #expect(client.statuses[id] == "200")
    #expect(client.bodies[id]?.count == 100_000)
    #expect(client.closed[id] == 0 && recorder.closed[id] == 0)
}

/// Bodies the delegate keeps until their frames are written arrive whole and in order, beside a
/// copied one, also when a frame is refused once (the socket backed up) and written later.
@Test func bodiesSentWithoutACopyArriveWholeBesideCopiedOnes() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let a = client.request(get), b = client.request(get), c = client.request(get)
    try exchange(client, server)
    let bodies: [Int32: [UInt8]] = [a: (0..<100_000).map { UInt8($0 % 251) }, b: Array(repeating: 3, count: 40_000),
                                    c: (0..<30_000).map { UInt8($0 % 13) }]
    for (id, body) in bodies { recorder.responseBodies[id] = body }
    recorder.noCopy = [a, c]
    recorder.blockOnce = [c]
    for id in [a, b, c] { #expect(server.respond(id, status: 200, fields: [], hasBody: true)) }
    for _ in 0..<4 { try exchange(client, server) }
    for (id, body) in bodies {
        #expect(client.bodies[id] == body, "stream \(id)")
        #expect(client.closed[id] == 0 && recorder.closed[id] == 0)
    }
}

/// A frame the delegate cannot write (its bytes are gone) resets only its stream.
@Test func aFrameThatCannotBeWrittenResetsItsStream() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let a = client.request(get), b = client.request(get)
    try exchange(client, server)
    recorder.responseBodies[a] = Array(repeating: 1, count: 5_000)
    recorder.responseBodies[b] = Array(repeating: 2, count: 5_000)
    recorder.noCopy = [a, b]
    for id in [a, b] { #expect(server.respond(id, status: 200, fields: [], hasBody: true)) }
    recorder.failOnce = [a]  // the bytes it said were ready are gone
    try exchange(client, server)
    #expect(client.closed[a] == 2)
    #expect(client.bodies[b] == Array(repeating: 2, count: 5_000) && client.closed[b] == 0)
}

@Test func aDeferredBodyGoesOnOnceResumed() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let id = client.request(get)
    try exchange(client, server)
    recorder.responseBodies[id] = Array("hello".utf8)
    recorder.waiting.insert(id)
    #expect(server.respond(id, status: 200, fields: [], hasBody: true))
    try exchange(client, server)
    #expect(client.statuses[id] == "200" && client.bodies[id] == nil)
    recorder.waiting.remove(id)
    server.resume(id)
    try exchange(client, server)
    #expect(client.bodies[id] == Array("hello".utf8) && client.closed[id] == 0)
}

@Test(arguments: [
    [("connection", "close")], [("transfer-encoding", "chunked")], [("te", "gzip")], [("upgrade", "h2c")],
    [("x-a", "b\r\nx-evil: 1")], [("x-a", "nul\u{0}")], [("x-a", " padded")],
])
// Upper-case names are not among them: nghttp2's client lowers them as it sends (the Python tests
// send them raw).
func aRequestWithAForbiddenFieldIsResetAndNeverDelivered(_ extra: [(String, String)]) throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let id = client.request(get + extra)
    try exchange(client, server)
    #expect(recorder.requests.isEmpty)
    #expect(client.closed[id] != nil && client.closed[id] != 0)
}

@Test func pseudoHeadersAfterARegularFieldAreRefused() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let id = client.request([(":method", "GET"), ("accept", "*/*"), (":scheme", "http"), (":authority", "a"), (":path", "/")])
    try exchange(client, server)
    #expect(recorder.requests.isEmpty && client.closed[id] != 0)
}

@Test func aContentLengthTheDataDisagreesWithResetsTheStream() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let fields = [(":method", "POST"), (":scheme", "http"), (":authority", "a"), (":path", "/"), ("content-length", "3")]
    let pairs = fields.map { (name: Array($0.0.utf8), value: Array($0.1.utf8)) }
    let body: [UInt8] = Array("toolong".utf8)
    final class Source { var bytes: [UInt8]; init(_ b: [UInt8]) { bytes = b } }
    let source = Source(body)
    var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: Unmanaged.passUnretained(source).toOpaque()),
                                         read_callback: { _, _, buf, len, flags, src, _ in
        let s = Unmanaged<Source>.fromOpaque(src!.pointee.ptr!).takeUnretainedValue()
        let n = min(len, s.bytes.count)
        s.bytes.withUnsafeBufferPointer { buf!.update(from: $0.baseAddress!, count: n) }
        s.bytes.removeFirst(n)
        if s.bytes.isEmpty { flags!.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
        return n
    })
    let id = H2ServerSession.withNameValues(pairs) { nva in
        nghttp2_submit_request(client.session, nil, nva.baseAddress, nva.count, &provider, nil)
    }
    try exchange(client, server)
    #expect(recorder.ended.isEmpty)
    #expect(client.closed[id] != nil && client.closed[id] != 0)
}

/// A stream a request opened counts until it closes, answered or reset, and its close is
/// reported once; the count lives in nghttp2's stream table rather than a set beside it.
@Test func openStreamsCountRequestsUntilTheirStreamsClose() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let ids = (0..<3).map { _ in client.request(get) }
    try exchange(client, server)
    #expect(server.openStreams == 3)
    nghttp2_submit_rst_stream(client.session, 0, ids[0], UInt32(NGHTTP2_CANCEL.rawValue))
    try exchange(client, server)
    #expect(server.openStreams == 2 && recorder.closed[ids[0]] == UInt32(NGHTTP2_CANCEL.rawValue))
    recorder.responseBodies[ids[1]] = Array("ok".utf8)
    #expect(server.respond(ids[1], status: 200, fields: [], hasBody: true))
    try exchange(client, server)
    #expect(server.openStreams == 1 && recorder.closed[ids[1]] == 0)
    #expect(recorder.closed[ids[2]] == nil && recorder.closed.count == 2)
}

@Test func moreStreamsThanAllowedAreRefused() throws {
    let server = try H2ServerSession(settings: H2Settings(maxConcurrentStreams: 2))
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    try exchange(client, server)  // the client learns the limit
    for _ in 0..<4 { client.request(get) }
    try exchange(client, server)
    #expect(recorder.requests.count == 2)
}

/// A session allowing 1,000 streams at once (by default), its recorder and a client, for the
/// counts of resets.
func manyStreams(_ settings: H2Settings = H2Settings(maxConcurrentStreams: 1000)) throws
    -> (H2ServerSession, Recorder, TestClient) {
    let server = try H2ServerSession(settings: settings)
    let recorder = Recorder()
    server.delegate = recorder
    return (server, recorder, TestClient())
}

@Test func aClientThatResetsStreamsFasterThanTheRateLimitIsCutOff() throws {
    let (server, recorder, client) = try manyStreams()
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    try exchange(client, server)
    var failed = false
    for _ in 0..<400 {
        let id = client.request(get)
        do { try exchange(client, server) } catch { failed = true; break }  // the server has the request
        nghttp2_submit_rst_stream(client.session, 0, id, UInt32(NGHTTP2_CANCEL.rawValue))
        do { try exchange(client, server) } catch { failed = true; break }
        if client.goAwayCode != nil { break }
    }
    #expect(failed || client.goAwayCode == UInt32(NGHTTP2_ENHANCE_YOUR_CALM.rawValue))
    #expect(server.cutOffForResets)
    #expect(recorder.requests.count > H2ServerSession.cancelledStreamLimit)
    #expect(recorder.requests.count < H2ServerSession.cancelledStreamLimit + 5)
}

@Test func aClientThatLetsItsStreamsFinishMayCancelSomeOfThem() throws {
    let (server, recorder, client) = try manyStreams()
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    for n in 0..<380 {  // 190 cancels: more than the limit, fewer than nghttp2's burst of resets
        let id = client.request(get)
        try exchange(client, server)
        if n % 2 == 0 {
            nghttp2_submit_rst_stream(client.session, 0, id, UInt32(NGHTTP2_CANCEL.rawValue))
        } else {
            recorder.responseBodies[id] = Array("ok".utf8)
            _ = server.respond(id, status: 200, fields: [], hasBody: true)
            server.exchangeCompleted()
        }
        try exchange(client, server)
    }
    #expect(!server.cutOffForResets && client.goAwayCode == nil)
}

/// A WINDOW_UPDATE frame as a client could write it, whatever the window it opens.
func windowUpdate(_ stream: Int32, _ increment: UInt32) -> [UInt8] {
    let id = UInt32(stream)
    return [0, 0, 4, 0x8, 0] + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: id >> $0) }
        + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: increment >> $0) }
}

/// MadeYouReset (CVE-2025-8671): a client that has nghttp2 reset its streams by what it sends
/// (here a WINDOW_UPDATE the stream's window cannot take, RFC 9113 §6.9.1) makes work start and
/// stop for each as one that resets them itself: such resets count alike.
@Test func aClientThatMakesTheServerResetItsStreamsIsCutOff() throws {
    let (server, recorder, client) = try manyStreams()
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    try exchange(client, server)
    for _ in 0..<400 where !server.cutOffForResets {
        let id = client.request(get)
        try exchange(client, server)  // the server has the request
        #expect(deliver(windowUpdate(id, 0x7FFF_FFFF), to: server) == nil)
        try exchange(client, server)
        #expect(client.closed[id] == UInt32(NGHTTP2_FLOW_CONTROL_ERROR.rawValue))
    }
    #expect(server.cutOffForResets)
    #expect(recorder.requests.count == H2ServerSession.cancelledStreamLimit + 1)
}

/// Streams Larder resets, or whose answers break off, are not the client's doing: however many,
/// they never cut it off.
@Test func streamsLarderResetsDoNotCountAgainstTheClient() throws {
    let (server, recorder, client) = try manyStreams()
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    for n in 0..<300 {
        let id = client.request(get)
        try exchange(client, server)
        if n % 2 == 0 {
            server.reset(id, code: UInt32(NGHTTP2_INTERNAL_ERROR.rawValue))
        } else {
            recorder.cut.insert(id)
            #expect(server.respond(id, status: 200, fields: [], hasBody: true))
        }
        try exchange(client, server)
        #expect(client.closed[id] == UInt32(NGHTTP2_INTERNAL_ERROR.rawValue))
    }
    #expect(!server.cutOffForResets && client.goAwayCode == nil)
}

/// Streams a GOAWAY refuses (REFUSED_STREAM: nothing of them was processed) are not resets of
/// the client's doing: a client whose socket was backed up, so that it opened streams before it
/// could read the GOAWAY, is not cut off for them; nor are they handed over, once the GOAWAY is
/// on its way, as requests to start.
@Test func streamsAGoAwayRefusesDoNotCountAgainstTheClient() throws {
    let (server, recorder, client) = try manyStreams()
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let first = client.request(get)
    try exchange(client, server)
    server.goAway()  // queued, not yet sent
    #expect(server.lastStreamServed == first)
    let late = (0..<150).map { _ in client.request(get) }
    #expect(deliver(client.output(), to: server) == nil)
    #expect(recorder.requests.count == 1)  // the late ones are not handed over
    try exchange(client, server)
    #expect(late.allSatisfy { recorder.closed[$0] == UInt32(NGHTTP2_REFUSED_STREAM.rawValue) })
    #expect(!server.cutOffForResets)
}

/// A request whose header list is over the limit is reset before it is handed over: it started
/// nothing, so however many there are, they do not count as cancelled work.
@Test func requestsResetBeforeTheyAreHandedOverDoNotCount() throws {
    let (server, recorder, client) = try manyStreams(H2Settings(maxConcurrentStreams: 1000, maxHeaderListSize: 4_096))
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    for _ in 0..<150 {
        let id = client.request(get + [("cookie", String(repeating: "c", count: 8_000))])
        try exchange(client, server)
        #expect(client.closed[id] != nil && client.closed[id] != 0)
    }
    #expect(recorder.requests.isEmpty && !server.cutOffForResets && client.goAwayCode == nil)
}

/// A head's pseudo-header values share its buffer with its fields: set in any order among fields
/// added and removed, each is read back as it was set, and emptying the head empties them all.
@Test func aHeadKeepsItsPseudoHeadersBesideItsFieldsThroughChanges() {
    var h = H2RequestHead()
    h.appendField(name: Array("a".utf8), value: Array("1".utf8))
    h.method = Array("GET".utf8)
    h.path = Array("/x".utf8)
    h.appendField(name: Array("b".utf8), value: Array("2".utf8))
    h.authority = Array("host.test".utf8)
    h.removeFields(named: Array("a".utf8))
    h.scheme = Array("https".utf8)
    let seen = h.withPseudoHeaders { p in
        [p.method, p.scheme, p.authority, p.path, p.protocol].map { String(decoding: $0, as: UTF8.self) }
    }
    #expect(seen == ["GET", "https", "host.test", "/x", ""])
    #expect(h.fields.pairs.map { String(decoding: $0.name + [0x3D] + $0.value, as: UTF8.self) } == ["b=2"])
    h.removeAll()
    #expect(h.withPseudoHeaders { p in p.method.isEmpty && p.path.isEmpty && p.authority.isEmpty && p.bytes.isEmpty })
    #expect(h.fields.isEmpty && h == H2RequestHead())
}

/// Answer heads are handed to nghttp2 by pointer into the session's own arena: the caller's
/// buffers may change as soon as `respond` returns, heads wait there while the socket is backed
/// up, and past the arena's limit nghttp2 copies them again; every head arrives as submitted and
/// the arena is emptied once nothing is queued.
@Test func answerHeadsArriveAsSubmittedWhateverBecomesOfTheCallersBytes() throws {
    let server = try H2ServerSession(settings: H2Settings())
    let recorder = Recorder()
    server.delegate = recorder
    defer { withExtendedLifetime(recorder) {} }  // the session does not hold it
    let client = TestClient()
    let ids = (0..<60).map { _ in client.request(get) }
    try exchange(client, server)
    var expected: [Int32: [String]] = [:]
    var names = [UInt8](repeating: 0, count: 64)
    var values = [UInt8](repeating: 0, count: 16_384)
    // The "socket" is backed up: what nghttp2 gives is kept for the client, and it is asked for
    // nothing more, so the heads wait in its queue.
    try server.send { recorder.wire += $0; return false }
    for (n, id) in ids.enumerated() {
        // Names "x-a" and "x-bb"; values long enough that the arena passes its limit midway.
        let first = "v\(n)-" + String(repeating: "q", count: 5_000)
        let second = "w\(n)"
        names.replaceSubrange(0..<7, with: Array("x-ax-bb".utf8))
        values.replaceSubrange(0..<(first.utf8.count + second.utf8.count), with: Array((first + second).utf8))
        let spans = [H2Fields.Span(nameStart: 0, nameCount: 3, valueStart: 0, valueCount: first.utf8.count),
                     H2Fields.Span(nameStart: 3, nameCount: 4, valueStart: first.utf8.count, valueCount: second.utf8.count)]
        let sent = names.withUnsafeBytes { nb in
            values.withUnsafeBytes { vb in
                server.respond(id, status: 200 + n % 3, names: nb, values: vb, spans: spans, hasBody: false)
            }
        }
        #expect(sent)
        expected[id] = [":status: \(200 + n % 3)", "x-a: \(first)", "x-bb: \(second)"]
        // Still backed up: what is queued stays queued, and so does the arena.
        if n % 20 == 10 { try server.send { recorder.wire += $0; return false } }
        // The caller's bytes change at once.
        for i in names.indices { names[i] = 0x5A }
        for i in 0..<(first.utf8.count + second.utf8.count) { values[i] = 0x5A }
    }
    #expect(server.heldHeadBytes > 0 && server.heldHeadBytes < H2ServerSession.headArenaLimit + 6_000,
            "held \(server.heldHeadBytes)")
    try exchange(client, server)
    // Compared whole, reported short: the values are long.
    func short(_ head: [String]?) -> [String] { (head ?? ["none"]).map { "\($0.prefix(12))… (\($0.count))" } }
    for id in ids {
        let same = client.heads[id] == expected[id]
        #expect(same, "stream \(id): \(short(client.heads[id])) against \(short(expected[id]))")
    }
    #expect(server.heldHeadBytes == 0)
}
