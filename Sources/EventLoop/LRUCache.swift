/// A map of at most `capacity` entries that forgets the least recently used one to make room: a
/// flood of new keys pushes out only what nobody asked for lately, never everything at once.
/// Entries live in one array linked newest-to-oldest by index, so nothing is allocated per use.
/// Inlinable so that users in other modules get it specialised, not through generic witnesses.
public struct LRUCache<Key: Hashable, Value> {
    @usableFromInline struct Entry {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var newer: Int
        @usableFromInline var older: Int

        @inlinable init(key: Key, value: Value, newer: Int, older: Int) {
            self.key = key; self.value = value; self.newer = newer; self.older = older
        }
    }

    public let capacity: Int
    @usableFromInline var positions: [Key: Int] = [:]
    @usableFromInline var entries: [Entry] = []
    @usableFromInline var newest = -1
    @usableFromInline var oldest = -1

    @inlinable public init(capacity: Int) {
        precondition(capacity > 0, "an LRU cache holds at least one entry")
        self.capacity = capacity
    }

    @inlinable public var count: Int { entries.count }

    /// The value for `key`, which becomes the most recently used.
    @inlinable public mutating func value(for key: Key) -> Value? {
        guard let i = positions[key] else { return nil }
        moveToFront(i)
        return entries[i].value
    }

    /// The value for `key` without marking it used.
    @inlinable public func peek(_ key: Key) -> Value? {
        positions[key].map { entries[$0].value }
    }

    /// Stores `value` as the most recently used, evicting the least recently used entry when full.
    @inlinable public mutating func set(_ value: Value, for key: Key) {
        if let i = positions[key] {
            entries[i].value = value
            moveToFront(i)
            return
        }
        let i: Int
        if entries.count < capacity {
            i = entries.count
            entries.append(Entry(key: key, value: value, newer: -1, older: -1))
        } else {
            i = oldest
            unlink(i)
            positions[entries[i].key] = nil
            entries[i] = Entry(key: key, value: value, newer: -1, older: -1)
        }
        positions[key] = i
        linkAsNewest(i)
    }

    /// Keys from most to least recently used (for tests and diagnostics).
    public var keysByRecency: [Key] {
        var out: [Key] = []
        var i = newest
        while i >= 0 {
            out.append(entries[i].key)
            i = entries[i].older
        }
        return out
    }

    @inlinable mutating func moveToFront(_ i: Int) {
        guard i != newest else { return }
        unlink(i)
        linkAsNewest(i)
    }

    @inlinable mutating func unlink(_ i: Int) {
        let newer = entries[i].newer, older = entries[i].older
        if newer >= 0 { entries[newer].older = older } else { newest = older }
        if older >= 0 { entries[older].newer = newer } else { oldest = newer }
        entries[i].newer = -1
        entries[i].older = -1
    }

    @inlinable mutating func linkAsNewest(_ i: Int) {
        entries[i].older = newest
        entries[i].newer = -1
        if newest >= 0 { entries[newest].newer = i }
        newest = i
        if oldest < 0 { oldest = i }
    }
}

extension LRUCache: Sendable where Key: Sendable, Value: Sendable {}
extension LRUCache.Entry: Sendable where Key: Sendable, Value: Sendable {}
