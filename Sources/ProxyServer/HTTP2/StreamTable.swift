/// The objects of one connection's open streams by stream id: open addressing over a power-of-two
/// array, probed linearly, without hashing through `Hasher` (a `Dictionary` lookup of an `Int32`
/// cost a SipHash, and a stream is looked up about six times). Ids are spread by a
/// multiplicative hash; ids a client picks to collide can only lengthen probes up to the table's
/// size, which the connection's concurrent-stream limit bounds.
struct StreamTable<Value: AnyObject> {
    private var ids: [Int32]
    private var values: [Value?]
    private var mask: Int
    private(set) var count = 0

    init(capacity: Int = 16) {
        var size = 8
        while size < capacity * 2 { size *= 2 }
        ids = Array(repeating: 0, count: size)
        values = Array(repeating: nil, count: size)
        mask = size - 1
    }

    var isEmpty: Bool { count == 0 }

    /// The slot `id` hashes to (0 marks an empty slot: no stream has id 0).
    private func home(_ id: Int32) -> Int {
        Int(truncatingIfNeeded: (UInt32(bitPattern: id) &* 0x9E37_79B1) >> 7) & mask
    }

    private func slot(of id: Int32) -> Int? {
        guard id != 0 else { return nil }  // 0 marks the empty slots: never an entry
        var i = home(id)
        while true {
            let here = ids[i]
            if here == id { return i }
            if here == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    subscript(id: Int32) -> Value? {
        get { slot(of: id).flatMap { values[$0] } }
        set {
            precondition(id != 0, "stream 0 is the connection")
            if let newValue { insert(id, newValue) } else { _ = removeValue(forKey: id) }
        }
    }

    private mutating func insert(_ id: Int32, _ value: Value) {
        if let i = slot(of: id) {
            values[i] = value
            return
        }
        if (count + 1) * 2 > ids.count { grow() }
        var i = home(id)
        while ids[i] != 0 { i = (i + 1) & mask }
        ids[i] = id
        values[i] = value
        count += 1
    }

    @discardableResult
    mutating func removeValue(forKey id: Int32) -> Value? {
        guard var hole = slot(of: id) else { return nil }
        let removed = values[hole]
        ids[hole] = 0
        values[hole] = nil
        count -= 1
        // Backward shift: entries after the hole that would no longer be found move into it.
        var i = (hole + 1) & mask
        while ids[i] != 0 {
            let want = home(ids[i])
            // Whether `want` lies cyclically in (hole, i]: if not, the entry's probe passed the hole.
            let reachable = hole <= i ? (hole < want && want <= i) : (hole < want || want <= i)
            if !reachable {
                ids[hole] = ids[i]
                values[hole] = values[i]
                ids[i] = 0
                values[i] = nil
                hole = i
            }
            i = (i + 1) & mask
        }
        return removed
    }

    mutating func removeAll() {
        guard count > 0 else { return }
        for i in ids.indices {
            ids[i] = 0
            values[i] = nil
        }
        count = 0
    }

    /// The values, in no particular order (a copy: the table may change while they are visited).
    var allValues: [Value] { values.compactMap { $0 } }

    private mutating func grow() {
        let old = zip(ids, values)
        var bigger = StreamTable(capacity: ids.count)
        for (id, value) in old where id != 0 { bigger.insert(id, value!) }
        self = bigger
    }
}
