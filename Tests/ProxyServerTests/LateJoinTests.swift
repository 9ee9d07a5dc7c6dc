import CachePolicy
import CacheStore
import EventLoop
import Glibc
import HTTPWire
import Testing
@testable import ProxyServer

/// Joining a download at any point: a body being stored on disk is read from what the disk writer
/// has committed, and from memory past that. Driven by hand over a real cache in a temporary
/// directory; `Cache.flush` waits for the writer, so what is committed is known exactly.
@Suite(.serialized) struct LateJoinTests {
    final class Nobody: CollapseParticipant {
        func collapseProgress() {}
    }

    let loop = EventLoop()
    let nobody = Nobody()
    var handle: ParticipantHandle { ParticipantHandle(loop: loop, target: nobody) }
    static let chunk = 256 * 1024

    func body(_ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) } }

    func withCache(_ run: (Cache) throws -> Void) throws {
        var template = Array("/tmp/larder-late-join.XXXXXX".utf8CString)
        let dir = String(cString: template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }!)
        let cache = try Cache(settings: CacheSettings(disk: DiskStoreSettings(directory: dir, capacity: 256 << 20,
                                                                              chunkSize: LateJoinTests.chunk),
                                                      memoryObjectLimit: 0),
                              log: { _ in })
        defer {
            cache.close()
            for name in ["data.mdb", "lock.mdb", "larder.lock"] { unlink(dir + "/" + name) }
            rmdir(dir)
        }
        try run(cache)
    }

    func facts() -> EntryFacts {
        EntryFacts(status: 200, requestTime: 1_000, responseTime: 1_001, dateValue: 1_001, correctedInitialAge: 0,
                   freshnessLifetime: 60, heuristic: false, noCache: false, mustRevalidate: false,
                   staleWhileRevalidate: 0, staleIfError: 0, etag: nil, lastModified: nil, contentLength: nil,
                   varyFields: [], varyStar: false)
    }

    func head() -> InFlightFetch.Head {
        InFlightFetch.Head(response: ResponseHead(), varyFields: [], varyStar: false, secondaryKey: [], omitFields: [])
    }

    /// A leader storing `key` on disk: the writer and the shared fetch, as `CacheExchange` makes them.
    func lead(_ table: InFlightTable, _ cache: Cache, key: [UInt8], length: Int) -> (InFlightFetch, EntryWriter)? {
        guard case .lead(let fetch) = table.join(key: key, participant: handle, now: 0),
              let w = cache.beginStore(primaryKey: key, secondaryKey: [], facts: facts(), head: [], tier: .allowed,
                                       expectedLength: length, now: 1_000),
              let (progress, pin) = w.followProgress() else { return nil }
        fetch.publish(head(), disk: DiskBacking(progress: progress, pin: pin))
        return (fetch, w)
    }

    /// What the leader's tee does with each piece of body.
    func feed(_ bytes: ArraySlice<UInt8>, _ fetch: InFlightFetch, _ w: EntryWriter) -> Bool {
        bytes.withUnsafeBytes { piece in
            w.append(piece)
            if w.isAbandoned { fetch.storeStopped() }
            return fetch.append(piece)
        }
    }

    func readAll(_ fetch: InFlightFetch, _ id: Int, _ reader: CacheReader, limit: Int = 100_000) -> ([UInt8], InFlightFetch.ReadEnd) {
        var got: [UInt8] = []
        while true {
            let end = fetch.read(id, limit: limit, now: 0, disk: reader) { got.append(contentsOf: $0) }
            if end != .more || got.count % limit != 0 { return (got, end) }
        }
    }

    @Test func aRequestJoiningFarIntoADownloadReadsTheStartFromDiskAndTheRestFromMemory() throws {
        try withCache { cache in
            let table = InFlightTable(clock: ManualClock())
            let key = Array("http://o/big".utf8)
            let all = body(12 * LateJoinTests.chunk + 1_000)
            guard let (fetch, w) = lead(table, cache, key: key, length: all.count) else {
                Issue.record("the leader stores on disk"); return
            }
            let firstPart = 9 * LateJoinTests.chunk + 500
            #expect(!feed(all[..<firstPart], fetch, w))
            cache.flush()
            // One more piece: the committed part leaves memory, as nobody needs it from there.
            #expect(!feed(all[firstPart..<firstPart + 10], fetch, w))
            #expect(fetch.retainedBytes < 2 * LateJoinTests.chunk,
                    "memory holds only what the disk does not, \(fetch.retainedBytes) bytes")
            guard case .follow(_, let late) = table.join(key: key, participant: handle, now: 0) else {
                Issue.record("far past the memory window, a download stored on disk is still joined"); return
            }
            let reader = cache.makeReader()
            let (start, end) = readAll(fetch, late, reader)
            #expect(end == .more)
            #expect(start == Array(all[..<(firstPart + 10)]))
            #expect(!feed(all[(firstPart + 10)...], fetch, w))
            w.finish(head: Array("HTTP/1.1 200 OK\r\n".utf8), facts: facts())
            fetch.finish(failed: false)
            table.remove(fetch)
            let (rest, last) = readAll(fetch, late, reader)
            #expect(last == .complete)
            #expect(start + rest == all)
        }
    }

    @Test func aFollowerThatStopsReadingNeverPausesADownloadStoredOnDisk() throws {
        try withCache { cache in
            let table = InFlightTable(clock: ManualClock())
            let key = Array("http://o/slow".utf8)
            let all = body(4 * InFlightTable.lagLimit)
            guard let (fetch, w) = lead(table, cache, key: key, length: all.count),
                  case .follow(_, let stalled) = table.join(key: key, participant: handle, now: 0) else {
                Issue.record("lead and follow expected"); return
            }
            var offset = 0
            while offset < all.count {
                let n = min(LateJoinTests.chunk, all.count - offset)
                #expect(!feed(all[offset..<offset + n], fetch, w), "no pause at \(offset)")
                offset += n
                if offset % (4 * LateJoinTests.chunk) == 0 { cache.flush() }
            }
            #expect(!fetch.leaderIsPaused)
            #expect(!fetch.detachStalled(now: 100), "nobody is detached: the stalled one reads the disk later")
            #expect(fetch.retainedBytes <= 4 * LateJoinTests.chunk + InFlightFetch.segmentSize)
            w.finish(head: Array("HTTP/1.1 200 OK\r\n".utf8), facts: facts())
            fetch.finish(failed: false)
            let (got, end) = readAll(fetch, stalled, cache.makeReader())
            #expect(end == .complete)
            #expect(got == all)
        }
    }

    @Test func aStoreGivenUpHalfwayClosesTheDoorToNewcomersButNotToThoseReadingIt() throws {
        try withCache { cache in
            let table = InFlightTable(clock: ManualClock())
            let key = Array("http://o/dropped".utf8)
            let all = body(6 * LateJoinTests.chunk)
            guard let (fetch, w) = lead(table, cache, key: key, length: all.count) else {
                Issue.record("the leader stores on disk"); return
            }
            let early = 5 * LateJoinTests.chunk
            _ = feed(all[..<early], fetch, w)
            cache.flush()
            _ = feed(all[early..<early + 1], fetch, w)
            guard case .follow(_, let reading) = table.join(key: key, participant: handle, now: 0) else {
                Issue.record("joined while the store goes on"); return
            }
            // The store is given up (as when the disk writer falls too far behind): its discard of
            // the chunks waits for the fetch's pin.
            w.abandon()
            fetch.storeStopped()
            cache.flush()
            guard case .alone = table.join(key: key, participant: handle, now: 0) else {
                Issue.record("with no store going on, nobody joins past the memory window"); return
            }
            _ = feed(all[(early + 1)...], fetch, w)
            fetch.finish(failed: false)
            let (got, end) = readAll(fetch, reading, cache.makeReader())
            #expect(end == .complete)
            #expect(got == all)
        }
    }
}

/// A follower reading while the leader appends and the disk writer commits on other threads: the
/// memory it reads may be trimmed between two looks, and what it needs is then read from disk. Every
/// byte must arrive, in order, whichever way it comes.
@Suite(.serialized) struct LateJoinRaceTests {
    @Test func aFollowerReadingWhileMemoryIsTrimmedUnderItGetsEveryByte() throws {
        let helper = LateJoinTests()
        try helper.withCache { cache in
            let table = InFlightTable(clock: ManualClock())
            let key = Array("http://o/race".utf8)
            let all = helper.body(24 << 20)
            guard let (fetch, w) = helper.lead(table, cache, key: key, length: all.count),
                  case .follow(_, let id) = table.join(key: key, participant: helper.handle, now: 0) else {
                Issue.record("lead and follow expected"); return
            }
            // Used by the leader's thread only, until `join`.
            nonisolated(unsafe) let (leading, writer) = (helper, w)
            let leader = LoopThread {
                var offset = 0
                while offset < all.count {
                    let n = min(48 * 1024, all.count - offset)
                    _ = leading.feed(all[offset..<offset + n], fetch, writer)
                    offset += n
                    if offset % (1 << 20) < n { cache.flush() }
                }
                writer.finish(head: Array("HTTP/1.1 200 OK\r\n".utf8), facts: leading.facts())
                fetch.finish(failed: false)
            }
            leader.start()
            let reader = cache.makeReader()
            var got: [UInt8] = []
            got.reserveCapacity(all.count)
            while true {
                let end = fetch.read(id, limit: 5_000, now: 0, disk: reader) { got.append(contentsOf: $0) }
                if end == .complete { break }
                #expect(end == .more)
                if end != .more { break }
            }
            leader.join()
            #expect(got.count == all.count)
            #expect(got == all)
        }
    }
}

