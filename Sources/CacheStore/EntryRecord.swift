import CachePolicy

/// Everything stored about one variant except its body: what the proxy needs to decide and to
/// send the head. Stored in LMDB as `RecordCodec` writes it.
public struct EntryRecord: Sendable, Equatable {
    /// Where this entry's body chunks live (`chunks` database, keyed by id and index).
    public var bodyID: UInt64
    public var bodyLength: Int
    public var chunkSize: Int
    /// When it was first stored (for removeCachedResponses(since:)) and last served.
    public var storedAt: Int64
    public var lastAccess: Int64
    /// The full keys, to rule out digest collisions.
    public var primaryKey: [UInt8]
    public var secondaryKey: [UInt8]
    public var facts: EntryFacts
    /// Status line and end-to-end fields, ready to send after `Age` and our own fields.
    public var head: [UInt8]

    public init(bodyID: UInt64, bodyLength: Int, chunkSize: Int, storedAt: Int64, lastAccess: Int64,
                primaryKey: [UInt8], secondaryKey: [UInt8], facts: EntryFacts, head: [UInt8]) {
        self.bodyID = bodyID; self.bodyLength = bodyLength; self.chunkSize = chunkSize
        self.storedAt = storedAt; self.lastAccess = lastAccess; self.primaryKey = primaryKey
        self.secondaryKey = secondaryKey; self.facts = facts; self.head = head
    }

    public var chunkCount: Int { bodyLength == 0 ? 0 : (bodyLength + chunkSize - 1) / chunkSize }

    /// Body bytes in chunk `index`: `chunkSize`, less for the last one.
    func chunkLength(at index: Int) -> Int { min(chunkSize, bodyLength - index * chunkSize) }

    /// Bytes this entry accounts for against the disk capacity.
    var footprint: Int { bodyLength + head.count + primaryKey.count + secondaryKey.count + 256 }
}

/// The Vary field names the latest response for a URL named: how to compute the secondary key
/// of a request before looking for its variant.
public struct VariantSpec: Sendable, Equatable {
    public var primaryKey: [UInt8]
    public var varyFields: [[UInt8]]

    public init(primaryKey: [UInt8], varyFields: [[UInt8]]) { self.primaryKey = primaryKey; self.varyFields = varyFields }
}
