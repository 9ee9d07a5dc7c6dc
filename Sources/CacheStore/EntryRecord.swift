import CachePolicy

/// Everything stored about one variant except its body: what the proxy needs to decide and to
/// send the head. Encoded as a versioned big-endian record in LMDB.
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

    /// Version 3 records end with a CRC32C of everything before it, and their bodies' chunks carry
    /// one each (`BodyChunk`). Records of earlier versions (1 could hold `Set-Cookie`, 2 had no
    /// checksums) are not read: the start-up sweep removes them and their chunks.
    static let formatVersion: UInt8 = 3
    static let checksumSize = 4

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(head.count + primaryKey.count + secondaryKey.count + 200)
        out.append(EntryRecord.formatVersion)
        out.appendBigEndian(bodyID)
        out.appendBigEndian(UInt64(bodyLength))
        out.appendBigEndian(UInt32(chunkSize))
        out.appendInt64(storedAt)
        out.appendInt64(lastAccess)
        out.appendBlob(primaryKey)
        out.appendBlob(secondaryKey)
        let f = facts
        out.appendBigEndian(UInt32(f.status))
        for v in [f.requestTime, f.responseTime, f.dateValue, f.correctedInitialAge, f.freshnessLifetime,
                  f.staleWhileRevalidate, f.staleIfError, f.lastModified ?? 0, Int64(f.contentLength ?? 0)] {
            out.appendInt64(v)
        }
        var flags: UInt8 = 0
        if f.heuristic { flags |= 1 }
        if f.noCache { flags |= 2 }
        if f.mustRevalidate { flags |= 4 }
        if f.varyStar { flags |= 8 }
        if f.etag != nil { flags |= 16 }
        if f.lastModified != nil { flags |= 32 }
        if f.contentLength != nil { flags |= 64 }
        out.append(flags)
        out.appendBlob(f.etag ?? [])
        out.appendBigEndian(UInt16(f.varyFields.count))
        for name in f.varyFields { out.appendBlob(name) }
        out.appendBlob(head)
        let crc = CRC32C.checksum(out)
        withUnsafeBytes(of: crc.littleEndian) { out.append(contentsOf: $0) }
        return out
    }

    /// nil when the record is from another format version or damaged (its checksum fails).
    init?(decoding stored: UnsafeRawBufferPointer) {
        guard stored.count > EntryRecord.checksumSize, stored[0] == EntryRecord.formatVersion else { return nil }
        let end = stored.count - EntryRecord.checksumSize
        let bytes = UnsafeRawBufferPointer(rebasing: stored[..<end])
        guard CRC32C.checksum(bytes) == UInt32(littleEndian: stored.loadUnaligned(fromByteOffset: end, as: UInt32.self))
        else { return nil }
        var r = ByteReader(bytes)
        _ = r.u8()
        guard let id = r.u64(), let length = r.u64(), let chunk = r.u32(), chunk > 0,
              let stored = r.i64(), let access = r.i64(),
              let primary = r.blob(), let secondary = r.blob(),
              let status = r.u32() else { return nil }
        var numbers: [Int64] = []
        for _ in 0..<9 {
            guard let v = r.i64() else { return nil }
            numbers.append(v)
        }
        guard let flags = r.u8(), let etag = r.blob(), let varyCount = r.u16() else { return nil }
        var vary: [[UInt8]] = []
        for _ in 0..<varyCount {
            guard let name = r.blob() else { return nil }
            vary.append(name)
        }
        guard let head = r.blob(), r.offset == bytes.count, length < UInt64(Int.max) else { return nil }
        bodyID = id
        bodyLength = Int(length)
        chunkSize = Int(chunk)
        storedAt = stored
        lastAccess = access
        primaryKey = primary
        secondaryKey = secondary
        facts = EntryFacts(status: Int(status), requestTime: numbers[0], responseTime: numbers[1], dateValue: numbers[2],
                           correctedInitialAge: numbers[3], freshnessLifetime: numbers[4],
                           heuristic: flags & 1 != 0, noCache: flags & 2 != 0, mustRevalidate: flags & 4 != 0,
                           staleWhileRevalidate: numbers[5], staleIfError: numbers[6],
                           etag: flags & 16 != 0 ? etag : nil,
                           lastModified: flags & 32 != 0 ? numbers[7] : nil,
                           contentLength: flags & 64 != 0 ? Int(numbers[8]) : nil,
                           varyFields: vary, varyStar: flags & 8 != 0)
        self.head = head
    }
}

/// The Vary field names the latest response for a URL named: how to compute the secondary key
/// of a request before looking for its variant.
public struct VariantSpec: Sendable, Equatable {
    static let formatVersion: UInt8 = 1
    public var primaryKey: [UInt8]
    public var varyFields: [[UInt8]]

    public init(primaryKey: [UInt8], varyFields: [[UInt8]]) { self.primaryKey = primaryKey; self.varyFields = varyFields }

    func encoded() -> [UInt8] {
        var out: [UInt8] = [VariantSpec.formatVersion]
        out.appendBlob(primaryKey)
        out.appendBigEndian(UInt16(varyFields.count))
        for name in varyFields { out.appendBlob(name) }
        return out
    }

    init?(decoding bytes: UnsafeRawBufferPointer) {
        var r = ByteReader(bytes)
        guard r.u8() == VariantSpec.formatVersion, let primary = r.blob(), let count = r.u16() else { return nil }
        var names: [[UInt8]] = []
        for _ in 0..<count {
            guard let n = r.blob() else { return nil }
            names.append(n)
        }
        guard r.offset == bytes.count else { return nil }
        primaryKey = primary
        varyFields = names
    }
}
