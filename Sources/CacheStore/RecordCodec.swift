import CachePolicy

/// Why stored bytes were not decoded.
enum RecordRejection: Error, Equatable {
    /// A record of a version this Larder no longer reads (1 could hold `Set-Cookie`, 2 had no
    /// checksum): removed by the start-up sweep.
    case earlierVersion(UInt8)
    /// A whole record (its checksum holds) of a version newer than this Larder's: the cache was
    /// written by a later Larder.
    case laterVersion(UInt8)
    /// Damaged: the checksum fails, or the bytes do not follow the layout.
    case damaged
}

/// The values of the `entries` and `variants` databases as bytes. The layout is written out here
/// field by field, in order, with its own version numbers: the in-memory types (`EntryRecord`,
/// `VariantSpec`, CachePolicy's `EntryFacts`) may change without the bytes on disk changing, and a
/// change to the bytes is a new version, pinned by the golden tests in RecordCodecTests. Integers
/// are big-endian; a blob is a u32 length and that many bytes.
///
/// Entry record, version 3:
///
///     u8   version (3)
///     u64  body id                      u64  body length            u32  chunk size (> 0)
///     i64  stored at                    i64  last access
///     blob primary key                  blob secondary key
///     u32  status
///     i64  request time                 i64  response time          i64  date
///     i64  corrected initial age        i64  freshness lifetime
///     i64  stale-while-revalidate       i64  stale-if-error
///     i64  Last-Modified (0 if absent)  i64  content length (0 if absent)
///     u8   flags: 1 heuristic, 2 no-cache, 4 must-revalidate, 8 Vary: *, 16 ETag present,
///                 32 Last-Modified present, 64 content length present
///     blob ETag (empty if absent)
///     u16  Vary field count, then each field name as a blob
///     blob head
///     u32  CRC32C of every byte before it, little-endian
///
/// Every entry version from 3 on ends with the CRC32C of the bytes before it: that is how a record
/// of a later version is told from a damaged one.
///
/// Variant spec, version 1, kept only for URLs whose response named Vary fields (no checksum; a
/// lookup treats a damaged one as absent, and the next store removes the URL's entries with it):
///
///     u8   version (1)
///     blob primary key
///     u16  Vary field count, then each field name as a blob
enum RecordCodec {
    static let entryVersion: UInt8 = 3
    static let variantVersion: UInt8 = 1
    static let checksumSize = 4

    private enum Flag {
        static let heuristic: UInt8 = 1
        static let noCache: UInt8 = 2
        static let mustRevalidate: UInt8 = 4
        static let varyStar: UInt8 = 8
        static let hasETag: UInt8 = 16
        static let hasLastModified: UInt8 = 32
        static let hasContentLength: UInt8 = 64
    }

    // MARK: entry records

    /// The record's bytes, checksum included.
    static func encode(_ r: EntryRecord) -> [UInt8] {
        let size = encodedSize(r)
        return [UInt8](unsafeUninitializedCapacity: size) { out, count in
            encode(r, into: UnsafeMutableRawBufferPointer(out))
            count = size
        }
    }

    /// Bytes `encode(_:into:)` writes for `r`.
    static func encodedSize(_ r: EntryRecord) -> Int {
        // version, body id, body length, chunk size, stored at, last access, status, nine i64 facts,
        // flags, Vary count, checksum; then five kinds of blob, each with its u32 length.
        let fixed = 1 + 8 + 8 + 4 + 8 + 8 + 4 + 9 * 8 + 1 + 2 + checksumSize
        let f = r.facts
        let blobs = 4 + r.primaryKey.count + 4 + r.secondaryKey.count + 4 + (f.etag?.count ?? 0) + 4 + r.head.count
        return fixed + blobs + f.varyFields.reduce(0) { $0 + 4 + $1.count }
    }

    /// Writes the record into `out`, exactly `encodedSize(r)` bytes: straight into the space LMDB
    /// reserves for it, with no array built and copied first.
    static func encode(_ r: EntryRecord, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count == encodedSize(r), "an entry record's space is sized by encodedSize")
        let f = r.facts
        var w = ByteWriter(out)
        w.u8(entryVersion)
        w.u64(r.bodyID)
        w.u64(UInt64(r.bodyLength))
        w.u32(UInt32(r.chunkSize))
        w.i64(r.storedAt)
        w.i64(r.lastAccess)
        w.blob(r.primaryKey)
        w.blob(r.secondaryKey)
        w.u32(UInt32(f.status))
        w.i64(f.requestTime)
        w.i64(f.responseTime)
        w.i64(f.dateValue)
        w.i64(f.correctedInitialAge)
        w.i64(f.freshnessLifetime)
        w.i64(f.staleWhileRevalidate)
        w.i64(f.staleIfError)
        w.i64(f.lastModified ?? 0)
        w.i64(Int64(f.contentLength ?? 0))
        var flags: UInt8 = 0
        if f.heuristic { flags |= Flag.heuristic }
        if f.noCache { flags |= Flag.noCache }
        if f.mustRevalidate { flags |= Flag.mustRevalidate }
        if f.varyStar { flags |= Flag.varyStar }
        if f.etag != nil { flags |= Flag.hasETag }
        if f.lastModified != nil { flags |= Flag.hasLastModified }
        if f.contentLength != nil { flags |= Flag.hasContentLength }
        w.u8(flags)
        w.blob(f.etag ?? [])
        w.u16(UInt16(f.varyFields.count))
        for name in f.varyFields { w.blob(name) }
        w.blob(r.head)
        let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: out[..<w.offset]))
        w.u32LittleEndian(crc)
        precondition(w.offset == out.count)
    }

    /// The record, or nil for anything else (read paths treat every rejection as a miss).
    static func entry(_ stored: UnsafeRawBufferPointer) -> EntryRecord? {
        // Matched rather than `try? ….get()`, whose generic error path looked up the `Result`
        // type's metadata at run time (a quarter of a million instructions the first time).
        if case .success(let record) = decodeEntry(stored) { return record }
        return nil
    }

    static func decodeEntry(_ stored: UnsafeRawBufferPointer) -> Result<EntryRecord, RecordRejection> {
        guard let version = stored.first else { return .failure(.damaged) }
        if version > 0, version < entryVersion { return .failure(.earlierVersion(version)) }
        guard stored.count > checksumSize else { return .failure(.damaged) }
        let end = stored.count - checksumSize
        let bytes = UnsafeRawBufferPointer(rebasing: stored[..<end])
        guard CRC32C.checksum(bytes) == UInt32(littleEndian: stored.loadUnaligned(fromByteOffset: end, as: UInt32.self))
        else { return .failure(.damaged) }
        if version > entryVersion { return .failure(.laterVersion(version)) }
        guard version == entryVersion, let record = decodeEntryFields(bytes) else { return .failure(.damaged) }
        return .success(record)
    }

    /// The fields of a version 3 record whose checksum held (`bytes` without it).
    private static func decodeEntryFields(_ bytes: UnsafeRawBufferPointer) -> EntryRecord? {
        var r = ByteReader(bytes)
        _ = r.u8()
        guard let bodyID = r.u64(), let bodyLength = r.u64(), bodyLength < UInt64(Int.max),
              let chunkSize = r.u32(), chunkSize > 0,
              let storedAt = r.i64(), let lastAccess = r.i64(),
              let primaryKey = r.blob(), let secondaryKey = r.blob(),
              let status = r.u32(),
              let requestTime = r.i64(), let responseTime = r.i64(), let dateValue = r.i64(),
              let correctedInitialAge = r.i64(), let freshnessLifetime = r.i64(),
              let staleWhileRevalidate = r.i64(), let staleIfError = r.i64(),
              let lastModified = r.i64(), let contentLength = r.i64(),
              let flags = r.u8(), let etag = r.blob(), let varyCount = r.u16() else { return nil }
        var varyFields: [[UInt8]] = []
        for _ in 0..<varyCount {
            guard let name = r.blob() else { return nil }
            varyFields.append(name)
        }
        guard let head = r.blob(), r.offset == bytes.count else { return nil }
        let facts = EntryFacts(
            status: Int(status), requestTime: requestTime, responseTime: responseTime, dateValue: dateValue,
            correctedInitialAge: correctedInitialAge, freshnessLifetime: freshnessLifetime,
            heuristic: flags & Flag.heuristic != 0, noCache: flags & Flag.noCache != 0,
            mustRevalidate: flags & Flag.mustRevalidate != 0,
            staleWhileRevalidate: staleWhileRevalidate, staleIfError: staleIfError,
            etag: flags & Flag.hasETag != 0 ? etag : nil,
            lastModified: flags & Flag.hasLastModified != 0 ? lastModified : nil,
            contentLength: flags & Flag.hasContentLength != 0 ? Int(truncatingIfNeeded: contentLength) : nil,
            varyFields: varyFields, varyStar: flags & Flag.varyStar != 0)
        return EntryRecord(bodyID: bodyID, bodyLength: Int(bodyLength), chunkSize: Int(chunkSize), storedAt: storedAt,
                           lastAccess: lastAccess, primaryKey: primaryKey, secondaryKey: secondaryKey, facts: facts,
                           head: head)
    }

    // MARK: variant specs

    static func encode(_ spec: VariantSpec) -> [UInt8] {
        var out: [UInt8] = [variantVersion]
        out.appendBlob(spec.primaryKey)
        out.appendBigEndian(UInt16(spec.varyFields.count))
        for name in spec.varyFields { out.appendBlob(name) }
        return out
    }

    /// The spec, or nil when the bytes are of another version or do not follow the layout.
    static func variant(_ bytes: UnsafeRawBufferPointer) -> VariantSpec? {
        var r = ByteReader(bytes)
        guard r.u8() == variantVersion, let primaryKey = r.blob(), let count = r.u16() else { return nil }
        var varyFields: [[UInt8]] = []
        for _ in 0..<count {
            guard let name = r.blob() else { return nil }
            varyFields.append(name)
        }
        guard r.offset == bytes.count else { return nil }
        return VariantSpec(primaryKey: primaryKey, varyFields: varyFields)
    }
}
