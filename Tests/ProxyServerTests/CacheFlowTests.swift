import CachePolicy
import CacheStore
import Glibc
import HTTPWire
import LarderConfig
import SessionClient
import Testing
@testable import ProxyServer

/// The origin's side of the cache flow (`CacheExchange+Origin`), shared by client requests,
/// and detached fetches (background refreshes among them), on a real cache in a temporary directory and with
/// time set by hand: fetch and store, revalidate (unchanged, changed by HEAD, changed by a
/// conditional GET), a 5xx seen by a client and by a background refresh, a fetch that breaks off.
@Suite(.serialized) struct CacheFlowTests {
    static let url = "http://a.example/doc"
    let setup = CacheSetup(Config())
    let table = InFlightTable()

    func request(_ text: String = "GET http://a.example/doc HTTP/1.1\r\nHost: a.example") -> RequestHead {
        var head = RequestHead()
        let bytes = Array((text + "\r\n\r\n").utf8)
        _ = try? bytes.withUnsafeBytes { raw throws(HTTPWireError) in
            try RequestParser.parse(raw, into: &head, limits: HeadLimits())
        }
        return head
    }

    func response(_ text: String, method: HTTPMethod = .get) -> ResponseHead {
        var head = ResponseHead()
        let bytes = Array((text + "\r\n\r\n").utf8)
        _ = try? bytes.withUnsafeBytes { raw throws(HTTPWireError) in
            try ResponseParser.parse(raw, into: &head, requestMethod: method, limits: HeadLimits())
        }
        return head
    }

    func exchange(_ phase: CacheExchange.Phase) -> CacheExchange {
        let origin = OriginKey(scheme: .http, host: "a.example", port: 80)
        let destination = RequestRouter.Destination(
            origin: origin, route: OutboundHead.Route(scheme: .http, originHost: Array("a.example".utf8), originPort: 80,
                                                      absoluteForm: false),
            keyedAs: origin)
        return CacheExchange(primaryKey: Array(Self.url.utf8), scheme: "http", host: Array("a.example".utf8), keyedPort: 80,
                             destination: destination, pathRange: 0..<4, phase: phase)
    }

    func withCache(_ body: (Cache) throws -> Void) throws {
        var template = Array("/tmp/larder-flow-test.XXXXXX".utf8CString)
        let dir = String(cString: template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }!)
        let cache = try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: dir, capacity: 64 << 20)),
                              log: { _ in })
        defer {
            cache.close()
            for name in ["data.mdb", "lock.mdb", "larder.lock"] { unlink(dir + "/" + name) }
            rmdir(dir)
        }
        try body(cache)
    }

    /// Fetches and stores `head` with body "abc" at `now`; returns the entry as a lookup finds it.
    func store(_ head: String, in cache: Cache, now: Int64) -> StoredResponse? {
        let ex = exchange(.fetching(nil))
        ex.requestTime = now
        guard case .forward = ex.originHead(response(head), request: request(), background: false, now: now,
                                             cache: cache, setup: setup, table: table) else { return nil }
        // What `tee` gives the store from the origin's body.
        Array("abc".utf8).withUnsafeBytes { _ = ex.writer?.append($0) }
        guard case .done = ex.originEnded(error: nil, now: now, table: table) else { return nil }
        cache.flush()
        if case .found(let entry) = cache.makeReader().lookup(primaryKey: Array(Self.url.utf8), request: HeaderBlock()) {
            return entry
        }
        return nil
    }

    static let cacheable = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nETag: \"v1\"\r\nContent-Length: 3"

    /// The path the rules see is the end of the primary key: for real targets, keyed as a request
    /// is, it is the target's path and query exactly (without the `/` the key puts before a bare
    /// query, and without a fragment, which neither holds).
    @Test(arguments: ["http://h?x", "http://h/p#f", "http://h#f", "http://H:80/P?q=1", "http://[::1]:8080/p",
                      "http://h", "https://h.test/a/b?c#d", "/a#b", "/"])
    func theRulesPathIsTheKeysEnd(_ text: String) throws {
        let bytes = Array(text.utf8)
        let method = HTTPMethod.get
        let target = try bytes.withUnsafeBytes { raw throws(HTTPWireError) in try RequestTarget.parse(raw, method: method) }
        let range = target.pathRange(targetLength: bytes.count)
        let host = target.form == .absolute ? target.host : Array("origin.test".utf8)
        let key = bytes.withUnsafeBytes { raw in
            CacheKey.primary(scheme: target.scheme, host: host, port: target.port,
                             pathAndQuery: UnsafeRawBufferPointer(rebasing: raw[range]))
        }
        let origin = OriginKey(scheme: .http, host: "h", port: 80)
        let destination = RequestRouter.Destination(
            origin: origin, route: OutboundHead.Route(scheme: .http, originHost: host, originPort: 80, absoluteForm: false),
            keyedAs: origin)
        let ex = CacheExchange(primaryKey: key, scheme: "http", host: host, keyedPort: 80, destination: destination,
                               pathRange: range, phase: .fetching(nil))
        #expect(Array(ex.path) == Array(bytes[range]))
        #expect(!bytes[range].contains(0x23))
    }

    @Test func aFetchIsStoredAndABreakOffStoresNothing() throws {
        try withCache { cache in
            #expect(store(Self.cacheable, in: cache, now: 1_000)?.bodyLength == 3)
            let other = exchange(.fetching(nil))
            _ = other.originHead(response(Self.cacheable), request: request(), background: false, now: 1_001,
                                 cache: cache, setup: setup, table: table)
            cache.invalidate(primaryKey: Array(Self.url.utf8))
            guard case .done = other.originEnded(error: .cancelled, now: 1_001, table: table) else {
                Issue.record("a broken fetch is simply done")
                return
            }
            cache.flush()
            if case .found = cache.makeReader().lookup(primaryKey: Array(Self.url.utf8), request: HeaderBlock()) {
                Issue.record("a fetch that broke off was stored")
            }
        }
    }

    @Test func unchangedIsServedFromTheFreshenedEntry() throws {
        try withCache { cache in
            let entry = try #require(store(Self.cacheable, in: cache, now: 1_000))
            let ex = exchange(.revalidating(.head))
            ex.entry = entry
            ex.requestTime = 1_100
            let answer = response("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nETag: \"v1\"\r\nContent-Length: 3",
                                  method: .head)
            guard case .revalidation(let step) = ex.originHead(answer, request: request(), background: false,
                                                               now: 1_100, cache: cache, setup: setup, table: table) else {
                Issue.record("a revalidation answer is the cache's")
                return
            }
            #expect(step == .unchanged && step.consumesAnswer)
            guard case .serveEntry(let fresh) = ex.originEnded(error: nil, now: 1_100, table: table) else {
                Issue.record("unchanged: the entry is served")
                return
            }
            #expect(fresh.facts.timeToLive(now: 1_100) > 500, "freshened by the answer's max-age")
        }
    }

    @Test func aHeadThatFindsAChangeFetchesAgainAndAConditionalGetsAnswerIsStored() throws {
        try withCache { cache in
            let entry = try #require(store(Self.cacheable, in: cache, now: 1_000))
            let byHead = exchange(.revalidating(.head))
            byHead.entry = entry
            let changed = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nETag: \"v2\"\r\nContent-Length: 3"
            guard case .revalidation(.refetch) = byHead.originHead(response(changed, method: .head), request: request(),
                                                                   background: false, now: 1_100, cache: cache,
                                                                   setup: setup, table: table),
                  case .refetch = byHead.originEnded(error: nil, now: 1_101, table: table),
                  case .fetching = byHead.phase else {
                Issue.record("HEAD found a change: fetch again with GET")
                return
            }
            #expect(byHead.requestTime == 1_101)
            #expect(byHead.status.detail == "revalidated-head-changed")
            let entryAgain = try #require(store(Self.cacheable, in: cache, now: 1_200))
            let byGet = exchange(.revalidating(.conditionalGet))
            byGet.entry = entryAgain
            guard case .revalidation(.storeThis) = byGet.originHead(response(changed), request: request(),
                                                                    background: false, now: 1_300, cache: cache,
                                                                    setup: setup, table: table) else {
                Issue.record("a conditional GET's 200 is the new response")
                return
            }
            #expect(byGet.writer != nil, "and it is being stored")
        }
    }

    @Test func aClientHeadThatFindsAChangeForwardsItsAnswerAndInvalidates() throws {
        try withCache { cache in
            let entry = try #require(store(Self.cacheable, in: cache, now: 1_000))
            let ex = exchange(.revalidating(.head))
            ex.entry = entry
            let head = request("HEAD http://a.example/doc HTTP/1.1\r\nHost: a.example")
            ex.facts = try RequestFacts.make(head, rulePolicy: nil, settings: setup.policy)
            let changed = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nETag: \"v2\"\r\nContent-Length: 9"
            guard case .revalidation(let step) = ex.originHead(response(changed, method: .head), request: head,
                                                               background: false, now: 1_100, cache: cache,
                                                               setup: setup, table: table) else {
                Issue.record("a revalidation answer is the cache's to judge")
                return
            }
            #expect(step == .forwardThis && !step.consumesAnswer, "the HEAD's answer goes to the client")
            #expect(ex.status.detail == "revalidated-head-changed" && ex.status.forwardStatus == 200)
            guard case .done = ex.originEnded(error: nil, now: 1_100, table: table) else {
                Issue.record("no second request after the client's HEAD")
                return
            }
            cache.flush()
            if case .found = cache.makeReader().lookup(primaryKey: Array(Self.url.utf8), request: HeaderBlock()) {
                Issue.record("the changed entry was kept")
            }
        }
    }

    @Test func aBackgroundRefreshKeepsTheEntryOnA5xxAndAClientMayBeServedStale() throws {
        try withCache { cache in
            let entry = try #require(store(Self.cacheable, in: cache, now: 1_000))
            let failing = response("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0", method: .head)
            let background = exchange(.revalidating(.head))
            background.entry = entry
            guard case .revalidation(.keep) = background.originHead(failing, request: request(), background: true,
                                                                     now: 1_100, cache: cache, setup: setup, table: table),
                  case .done = background.originEnded(error: nil, now: 1_100, table: table) else {
                Issue.record("a background refresh leaves the entry on a 5xx")
                return
            }
            cache.flush()
            guard case .found = cache.makeReader().lookup(primaryKey: Array(Self.url.utf8), request: HeaderBlock()) else {
                Issue.record("the entry is gone")
                return
            }
            let client = exchange(.revalidating(.head))
            client.entry = entry
            let allowing = request("GET http://a.example/doc HTTP/1.1\r\nHost: a.example\r\nCache-Control: stale-if-error=600")
            client.facts = try RequestFacts.make(allowing, rulePolicy: nil, settings: setup.policy)
            guard case .revalidation(.serveStale) = client.originHead(failing, request: allowing, background: false,
                                                                      now: 1_100, cache: cache, setup: setup, table: table),
                  case .serveEntry = client.originEnded(error: nil, now: 1_100, table: table) else {
                Issue.record("a client that allows stale-if-error is served the entry")
                return
            }
        }
    }

    @Test func aRevalidationWithoutAnAnswerMayBeServedStaleOnlyWhenAllowed() throws {
        try withCache { cache in
            let entry = try #require(store(Self.cacheable, in: cache, now: 1_000))
            let ex = exchange(.revalidating(.head))
            ex.entry = entry
            ex.facts = try RequestFacts.make(request(), rulePolicy: nil, settings: setup.policy)
            guard case .revalidationFailed(let m) = ex.originEnded(error: .cancelled, now: 1_100, table: table) else {
                Issue.record("no answer: the revalidation failed")
                return
            }
            #expect(!ex.mayServeStaleWithoutAnswer(method: m, now: 1_100))
            let allowing = exchange(.revalidating(.head))
            allowing.entry = entry
            allowing.facts = try RequestFacts.make(
                request("GET http://a.example/doc HTTP/1.1\r\nHost: a.example\r\nCache-Control: stale-if-error=600"),
                rulePolicy: nil, settings: setup.policy)
            #expect(allowing.mayServeStaleWithoutAnswer(method: .head, now: 1_100))
        }
    }
}
