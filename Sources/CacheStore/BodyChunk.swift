/// How one piece of a stored body is laid out in the `chunks` database: the body bytes, then a
/// CRC32C of the chunk's key and bytes (4 bytes, little-endian). The bytes come first so they sit
/// where LMDB puts the value, aligned as before. The key takes part in the checksum so that a
/// chunk reached under another chunk's key (damage to LMDB's own page pointers) fails like damaged
/// bytes do.
enum BodyChunk {
    static let checksumSize = 4

    /// Bytes stored for a chunk of `payloadCount` body bytes.
    static func storedSize(payloadCount: Int) -> Int { payloadCount + checksumSize }

    /// Writes the stored form of `payload`, whose key is `key`, into `out` (`storedSize` bytes).
    static func encode(_ payload: UnsafeRawBufferPointer, key: [UInt8], into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count == storedSize(payloadCount: payload.count))
        if payload.count > 0 { out.baseAddress!.copyMemory(from: payload.baseAddress!, byteCount: payload.count) }
        let crc = key.withUnsafeBytes { checksum(payload, key: $0) }
        out.storeBytes(of: crc.littleEndian, toByteOffset: payload.count, as: UInt32.self)
    }

    static func encoded(_ payload: [UInt8], key: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: storedSize(payloadCount: payload.count)) { out, count in
            payload.withUnsafeBytes { encode($0, key: key, into: UnsafeMutableRawBufferPointer(out)) }
            count = out.count
        }
    }

    /// The body bytes of a stored chunk when it holds `expectedCount` of them and its checksum
    /// matches; nil when it is damaged (or of another format).
    static func verifiedPayload(of stored: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
                                expectedCount: Int) -> UnsafeRawBufferPointer? {
        guard stored.count == storedSize(payloadCount: expectedCount) else { return nil }
        let payload = UnsafeRawBufferPointer(rebasing: stored[..<expectedCount])
        let crc = UInt32(littleEndian: stored.loadUnaligned(fromByteOffset: expectedCount, as: UInt32.self))
        return checksum(payload, key: key) == crc ? payload : nil
    }

    /// The body bytes of a chunk verified before (stored chunks never change once written), when it
    /// holds `expectedCount` of them.
    static func payload(of stored: UnsafeRawBufferPointer, expectedCount: Int) -> UnsafeRawBufferPointer? {
        guard stored.count == storedSize(payloadCount: expectedCount) else { return nil }
        return UnsafeRawBufferPointer(rebasing: stored[..<expectedCount])
    }

    private static func checksum(_ payload: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer) -> UInt32 {
        CRC32C.checksum(payload, continuing: CRC32C.checksum(key))
    }
}

/// What reading a body chunk found.
public enum ChunkRead: Sendable, Equatable {
    /// The chunk's bytes were passed on.
    case delivered
    /// Gone: the entry was replaced or evicted since it was looked up.
    case missing
    /// Its bytes failed their checksum: never passed on; the entry has been dropped.
    case damaged
}
