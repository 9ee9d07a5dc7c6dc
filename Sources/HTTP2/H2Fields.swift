import CNghttp2

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

    public private(set) var bytes: [UInt8] = []
    public private(set) var spans: [Span] = []

    public init(byteCapacity: Int = 0, fieldCapacity: Int = 0) {
        bytes.reserveCapacity(byteCapacity)
        spans.reserveCapacity(fieldCapacity)
    }

    /// An answer's fields, `:status` first.
    public init(status: Int, byteCapacity: Int = 256, fieldCapacity: Int = 12) {
        self.init(byteCapacity: byteCapacity, fieldCapacity: fieldCapacity)
        // Written as it is, whatever it is: checking statuses is the receiver's business.
        let value = max(status, 0)
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        bytes += H2Fields.statusName
        let valueStart = bytes.count
        repeat {
            bytes.append(UInt8(48 + value / divisor % 10))
            divisor /= 10
        } while divisor > 0
        spans.append(Span(nameStart: 0, nameCount: valueStart, valueStart: valueStart, valueCount: bytes.count - valueStart))
    }

    public init(_ pairs: [(name: [UInt8], value: [UInt8])]) {
        self.init(byteCapacity: pairs.reduce(0) { $0 + $1.name.count + $1.value.count }, fieldCapacity: pairs.count)
        for p in pairs { append(name: p.name, value: p.value) }
    }

    public var count: Int { spans.count }
    public var isEmpty: Bool { spans.isEmpty }

    public mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        bytes.append(contentsOf: value)
        spans.append(Span(nameStart: nameStart, nameCount: valueStart - nameStart, valueStart: valueStart,
                          valueCount: bytes.count - valueStart))
    }

    /// Appends bytes outside any field (a request's pseudo-header values, kept in the same
    /// buffer): where they lie.
    mutating func appendOutsideFields(_ value: some Collection<UInt8>) -> Range<Int> {
        let start = bytes.count
        bytes.append(contentsOf: value)
        return start..<bytes.count
    }

    public mutating func remove(at index: Int) { spans.remove(at: index) }

    /// Empties the list, keeping its buffers.
    public mutating func removeAll() {
        // An empty array's storage is shared: emptying it again would allocate.
        if !bytes.isEmpty { bytes.removeAll(keepingCapacity: true) }
        if !spans.isEmpty { spans.removeAll(keepingCapacity: true) }
    }

    public func name(_ i: Int) -> ArraySlice<UInt8> { bytes[spans[i].nameStart..<(spans[i].nameStart + spans[i].nameCount)] }
    public func value(_ i: Int) -> ArraySlice<UInt8> { bytes[spans[i].valueStart..<(spans[i].valueStart + spans[i].valueCount)] }

    /// Whether field `i`'s name is `name`, byte for byte.
    public func nameIs(_ i: Int, _ name: [UInt8]) -> Bool {
        let s = spans[i]
        guard s.nameCount == name.count else { return false }
        return bytes.withUnsafeBufferPointer { all in
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
    public var pairs: [(name: [UInt8], value: [UInt8])] { spans.indices.map { (Array(name($0)), Array(value($0))) } }

    /// The fields as nghttp2's name-value pairs, valid inside `body`.
    public func withNameValues<R>(_ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> R) -> R {
        bytes.withUnsafeBufferPointer { all in
            // nghttp2 never writes through these pointers; its type just is not const.
            let base = UnsafeMutablePointer(mutating: all.baseAddress ?? UnsafePointer(bitPattern: 1)!)
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: spans.count) { nva in
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
