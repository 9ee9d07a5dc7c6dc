/// Bytes as a dictionary key, hashed in one call: `[UInt8]`'s own `Hashable` feeds the hasher one
/// byte at a time, which for a cache key costs more than the rest of the lookup.
struct ByteKey: Hashable, Sendable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    static func == (a: ByteKey, b: ByteKey) -> Bool { a.bytes == b.bytes }
}
