import CachePolicy
import HTTPWire
import Testing
@testable import CacheStore
import Locking

/// The composite cache: removals must be invisible to lookups the moment they are asked for, even
/// while the disk writer has not committed them yet.
@Suite(.serialized) struct CacheTests {
    /// The memory tier is off for bodies by default (limit 0), so lookups go to disk.
    func makeCache(_ dir: String, memoryObjectLimit: Int = 0) throws -> Cache {
        try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: dir, capacity: 64 << 20),
                                          memoryObjectLimit: memoryObjectLimit),
                  log: { _ in })
    }

    func storeEntry(_ cache: Cache, url: String, storedAt: Int64) {
        let w = cache.beginStore(primaryKey: Array(url.utf8), secondaryKey: [], facts: facts(), head: [],
                                 tier: .allowed, expectedLength: 3, now: storedAt)!
        [UInt8]("abc".utf8).withUnsafeBytes { _ = w.append($0) }
        #expect(w.finish(head: Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n".utf8), facts: facts()))
    }

    func found(_ reader: CacheReader, _ url: String) -> Bool {
        if case .found = reader.lookup(primaryKey: Array(url.utf8), request: HeaderBlock()) { return true }
        return false
    }


    /// A piece (206) begun before a whole response for the same variant was stored finishes after
    /// it: the whole stays, on disk and in the memory tier alike, and the piece's chunks go.
    @Test(arguments: [0, 1 << 20]) func aPieceNeverReplacesAWholeStoredMeanwhile(memoryObjectLimit: Int) throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: memoryObjectLimit)
        defer { cache.close() }
        let url = Array("http://a/iso".utf8)
        let piece = cache.beginStore(primaryKey: url, secondaryKey: [], facts: facts(status: 206), head: [],
                                     tier: .allowed, expectedLength: 2, now: 1_000)!
        [UInt8]("ab".utf8).withUnsafeBytes { _ = piece.append($0) }
        storeEntry(cache, url: "http://a/iso", storedAt: 1_001)
        cache.flush()
        _ = piece.finish(head: Array("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-1/3\r\n".utf8),
                         facts: facts(status: 206))
        cache.flush()
        guard case .found(let entry) = cache.makeReader().lookup(primaryKey: url, request: HeaderBlock()) else {
            Issue.record("the whole response is gone")
            return
        }
        #expect(entry.facts.status == 200 && entry.bodyLength == 3)
        #expect(cache.statistics.diskEntries == 1)
    }

    /// What a stale entry's background refresh checks after claiming it: that the entry its
    /// request found is still the one stored, in either tier.
    @Test(arguments: [0, 1 << 20]) func anEntryIsStillFoundUntilReplacedFreshenedOrRemoved(memoryObjectLimit: Int) throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: memoryObjectLimit)
        defer { cache.close() }
        let url = Array("http://a/r".utf8)
        let reader = cache.makeReader()
        func lookUp() throws -> StoredResponse {
            guard case .found(let e) = reader.lookup(primaryKey: url, request: HeaderBlock()) else {
                throw CancellationError()
            }
            return e
        }
        storeEntry(cache, url: "http://a/r", storedAt: 1_000)
        cache.flush()
        let first = try lookUp()
        #expect(reader.stillFinds(first, request: HeaderBlock()))

        storeEntry(cache, url: "http://a/r", storedAt: 1_002)
        cache.flush()
        #expect(!reader.stillFinds(first, request: HeaderBlock()), "replaced by a newer response")

        let second = try lookUp()
        var newer = second.facts
        newer.responseTime += 5
        cache.freshen(second, facts: newer, head: second.head, parsedHead: nil, now: 1_010)
        cache.flush()
        #expect(!reader.stillFinds(second, request: HeaderBlock()), "freshened by a revalidation")

        let third = try lookUp()
        #expect(reader.stillFinds(third, request: HeaderBlock()))
        let gate = stallWriter(cache)
        storeEntry(cache, url: "http://a/r", storedAt: 1_020)
        // Not committed yet: in the memory tier already, or waiting for its commit.
        #expect(!reader.stillFinds(third, request: HeaderBlock()), "a newer response is stored or waiting")
        gate.signal()
        cache.flush()

        let fourth = try lookUp()
        cache.invalidate(primaryKey: url)
        cache.flush()
        #expect(!reader.stillFinds(fourth, request: HeaderBlock()), "removed")
    }

    /// A disk-only entry's freshened head is on its way to the disk: until it is written, the entry
    /// counts as a pending commit (requests wait for it, no lookup promotes the old head into the
    /// memory tier) and a refresh claimed meanwhile sees it replaced.
    @Test func aFreshenedHeadWaitingForTheDiskIsPending() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 0)
        defer { cache.close() }
        let url = Array("http://a/big".utf8)
        storeEntry(cache, url: "http://a/big", storedAt: 1_000)
        cache.flush()
        let reader = cache.makeReader()
        guard case .found(let stale) = reader.lookup(primaryKey: url, request: HeaderBlock()) else { throw CancellationError() }
        let gate = stallWriter(cache)
        var newer = stale.facts
        newer.responseTime += 60
        cache.freshen(stale, facts: newer, head: stale.head, parsedHead: nil, now: 1_060)
        #expect(cache.isCommitPending(primaryKey: url))
        #expect(!reader.stillFinds(stale, request: HeaderBlock()))
        gate.signal()
        cache.flush()
        #expect(!cache.isCommitPending(primaryKey: url))
        guard case .found(let fresh) = reader.lookup(primaryKey: url, request: HeaderBlock()) else { throw CancellationError() }
        #expect(fresh.facts.responseTime == newer.responseTime)
    }

    /// Memory-only entries all have body id 0: two stored in the same second are still told apart.
    @Test func twoMemoryOnlyEntriesOfOneSecondAreNotTheSame() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 1 << 20)
        defer { cache.close() }
        let url = Array("http://a/m".utf8)
        func store() {
            let w = cache.beginStore(primaryKey: url, secondaryKey: [], facts: facts(), head: [], tier: .allowedInMemoryOnly,
                                     expectedLength: 3, now: 1_000)!
            [UInt8]("abc".utf8).withUnsafeBytes { _ = w.append($0) }
            #expect(w.finish(head: Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n".utf8), facts: facts()))
        }
        store()
        let reader = cache.makeReader()
        guard case .found(let first) = reader.lookup(primaryKey: url, request: HeaderBlock()) else { throw CancellationError() }
        #expect(reader.stillFinds(first, request: HeaderBlock()))
        store()
        #expect(!reader.stillFinds(first, request: HeaderBlock()))
    }

    /// A memory-tier entry is handed out as one stored response, made by its first hit, until its
    /// head is freshened (the next lookups get the new one; the old stays as it was);
    /// once the entry is removed, nothing keeps its object alive.
    @Test func aMemoryEntryIsHandedOutAsOneResponseUntilItChanges() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 1 << 20)
        defer { cache.close() }
        let url = "http://a/once"
        storeEntry(cache, url: url, storedAt: 1_000)
        cache.flush()
        let reader = cache.makeReader()
        func lookUp() -> StoredResponse? {
            if case .found(let e) = reader.lookup(primaryKey: Array(url.utf8), request: HeaderBlock()) { return e }
            return nil
        }
        weak var object: CachedObject?
        do {
            let first = try #require(lookUp())
            guard case .memory(let o) = first.body else { Issue.record("not in the memory tier"); return }
            object = o
            #expect(lookUp() === first)
            let newHead = Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-N: 2\r\n".utf8)
            cache.freshen(first, facts: facts(), head: newHead, parsedHead: nil, now: 1_001)
            let second = try #require(lookUp())
            #expect(second !== first && second.head == newHead && first.head != newHead)
            #expect(lookUp() === second)
        }
        #expect(object == nil, "the freshened entry replaced the first object")
        weak var current: CachedObject?
        do {
            guard case .memory(let o)? = lookUp()?.body else { Issue.record("not in the memory tier"); return }
            current = o
        }
        #expect(current != nil)
        _ = cache.invalidate(primaryKey: Array(url.utf8))
        cache.flush()
        #expect(lookUp() == nil)
        #expect(current == nil, "a removed entry's object is let go")
    }

    @Test func aCompleteEntryWaitingForItsCommitIsReportedUntilCommitted() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir)
        defer { cache.close() }
        let url = Array("http://a/big".utf8)
        #expect(!cache.isCommitPending(primaryKey: url))
        let gate = stallWriter(cache)
        storeEntry(cache, url: "http://a/big", storedAt: 1_000)
        #expect(cache.isCommitPending(primaryKey: url), "complete, not committed: a request should wait for it")
        #expect(!found(cache.makeReader(), "http://a/big"))
        gate.signal()
        cache.flush()
        #expect(!cache.isCommitPending(primaryKey: url))
        #expect(found(cache.makeReader(), "http://a/big"))
    }

    @Test func hitsOnAMemoryEntryNoteTheAccessOnDiskOncePerMinute() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 1 << 20)
        defer { cache.close() }
        storeEntry(cache, url: "http://a/hot", storedAt: 1_000)
        cache.flush()
        guard case .found(let entry) = cache.makeReader().lookup(primaryKey: Array("http://a/hot".utf8),
                                                                  request: HeaderBlock()),
              case .memory = entry.body else {
            Issue.record("not found in the memory tier")
            return
        }
        let gate = stallWriter(cache)
        let queued = { cache.disk!.writer.queuedCount }
        let before = queued()
        for _ in 0..<1_000 { cache.touch(entry, now: 1_030) }   // within the minute: nothing
        #expect(queued() == before)
        for _ in 0..<1_000 { cache.touch(entry, now: 1_100) }   // a minute on: one touch, not 1,000
        #expect(queued() == before + 1)
        for _ in 0..<1_000 { cache.touch(entry, now: 1_150) }
        #expect(queued() == before + 1)
        cache.touch(entry, now: 1_161)
        #expect(queued() == before + 2)
        gate.signal()
    }

    @Test func freshenedHeadsOfAMemoryEntryReachTheDiskAtMostEveryFewSeconds() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 1 << 20)
        defer { cache.close() }
        storeEntry(cache, url: "http://a/reval", storedAt: 1_000)
        cache.flush()
        func lookUp() -> StoredResponse? {
            if case .found(let e) = cache.makeReader().lookup(primaryKey: Array("http://a/reval".utf8),
                                                              request: HeaderBlock()) { return e }
            return nil
        }
        guard let entry = lookUp(), case .memory = entry.body else {
            Issue.record("not found in the memory tier")
            return
        }
        let gate = stallWriter(cache)
        let queued = { cache.disk!.writer.queuedCount }
        let before = queued()
        let interval = MemoryTier.headPersistInterval
        func head(_ n: Int) -> [UInt8] { Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-N: \(n)\r\n".utf8) }
        cache.freshen(entry, facts: facts(), head: head(1), parsedHead: nil, now: 1_000 + interval - 1)
        #expect(queued() == before, "the disk's head is younger than the interval: memory only")
        #expect(lookUp()?.head == head(1), "lookups see the freshened head at once")
        cache.freshen(entry, facts: facts(), head: head(2), parsedHead: nil, now: 1_000 + interval)
        #expect(queued() == before + 1, "due: written to disk")
        cache.freshen(entry, facts: facts(), head: head(3), parsedHead: nil, now: 1_000 + interval + 1)
        #expect(queued() == before + 1)
        #expect(lookUp()?.head == head(3))
        // The parsed head handed in is kept with the memory copy, for the next revalidation.
        #expect(lookUp()?.parsedHead == nil)
        let parsed = StoredHead.parse(head(5))
        cache.freshen(entry, facts: facts(), head: head(5), parsedHead: parsed, now: 1_000 + interval + 1)
        #expect(lookUp()?.parsedHead?.headers.storage == parsed?.headers.storage)
        #expect(lookUp()?.parsedHead?.headers.value(of: "x-n") == "5")
        #expect(queued() == before + 1)
        // A head that allows less than the disk's (here a shorter lifetime) reaches the disk at
        // once: the older copy must never be served where the new one would not.
        var shorter = facts()
        shorter.freshnessLifetime = 0
        shorter.responseTime += interval + 2
        cache.freshen(entry, facts: shorter, head: head(4), parsedHead: nil, now: 1_000 + interval + 2)
        #expect(queued() == before + 2)
        gate.signal()
        cache.flush()
        #expect(cache.makeReader().disk!.record(entry.key)?.head == head(4), "the disk holds the last head written")
    }

    @Test func removalsHideEntriesBeforeTheWriterCommitsThem() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir)
        defer { cache.close() }
        let reader = cache.makeReader()
        storeEntry(cache, url: "http://a/1", storedAt: 100)
        storeEntry(cache, url: "http://a/2", storedAt: 200)
        storeEntry(cache, url: "http://a/3", storedAt: 300)
        cache.flush()
        #expect(found(reader, "http://a/1") && found(reader, "http://a/2") && found(reader, "http://a/3"))

        var gate = stallWriter(cache)
        cache.invalidate(primaryKey: Array("http://a/1".utf8))
        #expect(!found(reader, "http://a/1"), "invalidated, not yet committed: must not be served")
        #expect(found(reader, "http://a/2"))
        cache.purge(storedSince: 300)
        #expect(!found(reader, "http://a/3"))
        #expect(found(reader, "http://a/2"))
        #expect(cache.makeReader().variants(primaryKey: Array("http://a/3".utf8)).isEmpty)
        gate.signal()
        cache.flush()
        #expect(!found(reader, "http://a/1") && found(reader, "http://a/2") && !found(reader, "http://a/3"))

        gate = stallWriter(cache)
        cache.purgeAll()
        #expect(!found(reader, "http://a/2"))
        gate.signal()
        cache.flush()
        #expect(!found(reader, "http://a/2"))
        // Nothing pending any more: a new entry is found again.
        storeEntry(cache, url: "http://a/2", storedAt: 400)
        cache.flush()
        #expect(found(reader, "http://a/2"))
    }
}

extension CacheTests {
    /// A revalidation answered after another response was stored under the same key: its head
    /// freshens the response it revalidated, which is gone, never the new one (whose length,
    /// validators and body it does not describe), in memory or on disk.
    @Test func aFreshenedHeadNeverLandsOnAResponseStoredSince() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 1 << 20)
        defer { cache.close() }
        let url = "http://a/replaced"
        func lookUp() -> StoredResponse? {
            if case .found(let e) = cache.makeReader().lookup(primaryKey: Array(url.utf8), request: HeaderBlock()) {
                return e
            }
            return nil
        }
        storeEntry(cache, url: url, storedAt: 1_000)
        cache.flush()
        guard let old = lookUp(), case .memory = old.body else {
            Issue.record("not found in the memory tier")
            return
        }
        let newHead = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Version: 2\r\n".utf8)
        let w = cache.beginStore(primaryKey: Array(url.utf8), secondaryKey: [], facts: facts(), head: [],
                                 tier: .allowed, expectedLength: 5, now: 1_001)!
        [UInt8]("defgh".utf8).withUnsafeBytes { _ = w.append($0) }
        #expect(w.finish(head: newHead, facts: facts()))
        cache.flush()
        let staleUpdate = Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Version: 1\r\n".utf8)
        cache.freshen(old, facts: facts(), head: staleUpdate, parsedHead: nil, now: 1_000 + MemoryTier.headPersistInterval)
        cache.flush()
        guard let now = lookUp(), case .memory(let object) = now.body else {
            Issue.record("the new response is gone")
            return
        }
        #expect(now.head == newHead && object.body == Array("defgh".utf8), "the new response keeps its own head")
        #expect(cache.makeReader().disk!.record(now.key)?.head == newHead, "on disk too")
    }

    /// Request fields as the proxy parses them, for Vary selection.
    func requestFields(_ lines: [String]) -> HeaderBlock {
        var head = RequestHead()
        let raw = Array(("GET / HTTP/1.1\r\nHost: a\r\n" + lines.map { $0 + "\r\n" }.joined() + "\r\n").utf8)
        _ = raw.withUnsafeBytes { try? RequestParser.parse($0, into: &head, limits: HeadLimits()) }
        return head.headers
    }

    /// Stores `body` for `url` through the cache as the proxy does; `vary` names the response's
    /// Vary fields, and `request` selects the variant.
    func store(_ cache: Cache, url: String, body: String, vary: [String] = [], request: HeaderBlock = HeaderBlock(),
               now: Int64) {
        let varyFields = vary.map { Array($0.utf8) }
        let secondary = CacheKey.secondary(varyFields: varyFields, request: request)
        let f = facts(vary: varyFields)
        let w = cache.beginStore(primaryKey: Array(url.utf8), secondaryKey: secondary, facts: f, head: [],
                                 tier: .allowed, expectedLength: body.utf8.count, now: now)!
        Array(body.utf8).withUnsafeBytes { _ = w.append($0) }
        #expect(w.finish(head: Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n".utf8), facts: f))
    }

    /// The body `lookup` finds for `url` and `request`, from whichever tier holds it.
    func bodyFound(_ cache: Cache, _ url: String, request: HeaderBlock = HeaderBlock()) -> String? {
        let reader = cache.makeReader()
        guard case .found(let e) = reader.lookup(primaryKey: Array(url.utf8), request: request) else { return nil }
        switch e.body {
        case .memory(let o):
            return String(decoding: o.body, as: UTF8.self)
        case .disk:
            var out: [UInt8] = []
            for i in 0..<e.record.chunkCount {
                guard reader.withChunk(of: e, index: i, verify: true, { out.append(contentsOf: $0) }) == .delivered else { return nil }
            }
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// A URL whose only variant is held in memory alone (nothing on disk to ask): another variant
    /// of it is a Vary miss (the URL is stored), another URL a URI miss, the same variant a hit.
    @Test func aMemoryOnlyVariantTellsAVaryMissFromAURIMiss() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 1 << 20)
        defer { cache.close() }
        let gzip = requestFields(["Accept-Encoding: gzip"])
        let varyFields = [Array("accept-encoding".utf8)]
        let f = facts(vary: varyFields)
        let w = cache.beginStore(primaryKey: Array("http://a/v".utf8),
                                 secondaryKey: CacheKey.secondary(varyFields: varyFields, request: gzip), facts: f,
                                 head: [], tier: .allowedInMemoryOnly, expectedLength: 2, now: 1_000)!
        Array("gz".utf8).withUnsafeBytes { _ = w.append($0) }
        #expect(w.finish(head: Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nVary: Accept-Encoding\r\n".utf8), facts: f))
        let reader = cache.makeReader()
        func outcome(_ url: String, _ request: HeaderBlock) -> String {
            switch reader.lookup(primaryKey: Array(url.utf8), request: request) {
            case .found: return "found"
            case .varyMiss: return "vary miss"
            case .uriMiss: return "uri miss"
            }
        }
        #expect(outcome("http://a/v", gzip) == "found")
        #expect(outcome("http://a/v", requestFields(["Accept-Encoding: br"])) == "vary miss")
        #expect(outcome("http://a/v", requestFields([])) == "vary miss")
        #expect(outcome("http://a/other", gzip) == "uri miss")
    }

    @Test func aResponseTooLargeForMemoryReplacesTheMemoryCopyOfTheOneBefore() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 4)
        defer { cache.close() }
        let url = "http://a/grows"
        store(cache, url: url, body: "old", now: 1_000)
        cache.flush()
        #expect(bodyFound(cache, url) == "old")
        #expect(cache.statistics.memoryEntries == 1)
        store(cache, url: url, body: "newer", now: 1_001)
        cache.flush()
        #expect(bodyFound(cache, url) == "newer", "the most recent stored response, not the memory tier's older one")
        #expect(bodyFound(cache, url) == "newer")
        #expect(cache.statistics.memoryEntries == 0)
    }

    @Test func aResponseTooLargeForMemoryWithoutVaryReplacesEveryVariantHeldInMemory() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir, memoryObjectLimit: 4)
        defer { cache.close() }
        let url = "http://a/varied"
        let gzip = requestFields(["Accept-Encoding: gzip"])
        let br = requestFields(["Accept-Encoding: br"])
        store(cache, url: url, body: "gz", vary: ["accept-encoding"], request: gzip, now: 1_000)
        store(cache, url: url, body: "br", vary: ["accept-encoding"], request: br, now: 1_000)
        cache.flush()
        #expect(bodyFound(cache, url, request: gzip) == "gz" && bodyFound(cache, url, request: br) == "br")
        store(cache, url: url, body: "plain", now: 1_001)
        cache.flush()
        #expect(bodyFound(cache, url, request: gzip) == "plain")
        #expect(bodyFound(cache, url, request: br) == "plain")
        #expect(cache.statistics.memoryEntries == 0 && cache.statistics.diskEntries == 1)
    }

    /// The writer's discard of a body (its last reader ended) may run in a batch tried once and
    /// aborted (a full map), by when the body was readable, and pinned, again. A response may then
    /// be sending its chunks from the map by reference: the discard must wait for that reader too.
    @Test func aDiscardOfABodyPinnedAgainWaitsForItsReader() throws {
        let dir = temporaryDirectory()
        defer { removeTree(dir) }
        let cache = try makeCache(dir)
        defer { cache.close() }
        storeEntry(cache, url: "http://a/pinned", storedAt: 100)
        cache.flush()
        let reader = cache.makeReader()
        guard case .found(let entry) = reader.lookup(primaryKey: Array("http://a/pinned".utf8),
                                                     request: HeaderBlock()) else {
            Issue.record("not stored")
            return
        }
        var pin: BodyPin? = reader.pinBody(of: entry)
        #expect(pin != nil, "a disk body can be pinned")
        cache.disk!.enqueue(.discard(id: entry.record.bodyID, chunks: entry.record.chunkCount))
        cache.flush()
        #expect(reader.withChunk(of: entry, index: 0, verify: true) { _ in } == .delivered,
                "a pinned body's chunks must outlive a discard")
        pin = nil
        cache.flush()
        #expect(reader.withChunk(of: entry, index: 0, verify: true) { _ in } == .missing,
                "gone once its last reader ended")
    }
}

@Suite("Body pins")
struct BodyPinsTests {
    @Test func aPinnedBodysDeletionWaitsForItsLastReader() {
        let pins = BodyPins()
        #expect(pins.pin(7) && pins.pin(7))
        #expect(pins.postponeDeletion(of: 7, chunks: 4))
        pins.transactionEnded(deleted: [], postponed: [7], committed: true)
        #expect(pins.unpin(7) == nil, "one reader left")
        #expect(pins.unpin(7) == 4, "the last reader deletes the chunks")
        #expect(!pins.pin(7), "and nobody starts reading them while they go")
        pins.transactionEnded(deleted: [7], postponed: [], committed: true)
        #expect(pins.pinnedCount == 0)
    }

    @Test func aBodyBeingDeletedCannotBePinnedUntilTheTransactionEnds() {
        let pins = BodyPins()
        #expect(!pins.postponeDeletion(of: 1, chunks: 3), "nobody reads it: delete now")
        #expect(!pins.pin(1))
        pins.transactionEnded(deleted: [1], postponed: [], committed: false)
        #expect(pins.pin(1), "the deletion was aborted: the entry is still there")
    }

    @Test func anAbortedPostponementLeavesTheBodyAlone() {
        let pins = BodyPins()
        #expect(pins.pin(5))
        #expect(pins.postponeDeletion(of: 5, chunks: 2))
        pins.transactionEnded(deleted: [], postponed: [5], committed: false)
        #expect(pins.unpin(5) == nil, "the entry survived its aborted removal: its chunks stay")
    }

    @Test func aPurgeOfEverythingWaitsForNoReaderAndBlocksPinsUntilItEnds() {
        let pins = BodyPins()
        #expect(pins.pin(3))
        #expect(!pins.beginDeletingAll(), "a response reads a body: the purge goes entry by entry")
        #expect(pins.unpin(3) == nil)
        #expect(pins.beginDeletingAll())
        #expect(!pins.pin(4), "no pins while everything is being dropped")
        pins.transactionEnded(deleted: [], postponed: [], committed: true, endsDeletingAll: true)
        #expect(pins.pin(4))
    }

    @Test func aBodyStillStoredIsNotDeletedWhenItsReadersEnd() {
        let pins = BodyPins()
        #expect(pins.pin(9))
        #expect(pins.unpin(9) == nil)
    }
}

/// Blocks the writer thread until the returned semaphore is signalled; returns once the writer
/// is inside the barrier (so what is queued after it stays queued, and nothing before it is).
func stallWriter(_ cache: Cache) -> Semaphore {
    let entered = Semaphore()
    let gate = Semaphore()
    cache.disk!.enqueue(.barrier({
        entered.signal()
        gate.wait()
    }))
    entered.wait()
    return gate
}
