import CacheStore
import EventLoop
import HTTPWire
import Locking

/// Request collapsing: one origin fetch per missing URL at a time, across all workers.
///
/// The first request that misses a URL *leads*: it fetches and stores exactly as it would alone,
/// and also copies the body into an `InFlightFetch`. Requests for the same URL that miss while the
/// leader is fetching *follow*: they wait for the leader's response head and then stream the body
/// from the shared copy as it arrives, each at its own pace. A response the cache will not store,
/// or a fetch that fails before its head, *releases* the followers at once to fetch on their own,
/// so an uncacheable URL never queues requests behind each other.
///
/// A response being stored on disk can be joined at any point of its download: a follower reads
/// the bytes the disk writer has committed from the disk (`BodyProgress`), and the rest from
/// memory, which holds only what is not committed yet (and what followers near the front still
/// read). Nobody waits for a slow follower then: it reads the disk at its own pace.
///
/// Otherwise (kept in memory only, too large to store, or a store given up halfway) memory stays
/// bounded the old way: only the first `joinWindow` bytes are kept for late joiners; after that
/// nobody new joins (they fetch on their own) and bytes every follower has read are dropped. A
/// follower more than `lagLimit` behind pauses the leader's origin read, as a slow client pauses its
/// own fetch, but only while it keeps reading: one that reads nothing for `stallTimeout` while the
/// leader waits for it is detached (it fetches on its own if it has not answered yet, else its
/// response is cut), so a client that stops reading can never stall everyone else's download.
///
/// A URL whose last response was not stored gets a *pass marker* for `passFor` seconds (Varnish's
/// hit-for-miss): its requests fetch on their own at once instead of queueing behind a leader
/// whose answer nobody can share. A response that is stored (or shared) clears the marker.
final class InFlightTable: Sendable {
    /// Bytes of body kept for requests that join late, when the body is not being stored on disk.
    static let joinWindow = 2 << 20
    /// How far the slowest follower may trail the origin before the origin read pauses.
    static let lagLimit = 4 << 20
    /// How long a follower the leader waits for may read nothing before it is detached.
    static let stallTimeout = 5.0

    /// How long a URL stays marked uncacheable after a response that was not stored.
    static let passFor = 30.0
    /// A marker younger than this is not renewed by another answer that was not stored: a URL
    /// forwarded thousands of times a second writes its marker a few times a minute, not each time.
    static let passRenewAfter = 5.0
    /// URLs remembered as uncacheable at most; expired markers go first, then any.
    static let passCapacity = 10_000

    private let fetches = Locked<[ByteKey: InFlightFetch]>([:])
    /// URLs with a background refresh under way (stale-while-revalidate): one at a time per URL.
    private let refreshing = Locked<Set<ByteKey>>([])
    /// URLs being fetched whole to fill the cache from a ranged miss.
    private let filling = Locked<Set<ByteKey>>([])
    /// Pass markers: until when (monotonic seconds) a URL's requests fetch on their own.
    private let passes = Locked<[ByteKey: Double]>([:])
    /// Dates the pass markers.
    private let clock: any ProxyClock
    /// Downloads running with no client attached, on every worker (`DetachedFetch`).
    let detached = DetachedFetchBudget()

    init(clock: any ProxyClock = SystemClock.shared) {
        self.clock = clock
    }

    enum Role {
        case lead(InFlightFetch)
        case follow(InFlightFetch, id: Int)
        /// A fetch for the URL is under way but too far along to join (its body is not on disk).
        case alone
        /// The URL's last response was not stored: fetch on your own. `renew`: the marker is old
        /// enough that another answer not stored should write it again.
        case pass(renew: Bool)
    }

    /// Leads a fetch of `key`, or follows the one under way.
    func join(key: [UInt8], participant: ParticipantHandle, now: Double) -> Role {
        if let left = passLeft(key) { return .pass(renew: left < InFlightTable.passFor - InFlightTable.passRenewAfter) }
        return fetches.withLock { table in
            if let existing = table[ByteKey(key)] {
                if let id = existing.addFollower(participant, now: now) { return .follow(existing, id: id) }
                return .alone
            }
            let fetch = InFlightFetch(key: key, leader: participant)
            table[ByteKey(key)] = fetch
            return .lead(fetch)
        }
    }

    /// Leads a fetch of `key` when none is under way (a background refresh's, see `DetachedFetch`, `.refresh`).
    func lead(key: [UInt8], participant: ParticipantHandle) -> InFlightFetch? {
        fetches.withLock { table in
            guard table[ByteKey(key)] == nil else { return nil }
            let fetch = InFlightFetch(key: key, leader: participant)
            table[ByteKey(key)] = fetch
            return fetch
        }
    }

    /// The fetch no longer takes followers (its head said uncacheable, or it ended).
    func remove(_ fetch: InFlightFetch) {
        fetches.withLock { table in
            // Found once: the key is hashed once, not again to remove it.
            if let i = table.index(forKey: ByteKey(fetch.key)), table.values[i] === fetch { table.remove(at: i) }
        }
    }

    var count: Int { fetches.withLock { $0.count } }

    /// `key` was purged or invalidated: a fetch of it under way takes nobody new (those reading it
    /// finish), so that no request after the removal is answered from what came before it.
    func forget(_ key: [UInt8]) {
        _ = fetches.withLock { $0.removeValue(forKey: ByteKey(key)) }
    }

    /// Claims the background refresh of `key`; false when one is already running.
    func beginRefresh(_ key: [UInt8]) -> Bool {
        refreshing.withLock { $0.insert(ByteKey(key)).inserted }
    }

    func endRefresh(_ key: [UInt8]) {
        _ = refreshing.withLock { $0.remove(ByteKey(key)) }
    }

    /// Claims filling the cache from a ranged miss of `key` (`RangeFill`); false when one is under
    /// way, and the range then goes to the origin as it is rather than fetching the object twice.
    func beginFill(_ key: [UInt8]) -> Bool {
        filling.withLock { $0.insert(ByteKey(key)).inserted }
    }

    func endFill(_ key: [UInt8]) {
        _ = filling.withLock { $0.remove(ByteKey(key)) }
    }

    // MARK: - Pass markers

    /// `key`'s response was not stored: its requests stop waiting on each other for `passFor`.
    func markPass(_ key: [UInt8]) {
        let now = clock.monotonic
        passes.withLock { p in
            if p.count >= InFlightTable.passCapacity, p[ByteKey(key)] == nil {
                p = p.filter { $0.value > now }
                if p.count >= InFlightTable.passCapacity, let any = p.keys.first { p[any] = nil }
            }
            p[ByteKey(key)] = now + InFlightTable.passFor
        }
    }

    /// `key`'s response was stored or shared: collapse its misses again.
    func clearPass(_ key: [UInt8]) {
        passes.withLock { p in
            if !p.isEmpty { p[ByteKey(key)] = nil }
        }
    }

    func isPass(_ key: [UInt8]) -> Bool { passLeft(key) != nil }

    /// Seconds until `key`'s pass marker expires; nil when it has none (an expired one is dropped).
    func passLeft(_ key: [UInt8]) -> Double? {
        passes.withLock { p in
            guard !p.isEmpty, let until = p[ByteKey(key)] else { return nil }
            let left = until - clock.monotonic
            if left > 0 { return left }
            p[ByteKey(key)] = nil
            return nil
        }
    }
}

/// Something on an event loop that an in-flight fetch wakes: a follower when there is news, the
/// leader when the followers it waited for have caught up.
protocol CollapseParticipant: AnyObject {
    func collapseProgress()
}

/// A way to reach a participant from any thread: wakes run on the participant's own loop.
final class ParticipantHandle: @unchecked Sendable {
    let loop: EventLoop
    /// Read and written only on `loop`'s thread.
    weak var target: (any CollapseParticipant)?

    init(loop: EventLoop, target: any CollapseParticipant) {
        self.loop = loop
        self.target = target
    }

    func wake() {
        loop.execute { [self] in target?.collapseProgress() }
    }
}

/// One collapsed origin fetch: the leader's response head and a window of its body, shared with the
/// followers on any worker.
final class InFlightFetch: Sendable {
    enum Phase: Equatable {
        case awaitingHead
        case streaming
        /// The whole body is here.
        case complete
        /// The body was cut short: followers that have started must cut their responses too.
        case failed
        /// Followers fetch on their own (uncacheable response, or no head).
        case released
    }

    /// What a follower needs to answer: the origin's head, and which request headers it varies on.
    struct Head: Sendable {
        var response: ResponseHead
        var varyFields: [[UInt8]]
        var varyStar: Bool
        var secondaryKey: [UInt8]
        /// Fields only the leader's client may see (`private="…"`, `no-cache="…"`); `Set-Cookie`
        /// is never passed to followers either.
        var omitFields: [[UInt8]]
    }

    fileprivate struct Follower {
        var handle: ParticipantHandle
        var offset = 0
        /// When it last took bytes (monotonic seconds).
        var lastRead: Double
        /// A wake is queued and has not run yet: no need for another.
        var wakePending = false
    }

    fileprivate struct State {
        var phase = Phase.awaitingHead
        var head: Head?
        var leader: ParticipantHandle
        var leaderPaused = false
        /// Followers dropped for lagging; told so when they next look.
        var detached: Set<Int> = []
        /// Body bytes from offset `base` on, in segments of `segmentSize` (all full but the last).
        var segments: [[UInt8]] = []
        var base = 0
        var total = 0
        var followers: [Int: Follower] = [:]
        var nextID = 0
        /// The body as the disk writer commits it, while it is being stored on disk.
        var disk: DiskBacking?

        /// Bytes from the body's start that a follower can read from the disk instead of memory.
        var onDisk: Int { disk?.progress.committedBytes ?? 0 }

        /// The store on disk goes on with the download: every byte will be readable from the disk.
        var storeGrowing: Bool { disk.map { !$0.stopped && $0.progress.committedBytes != nil } ?? false }

        var joinable: Bool {
            guard phase == .awaitingHead || phase == .streaming else { return false }
            return storeGrowing || (base == 0 && total <= InFlightTable.joinWindow)
        }

        /// Where a follower needs memory from: its offset, or past what the disk holds.
        func memoryNeed(_ f: Follower, onDisk: Int) -> Int { max(f.offset, onDisk) }

        /// The lowest offset any follower still needs from memory (`total` when none does).
        var slowestOffset: Int {
            let disk = onDisk
            return followers.values.lazy.map { self.memoryNeed($0, onDisk: disk) }.min() ?? total
        }

        /// Whether followers hold the leader back: never while the store on disk keeps up with
        /// the download (they read the disk), else when the slowest is more than `lagLimit` behind.
        var followersLag: Bool {
            !followers.isEmpty && !storeGrowing && total - slowestOffset > InFlightTable.lagLimit
        }

        /// Drops segments nobody needs from memory: those every follower has read (or can read
        /// from the disk), and, while newcomers may still join, those the disk already holds.
        mutating func trim() {
            var keepFrom = total
            if joinable {
                // Within the memory window with no disk to read from, everything stays.
                guard storeGrowing else { return }
                keepFrom = onDisk
            }
            if !followers.isEmpty { keepFrom = min(keepFrom, slowestOffset) }
            let size = InFlightFetch.segmentSize
            var dropped = 0
            while dropped < segments.count, segments[dropped].count == size, base + (dropped + 1) * size <= keepFrom {
                dropped += 1
            }
            if dropped > 0 {
                segments.removeFirst(dropped)
                base += dropped * size
            }
        }

        /// Handles of followers to wake (each at most once until it runs).
        mutating func takeWakes(all: Bool) -> [ParticipantHandle] {
            var out: [ParticipantHandle] = []
            for (id, f) in followers where !f.wakePending && (all || f.offset < total) {
                followers[id]!.wakePending = true
                out.append(f.handle)
            }
            return out
        }
    }

    static let segmentSize = 64 * 1024

    let key: [UInt8]
    private let state: Locked<State>

    init(key: [UInt8], leader: ParticipantHandle) {
        self.key = key
        state = Locked(State(leader: leader))
    }

    // MARK: - Leader side

    /// The leader's client went away and something else carries the fetch on.
    func replaceLeader(_ handle: ParticipantHandle) {
        state.withLock { $0.leader = handle }
    }

    var leaderIsPaused: Bool { state.withLock { $0.leaderPaused } }

    var hasFollowers: Bool { state.withLock { !$0.followers.isEmpty } }

    /// The body is being stored on disk as it arrives, so every byte stays readable from there.
    var isStoredOnDisk: Bool { state.withLock { $0.storeGrowing } }

    /// Body bytes held in memory for followers.
    var retainedBytes: Int { state.withLock { $0.total - $0.base } }

    /// How many followers were detached for lagging.
    var detachedCount: Int { state.withLock { $0.detached.count } }

    /// The response will be stored: followers may answer with it. `disk`: the body is being stored
    /// on disk, and late joiners read what is committed from there.
    func publish(_ head: Head, disk: DiskBacking? = nil) {
        let wakes = state.withLock { s -> [ParticipantHandle] in
            s.head = head
            s.disk = disk
            s.phase = .streaming
            return s.takeWakes(all: true)
        }
        for h in wakes { h.wake() }
    }

    /// Adds body bytes. Returns true when the leader should pause its origin read (a follower lags);
    /// then `detachStalled` must be asked every `stallTimeout` until the pause ends.
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let (wakes, pause) = state.withLock { s -> ([ParticipantHandle], Bool) in
            var rest = bytes
            while !rest.isEmpty {
                if s.segments.isEmpty || s.segments[s.segments.count - 1].count == InFlightFetch.segmentSize {
                    var fresh: [UInt8] = []
                    fresh.reserveCapacity(InFlightFetch.segmentSize)
                    s.segments.append(fresh)
                }
                let last = s.segments.count - 1
                let take = min(rest.count, InFlightFetch.segmentSize - s.segments[last].count)
                s.segments[last].append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<take]))
                rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            }
            s.total += bytes.count
            s.trim()
            let pause = s.followersLag
            if pause { s.leaderPaused = true }
            return (s.takeWakes(all: false), pause)
        }
        for h in wakes { h.wake() }
        return pause
    }

    /// While the leader waits: followers behind by more than the lag limit that have read nothing
    /// for `stallTimeout` are detached. Returns whether the leader still has to wait.
    func detachStalled(now: Double) -> Bool {
        let (wakes, stillPaused) = state.withLock { s -> ([ParticipantHandle], Bool) in
            var wakes: [ParticipantHandle] = []
            let onDisk = s.onDisk
            for (id, f) in s.followers
            where s.total - s.memoryNeed(f, onDisk: onDisk) > InFlightTable.lagLimit
                && now - f.lastRead >= InFlightTable.stallTimeout {
                s.followers[id] = nil
                s.detached.insert(id)
                wakes.append(f.handle)
            }
            s.trim()
            if s.takeLeaderResume() != nil { return (wakes, false) }
            return (wakes, s.leaderPaused)
        }
        for h in wakes { h.wake() }
        return stillPaused
    }

    /// The fetch ended: complete, or cut short (`failed`). Before a head was published, followers
    /// are released instead.
    func finish(failed: Bool) {
        let wakes = state.withLock { s -> [ParticipantHandle] in
            switch s.phase {
            case .awaitingHead: s.phase = .released
            case .streaming: s.phase = failed ? .failed : .complete
            case .complete, .failed, .released: return []
            }
            s.trim()
            return s.takeWakes(all: true)
        }
        for h in wakes { h.wake() }
    }

    /// The response will not be stored: followers fetch on their own.
    func release() { finish(failed: false) }

    /// The store on disk was given up halfway: what it committed stays readable (pinned) for the
    /// followers already reading it, but nobody new joins beyond the memory window.
    func storeStopped() {
        let wakes = state.withLock { s -> [ParticipantHandle] in
            guard let d = s.disk, !d.stopped else { return [] }
            d.stopped = true
            // From now on memory must hold everything past the disk for every follower, and the
            // read waits for the slowest: one already far behind would hold everyone up while it
            // reads the disk. It is detached, as a follower that lags while nothing is stored is.
            var wakes: [ParticipantHandle] = []
            for (id, f) in s.followers where s.total - f.offset > InFlightTable.lagLimit {
                s.followers[id] = nil
                s.detached.insert(id)
                wakes.append(f.handle)
            }
            s.trim()
            return wakes
        }
        for h in wakes { h.wake() }
    }

    // MARK: - Follower side

    /// A new follower, or nil when the fetch is too far along (or over) to join.
    func addFollower(_ handle: ParticipantHandle, now: Double) -> Int? {
        let (id, wakeLeader) = state.withLock { s -> (Int?, ParticipantHandle?) in
            guard s.joinable else { return (nil, nil) }
            let id = s.nextID
            s.nextID += 1
            s.followers[id] = Follower(handle: handle, lastRead: now)
            // A leader whose client holds the read back stops doing so for a follower (`OriginRelay`).
            return (id, s.storeGrowing && s.followers.count == 1 ? s.leader : nil)
        }
        wakeLeader?.wake()
        return id
    }

    /// The leader's own client, too slow for the origin, becomes a follower at the front of the
    /// body (`offset`, what it has been sent) so that the fetch runs at the origin's pace: only
    /// while the store on disk keeps every byte readable. Nil otherwise.
    func addFollower(_ handle: ParticipantHandle, at offset: Int, now: Double) -> Int? {
        state.withLock { s in
            // Growing, the store holds on disk every byte memory no longer does.
            guard s.phase == .streaming, s.storeGrowing, offset <= s.total else { return nil }
            let id = s.nextID
            s.nextID += 1
            s.followers[id] = Follower(handle: handle, offset: offset, lastRead: now)
            return id
        }
    }

    /// A follower stops following (its client left, or it fetches on its own).
    func leave(_ id: Int) {
        let resume = state.withLock { s -> ParticipantHandle? in
            s.detached.remove(id)
            guard s.followers.removeValue(forKey: id) != nil else { return nil }
            s.trim()
            return s.takeLeaderResume()
        }
        resume?.wake()
    }

    enum Poll {
        case waiting
        case released
        case head(Head)
    }

    /// Before a follower has its head: what to do.
    func pollHead(_ id: Int) -> Poll {
        state.withLock { s in
            s.followers[id]?.wakePending = false
            if s.detached.contains(id) { return .released }
            switch s.phase {
            case .awaitingHead: return .waiting
            case .released: return .released
            case .streaming, .complete, .failed: return s.head.map { .head($0) } ?? .released
            }
        }
    }

    enum ReadEnd {
        /// More may come.
        case more
        /// The follower has every byte.
        case complete
        /// The body was cut short.
        case failed
        /// The follower fell too far behind and was dropped.
        case detached
    }

    /// Passes the follower up to `limit` unread bytes, in pieces, and moves it past them: bytes the
    /// fetch no longer holds in memory come from the disk through `disk`.
    func read(_ id: Int, limit: Int, now: Double, disk: CacheReader? = nil,
              _ deliver: (UnsafeRawBufferPointer) -> Void) -> ReadEnd {
        var budget = limit
        while true {
            // Decided under the lock each time: memory may be trimmed past the follower between two
            // looks, and then what it needs is on disk.
            let step = state.withLock { s -> ReadStep in
                guard var f = s.followers[id] else { return .end(s.detached.contains(id) ? .detached : .failed, nil) }
                f.wakePending = false
                if budget > 0, f.offset < s.base {
                    s.followers[id] = f
                    return s.disk.map { .disk($0, offset: f.offset) } ?? .end(.failed, nil)
                }
                while budget > 0, f.offset < s.total {
                    let index = (f.offset - s.base) / InFlightFetch.segmentSize
                    let within = (f.offset - s.base) % InFlightFetch.segmentSize
                    let take = s.segments[index].withUnsafeBytes { seg -> Int in
                        let n = min(seg.count - within, budget)
                        deliver(UnsafeRawBufferPointer(rebasing: seg[within..<within + n]))
                        return n
                    }
                    f.offset += take
                    budget -= take
                }
                if budget < limit { f.lastRead = now }
                s.followers[id] = f
                s.trim()
                let resume = s.takeLeaderResume()
                if f.offset < s.total { return .end(.more, resume) }
                switch s.phase {
                case .complete: return .end(.complete, resume)
                case .failed, .released: return .end(.failed, resume)
                case .awaitingHead, .streaming: return .end(.more, resume)
                }
            }
            switch step {
            case .end(let end, let resume):
                resume?.wake()
                return end
            case .disk(let backing, let offset):
                // Behind what memory holds: a committed chunk on disk, outside the lock.
                let size = backing.progress.chunkSize
                var taken = 0
                let read = disk?.withCommittedChunk(of: backing.progress, index: offset / size) { chunk in
                    let within = offset % size
                    taken = min(chunk.count - within, budget)
                    if taken > 0 { deliver(UnsafeRawBufferPointer(rebasing: chunk[within..<within + taken])) }
                }
                guard read == .delivered, taken > 0 else {
                    // Neither in memory nor on disk (the store's batch failed): this follower cannot go on.
                    leave(id)
                    return .failed
                }
                budget -= taken
                state.withLock { s in
                    s.followers[id]?.offset += taken
                    s.followers[id]?.lastRead = now
                }
            }
        }
    }

    private enum ReadStep {
        case disk(DiskBacking, offset: Int)
        case end(ReadEnd, ParticipantHandle?)
    }
}

/// A body being stored on disk while it is fetched: how much the writer has committed, and a pin
/// that keeps those chunks readable for the fetch's followers even if the store is given up.
final class DiskBacking: @unchecked Sendable {
    let progress: BodyProgress
    /// Let go with the fetch.
    private let pin: BodyPin?
    /// The store was given up: no more bytes will reach the disk. Written under the fetch's lock.
    var stopped = false

    init(progress: BodyProgress, pin: BodyPin?) {
        self.progress = progress
        self.pin = pin
    }
}

extension InFlightFetch.State {
    /// The leader, if it paused for followers that have now caught up (or gone).
    fileprivate mutating func takeLeaderResume() -> ParticipantHandle? {
        guard leaderPaused, followers.isEmpty || storeGrowing || total - slowestOffset <= InFlightTable.lagLimit / 2
        else { return nil }
        leaderPaused = false
        return leader
    }
}
