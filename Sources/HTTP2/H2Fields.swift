import CNghttp2
#if canImport(Glibc)
import Glibc
#endif

/// A header list in one buffer: names and values side by side, each field a pair of spans, so a
/// list costs two allocations however many fields it has (a pair of arrays per field made
/// allocation the largest cost of a small HTTP/2 exchange).
public struct H2Fields: Sendable {
    /// Where one field's name and value lie in `bytes`.
    public struct Span: Sendable, Equatable {
        public var nameStart: Int
        public var nameCount: Int
        public var valueStart: Int
        public var valueCount: Int

        public init(nameStart: Int, nameCount: Int, valueStart: Int, valueCount: Int) {
            self.nameStart = nameStart
            self.nameCount = nameCount
            self.valueStart = valueStart
            self.valueCount = valueCount
        }
    }

    /// Names and values: the first `byteCount` bytes of `storage`, which is kept at its capacity
    /// (its tail unused), so a field is copied into place and the list emptied by a count, where
    /// Array's own append (generic over the collection) and emptying cost some 90 instructions a
    /// field on every request. Spans likewise.
    @usableFromInline private(set) var storage: [UInt8] = []
    @usableFromInline private(set) var byteCount = 0
    @usableFromInline private(set) var spanStorage: [Span] = []
    @usableFromInline private(set) var spanCount = 0

    /// The names and values of the fields (and the bytes outside them), which `spans` index.
    public var bytes: ArraySlice<UInt8> { storage[..<byteCount] }
    public var spans: ArraySlice<Span> { spanStorage[..<spanCount] }

    public init(byteCapacity: Int = 0, fieldCapacity: Int = 0) {
        storage = [UInt8](repeating: 0, count: byteCapacity)
        spanStorage = [Span](repeating: Span(nameStart: 0, nameCount: 0, valueStart: 0, valueCount: 0),
                             count: fieldCapacity)
    }

    /// An answer's fields, `:status` first.
    public init(status: Int, byteCapacity: Int = 256, fieldCapacity: Int = 12) {
        self.init(byteCapacity: byteCapacity, fieldCapacity: fieldCapacity)
        // Written as it is, whatever it is: checking statuses is the receiver's business.
        let value = max(status, 0)
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        var digits: [UInt8] = []
        repeat {
            digits.append(UInt8(48 + value / divisor % 10))
            divisor /= 10
        } while divisor > 0
        append(name: H2Fields.statusName, value: digits)
    }

    public init(_ pairs: [(name: [UInt8], value: [UInt8])]) {
        self.init(byteCapacity: pairs.reduce(0) { $0 + $1.name.count + $1.value.count }, fieldCapacity: pairs.count)
        for p in pairs { append(name: p.name, value: p.value) }
    }

    public var count: Int { spanCount }
    public var isEmpty: Bool { spanCount == 0 }

    public mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
        let n = appendBytes(name)
        let v = appendBytes(value)
        appendSpan(Span(nameStart: n.lowerBound, nameCount: n.count, valueStart: v.lowerBound, valueCount: v.count))
    }

    /// A field whose name and value lie in memory (what nghttp2 hands over).
    @inline(__always)
    public mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let n = appendBytes(UnsafeRawBufferPointer(name))
        let v = appendBytes(UnsafeRawBufferPointer(value))
        appendSpan(Span(nameStart: n.lowerBound, nameCount: n.count, valueStart: v.lowerBound, valueCount: v.count))
    }

    /// Appends bytes outside any field (a request's pseudo-header values, kept in the same
    /// buffer): where they lie.
    mutating func appendOutsideFields(_ value: some Collection<UInt8>) -> Range<Int> { appendBytes(value) }

    @inline(__always)
    mutating func appendOutsideFields(_ value: UnsafeBufferPointer<UInt8>) -> Range<Int> {
        appendBytes(UnsafeRawBufferPointer(value))
    }

    public mutating func remove(at index: Int) {
        precondition(index >= 0 && index < spanCount, "no field \(index)")
        spanStorage.withUnsafeMutableBufferPointer { s in
            for i in index..<(spanCount - 1) { s[i] = s[i + 1] }
        }
        spanCount -= 1
    }

    /// Empties the list, keeping its buffers.
    public mutating func removeAll() {
        byteCount = 0
        spanCount = 0
    }

    private mutating func appendBytes(_ value: some Collection<UInt8>) -> Range<Int> {
        if let range = value.withContiguousStorageIfAvailable({ appendBytes(UnsafeRawBufferPointer($0)) }) {
            return range
        }
        return Array(value).withUnsafeBytes { appendBytes($0) }
    }

    @inline(__always)
    private mutating func appendBytes(_ value: UnsafeRawBufferPointer) -> Range<Int> {
        let start = byteCount
        let end = start + value.count
        if end > storage.count { storage.append(contentsOf: repeatElement(0, count: max(end, 2 * storage.count, 64) - storage.count)) }
        if let from = value.baseAddress, value.count > 0 {
            storage.withUnsafeMutableBytes { _ = memcpy($0.baseAddress! + start, from, value.count) }
        }
        byteCount = end
        return start..<end
    }

    @inline(__always)
    private mutating func appendSpan(_ span: Span) {
        if spanCount == spanStorage.count {
            spanStorage.append(contentsOf: repeatElement(span, count: max(2 * spanCount, 8) - spanCount))
        }
        spanStorage[spanCount] = span
        spanCount += 1
    }

    /// The buffer the spans index, and the spans, valid inside `body`: read in place, where
    /// `bytes` and `spans` are slices that each count a reference.
    @inlinable
    public func withBytesAndSpans<R>(_ body: (UnsafeRawBufferPointer, UnsafeBufferPointer<Span>) -> R) -> R {
        storage.withUnsafeBytes { all in
            spanStorage.withUnsafeBufferPointer { s in
                body(UnsafeRawBufferPointer(rebasing: all[..<byteCount]), UnsafeBufferPointer(rebasing: s[..<spanCount]))
            }
        }
    }

    public func name(_ i: Int) -> ArraySlice<UInt8> { bytes[spans[i].nameStart..<(spans[i].nameStart + spans[i].nameCount)] }
    public func value(_ i: Int) -> ArraySlice<UInt8> { bytes[spans[i].valueStart..<(spans[i].valueStart + spans[i].valueCount)] }

    /// Whether field `i`'s name is `name`, byte for byte.
    public func nameIs(_ i: Int, _ name: [UInt8]) -> Bool {
        let s = spans[i]
        guard s.nameCount == name.count else { return false }
        return storage.withUnsafeBufferPointer { all in
            name.withUnsafeBufferPointer { n in
                var k = 0
                while k < n.count {
                    if all[s.nameStart + k] != n[k] { return false }
                    k += 1
                }
                return true
            }
        }
    }

    /// The fields as separate arrays (for tests and messages).
    public var pairs: [(name: [UInt8], value: [UInt8])] { (0..<spanCount).map { (Array(name($0)), Array(value($0))) } }

    /// The fields as nghttp2's name-value pairs, valid inside `body`.
    public func withNameValues<R>(_ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> R) -> R {
        storage.withUnsafeBufferPointer { all in
            // nghttp2 never writes through these pointers; its type just is not const.
            let base = UnsafeMutablePointer(mutating: all.baseAddress ?? UnsafePointer(bitPattern: 1)!)
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: spanCount) { nva in
                for (i, s) in spans.enumerated() {
                    nva[i] = nghttp2_nv(name: base + s.nameStart, value: base + s.valueStart, namelen: s.nameCount,
                                        valuelen: s.valueCount, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
                }
                return body(nva)
            }
        }
    }

    static let statusName = Array(":status".utf8)
}
