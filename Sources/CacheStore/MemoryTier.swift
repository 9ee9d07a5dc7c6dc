import CachePolicy
import HTTPWire
import Locking
import Synchronization

/// A stored response held whole in memory: immutable but for its last-touch time, shared by
/// reference between workers.
public final class CachedObject: Sendable {
    public let key: EntryKey
    public let record: EntryRecord
    public let body: [UInt8]
    /// `.allowedInMemoryOnly` objects exist only here; `.allowed` ones also on disk.
    public let tier: StoragePolicy
    /// When a hit last asked the disk to note an access (the record keeps the time it was stored).
    let lastTouched: Atomic<Int64>
    /// When the head the disk holds for this entry was written, and its facts (`MemoryTier.replaceHead`).
    let headPersistedAt: Int64
    let persistedFacts: EntryFacts
    /// `record.head` parsed, kept once a revalidation has parsed it: an entry revalidated once is
    /// usually revalidated again, and the next one need not parse it afresh.
    public let parsedHead: ResponseHead?
    /// Which stored response this is: new for every store, kept when a revalidation replaces the
    /// head, so a freshened head lands only on the response it freshens.
    let storeID: UInt64

    private static let storeIDs = Atomic<UInt64>(0)

    public init(key: EntryKey, record: EntryRecord, body: [UInt8], tier: StoragePolicy, headPersistedAt: Int64? = nil,
                persistedFacts: EntryFacts? = nil, parsedHead: ResponseHead? = nil) {
        self.key = key; self.record = record; self.body = body; self.tier = tier
        lastTouched = Atomic(record.lastAccess)
        self.headPersistedAt = headPersistedAt ?? record.storedAt
        self.persistedFacts = persistedFacts ?? record.facts
        self.parsedHead = parsedHead
        storeID = CachedObject.storeIDs.add(1, ordering: .relaxed).newValue
    }

    /// The same stored response with a new head (`MemoryTier.replaceHead`).
    private init(freshening old: CachedObject, record: EntryRecord, headPersistedAt: Int64, persistedFacts: EntryFacts,
                 parsedHead: ResponseHead?) {
        key = old.key; self.record = record; body = old.body; tier = old.tier
        lastTouched = Atomic(record.lastAccess)
        self.headPersistedAt = headPersistedAt
        self.persistedFacts = persistedFacts
        self.parsedHead = parsedHead
        storeID = old.storeID
    }

    func freshened(record: EntryRecord, headPersistedAt: Int64, persistedFacts: EntryFacts,
                   parsedHead: ResponseHead?) -> CachedObject {
        CachedObject(freshening: self, record: record, headPersistedAt: headPersistedAt,
                     persistedFacts: persistedFacts, parsedHead: parsedHead)
    }

    /// Whether `body` (a stored response found earlier) is this one, head replacements aside.
    func isSameStore(as body: StoredResponse.Body) -> Bool {
        switch body {
        case .memory(let other): return other.storeID == storeID
        case .disk(let id, _, _): return id != 0 && record.bodyID == id
        }
    }

    var footprint: Int {
        let fieldBytes = MemoryLayout<HeaderField>.stride
        let parsed = parsedHead.map { $0.headers.storage.count + $0.headers.count * fieldBytes } ?? 0
        return body.count + record.head.count + parsed + record.primaryKey.count + record.secondaryKey.count + 256
    }
}

/// The in-memory tier in front of LMDB: hot small entries ready to send, and the memory-only
/// ones. Least recently used objects leave first when `capacity` bytes are exceeded. One lock
/// for all workers; it is held for dictionary probes, a list splice and building a variant's
/// key only.
final class MemoryTier: Sendable {
    private struct Node {
        var object: CachedObject? {
            didSet { served = nil }
        }
        /// `object` as lookups hand it out: made by the first hit and kept, rather than made on
        /// every hit (an allocation and a copy of its record); never for an object no hit asks for.
        /// It holds the object, never the other way round, so the two go when the node lets go.
        private var served: StoredResponse?
        var prev = -1
        var next = -1

        init(object: CachedObject) { self.object = object }

        mutating func response() -> StoredResponse? {
            if let served { return served }
            guard let o = object else { return nil }
            let r = StoredResponse(key: o.key, record: o.record, body: .memory(o), tier: o.tier, parsedHead: o.parsedHead)
            served = r
            return r
        }
    }

    private struct State {
        var index: [EntryKey: Int] = [:]
        var nodes: [Node] = []
        var free: [Int] = []
        var head = -1  // most recent
        var tail = -1  // least recent
        var bytes = 0
        /// Vary spec per URL, with how many variants here use it.
        var specs: [KeyDigest: (spec: VariantSpec, count: Int)] = [:]

        mutating func unlink(_ i: Int) {
            let n = nodes[i]
            if n.prev >= 0 { nodes[n.prev].next = n.next } else { head = n.next }
            if n.next >= 0 { nodes[n.next].prev = n.prev } else { tail = n.prev }
            nodes[i].prev = -1
            nodes[i].next = -1
        }

        mutating func pushFront(_ i: Int) {
            nodes[i].next = head
            nodes[i].prev = -1
            if head >= 0 { nodes[head].prev = i }
            head = i
            if tail < 0 { tail = i }
        }

        @discardableResult
        mutating func remove(_ key: EntryKey) -> CachedObject? {
            guard let i = index.removeValue(forKey: key), let o = nodes[i].object else { return nil }
            unlink(i)
            nodes[i].object = nil
            free.append(i)
            bytes -= o.footprint
            if let s = specs[key.primary] {
                if s.count <= 1 { specs[key.primary] = nil } else { specs[key.primary] = (s.spec, s.count - 1) }
            }
            return o
        }

        mutating func insert(_ o: CachedObject) {
            let i: Int
            if let f = free.popLast() {
                i = f
                nodes[i] = Node(object: o)
            } else {
                i = nodes.count
                nodes.append(Node(object: o))
            }
            index[o.key] = i
            pushFront(i)
            bytes += o.footprint
        }

        func keys(ofPrimary primary: KeyDigest) -> [EntryKey] { index.keys.filter { $0.primary == primary } }

        /// Removes what a newer response under `key`, with `spec`, replaces: the object under
        /// `key`, and every variant of the URL when they were stored under another Vary spec.
        mutating func removeSuperseded(by key: EntryKey, spec: VariantSpec) {
            if let existing = specs[key.primary], existing.spec != spec {
                for k in keys(ofPrimary: key.primary) { remove(k) }
            } else {
                remove(key)
            }
        }
    }

    private let state = Locked(State())
    let capacity: Int
    let evictions = Atomic<Int>(0)

    init(capacity: Int) { self.capacity = capacity }

    var bytes: Int { state.withLock { $0.bytes } }
    var count: Int { state.withLock { $0.index.count } }

    /// Whether `key` holds a whole response (not a piece of one, status 206).
    func holdsWhole(_ key: EntryKey) -> Bool {
        state.withLock { s in s.index[key].flatMap { s.nodes[$0].object }.map { $0.record.facts.status != 206 } ?? false }
    }

    /// What the tier holds for a URL: nothing, its Vary spec only, or the response for the variant
    /// that `secondary` picks from the spec (marked most recently used).
    enum Held {
        case nothing
        case spec
        case response(StoredResponse)
    }

    /// The URL `primaryKey` (digest `primary`) looked up under one hold of the lock: its spec,
    /// then the variant `secondary` picks (a key built from the request's fields, without I/O).
    /// `secondary` runs under the lock every worker shares: it must never reach the cache (the
    /// lock is not reentrant), and should stay as short as building a key is.
    func find(_ primary: KeyDigest, primaryKey: [UInt8], secondary: (VariantSpec) -> [UInt8]) -> Held {
        state.withLock { s in
            guard let entry = s.specs[primary], sameBytes(entry.spec.primaryKey, primaryKey) else { return .nothing }
            let secondaryKey = secondary(entry.spec)
            guard let i = s.index[EntryKey(primary: primary, secondary: KeyDigest(secondaryKey))] else { return .spec }
            if s.head != i {
                s.unlink(i)
                s.pushFront(i)
            }
            guard let response = s.nodes[i].response(), sameBytes(response.record.secondaryKey, secondaryKey) else {
                return .spec
            }
            return .response(response)
        }
    }

    /// Adds or replaces `object`; variants of the URL stored under another Vary spec are dropped,
    /// and least recently used objects leave until the tier fits its capacity again.
    func insert(_ object: CachedObject, spec: VariantSpec) {
        guard object.footprint <= capacity else { return }
        var evicted = 0
        state.withLock { s in
            s.removeSuperseded(by: object.key, spec: spec)
            s.insert(object)
            let c = s.specs[object.key.primary]?.count ?? 0
            s.specs[object.key.primary] = (spec, c + 1)
            while s.bytes > capacity, s.tail >= 0, let victim = s.nodes[s.tail].object {
                s.remove(victim.key)
                evicted += 1
            }
        }
        if evicted > 0 { evictions.add(evicted, ordering: .relaxed) }
    }

    /// A freshened head of an entry held here reaches the disk at most this often (seconds): a URL
    /// revalidated on every request would otherwise cost a disk transaction each time, for a head
    /// only the memory copy serves while it is held. Until then the disk keeps the older head; an
    /// entry that leaves memory (or a restart) is at worst revalidated once more.
    static let headPersistInterval: Int64 = 5

    /// Swaps in a freshened head (RFC 9111 §3.2) keeping the body. Returns whether the disk should
    /// get the head too: always when the entry is not held here or the new head allows less than
    /// the disk's (a shorter lifetime, `no-cache`, other validators: the disk's copy must never be
    /// served where this one would not), else once `headPersistInterval` has passed since the
    /// disk's copy was written.
    ///
    /// `freshening`: the stored response the head belongs to. When another response was stored
    /// under the key since, it keeps its own head (the disk's copy is left to the writer, which
    /// checks the body too): an old head on a new body would announce the wrong length.
    /// Whether the tier held the entry (lookups see the new head at once), and whether its disk
    /// copy is due.
    func replaceHead(_ key: EntryKey, freshening body: StoredResponse.Body, facts: EntryFacts, head: [UInt8],
                     parsedHead: ResponseHead?, now: Int64) -> (held: Bool, persist: Bool) {
        state.withLock { s in
            guard let i = s.index[key], let old = s.nodes[i].object, old.isSameStore(as: body) else {
                return (false, true)
            }
            var r = old.record
            r.facts = facts
            r.head = head
            let persist = now - old.headPersistedAt >= MemoryTier.headPersistInterval || now < old.headPersistedAt
                || !old.persistedFacts.neverFresherThan(facts)
            let o = old.freshened(record: r, headPersistedAt: persist ? now : old.headPersistedAt,
                                  persistedFacts: persist ? facts : old.persistedFacts, parsedHead: parsedHead)
            s.bytes += o.footprint - old.footprint
            s.nodes[i].object = o
            return (true, persist)
        }
    }

    /// A newer response for `key` was stored on disk only (too large for this tier): the copy
    /// held here must not go on being served in its place (RFC 9111 §4: the most recent stored
    /// response is the one to use), nor, when the URL's Vary changed, any variant of it.
    func supersede(_ key: EntryKey, spec: VariantSpec) {
        state.withLock { $0.removeSuperseded(by: key, spec: spec) }
    }

    func removeVariants(_ primary: KeyDigest) {
        state.withLock { s in for k in s.keys(ofPrimary: primary) { s.remove(k) } }
    }

    func removeAll() {
        state.withLock { s in s = State() }
    }

    func removeStored(since time: Int64) {
        state.withLock { s in
            let doomed = s.index.compactMap { k, i in (s.nodes[i].object?.record.storedAt ?? 0) >= time ? k : nil }
            for k in doomed { s.remove(k) }
        }
    }

    func allObjects() -> [CachedObject] {
        state.withLock { s in s.index.values.compactMap { s.nodes[$0].object } }
    }
}
