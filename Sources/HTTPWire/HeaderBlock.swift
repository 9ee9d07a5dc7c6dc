/// The raw bytes of a head and the field lines found in it. Storage is reused between messages
/// on one connection (`removeAll(keepingCapacity:)`), so steady-state parsing allocates nothing.
public struct HeaderBlock: Sendable {
    /// A copy of the head's bytes; every `ByteRange` of the head points into it.
    public internal(set) var storage: [UInt8]
    /// Field lines in order of appearance.
    public internal(set) var fields: [HeaderField]

    public init() {
        storage = []
        fields = []
    }

    @inlinable public var count: Int { fields.count }

    /// Calls `body` with the bytes of `range` (valid only inside the call). Inlinable, so that
    /// other modules' calls are specialized rather than run generic, through their result's metadata.
    @inlinable
    public func withBytes<R>(_ range: ByteRange, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { all in
            try body(UnsafeRawBufferPointer(rebasing: all[range.start..<(range.start + range.count)]))
        }
    }

    /// Whether field `index` has the given name, compared ASCII case-insensitively.
    /// Inlined with the length check first: most fields asked about have another name, most
    /// often of another length.
    @inlinable
    public func nameEquals(at index: Int, _ name: StaticString) -> Bool {
        let range = fields[index].name
        guard range.count == name.utf8CodeUnitCount else { return false }
        return storage.withUnsafeBytes { all in
            equalsIgnoringCase(all, range.start, range.start + range.count, name)
        }
    }

    /// The index of the first field with that name (ASCII case-insensitive), if any.
    @inlinable
    public func firstIndex(of name: StaticString) -> Int? {
        storage.withUnsafeBytes { all -> Int? in
            for (i, field) in fields.enumerated() where field.name.count == name.utf8CodeUnitCount
                && equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, name) {
                return i
            }
            return nil
        }
    }

    /// Whether any field with that name carries `token` in its comma-separated list
    /// (ASCII case-insensitive, optional whitespace around elements), e.g. `Connection: keep-alive, Upgrade`.
    public func containsToken(_ token: StaticString, inFieldsNamed name: StaticString) -> Bool {
        storage.withUnsafeBytes { all in
            for field in fields
            where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, name) {
                if listContains(all, field.value.start, field.value.start + field.value.count, token) { return true }
            }
            return false
        }
    }

    /// Whether the fields with that name list `token` and nothing else (ASCII case-insensitive),
    /// e.g. `Upgrade: websocket` but not `Upgrade: websocket, h2c`.
    public func listsOnly(_ token: StaticString, inFieldsNamed name: StaticString) -> Bool {
        storage.withUnsafeBytes { all in
            var seen = false
            var other = false
            for field in fields
            where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, name) {
                forEachListElement(all, field.value.start, field.value.start + field.value.count) { s, e in
                    if equalsIgnoringCase(all, s, e, token) { seen = true } else { other = true }
                    return true
                }
            }
            return seen && !other
        }
    }

    /// RFC 9110 §7.6.1: whether field `index` is hop-by-hop: Connection, Keep-Alive, Proxy-Connection,
    /// Proxy-Authenticate, Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade, or a name listed
    /// in any Connection field of this head — except `Host` and `Content-Length`, which a Connection
    /// list never removes: the message's framing and routing do not change with what the sender
    /// lists, or a body announced by a removed length would become the next message (smuggling).
    ///
    /// `connectionListsOtherFields` (from the property of that name, computed once per head) spares
    /// a scan of every Connection field for every field asked about.
    public func isHopByHop(at index: Int, connectionListsOtherFields: Bool = true) -> Bool {
        let name = fields[index].name
        return storage.withUnsafeBytes { all in
            let s = name.start
            let e = s + name.count
            switch name.count {
            case 2:
                if equalsIgnoringCase(all, s, e, "te") { return true }
            case 7:
                if equalsIgnoringCase(all, s, e, "trailer") || equalsIgnoringCase(all, s, e, "upgrade") { return true }
            case 10:
                if equalsIgnoringCase(all, s, e, "connection") || equalsIgnoringCase(all, s, e, "keep-alive") {
                    return true
                }
            case 16:
                if equalsIgnoringCase(all, s, e, "proxy-connection") { return true }
            case 17:
                if equalsIgnoringCase(all, s, e, "transfer-encoding") { return true }
            case 18:
                if equalsIgnoringCase(all, s, e, "proxy-authenticate") { return true }
            case 19:
                if equalsIgnoringCase(all, s, e, "proxy-authorization") { return true }
            default:
                break
            }
            guard connectionListsOtherFields, !isNeverNominated(all, s, e) else { return false }
            for field in fields
            where field.name.count == 10
                && equalsIgnoringCase(all, field.name.start, field.name.start + 10, "connection") {
                let v = field.value
                if listContains(all, v.start, v.start + v.count, bytes: all, s, e) { return true }
            }
            return false
        }
    }

    /// Fields a Connection list cannot make hop-by-hop (see `isHopByHop`).
    @inline(__always)
    func isNeverNominated(_ all: UnsafeRawBufferPointer, _ s: Int, _ e: Int) -> Bool {
        equalsIgnoringCase(all, s, e, "host") || equalsIgnoringCase(all, s, e, "content-length")
    }

    /// Drops the end-to-end fields a Connection field names (RFC 9110 §7.6.1), so that what the
    /// proxy decides on (cache key, Vary, policy) is exactly what it forwards. Hop-by-hop fields the
    /// proxy itself reads (Upgrade, Proxy-Authorization, …) stay for it to read; they are never
    /// forwarded anyway. `Host` and `Content-Length` are never dropped.
    mutating func removeFieldsNominatedByConnection() {
        guard connectionListsOtherFields else { return }
        var kept: [HeaderField] = []
        kept.reserveCapacity(fields.count)
        for i in 0..<fields.count {
            if isHopByHop(at: i) && !isHopByHop(at: i, connectionListsOtherFields: false) { continue }
            kept.append(fields[i])
        }
        fields = kept
    }

    /// Whether a Connection field lists anything but `close` and names that are hop-by-hop anyway
    /// (`keep-alive`, `upgrade`, `te`, `trailer`), i.e. whether it can make another field hop-by-hop.
    public var connectionListsOtherFields: Bool {
        storage.withUnsafeBytes { all in
            for field in fields
            where field.name.count == 10
                && equalsIgnoringCase(all, field.name.start, field.name.start + 10, "connection") {
                var other = false
                forEachListElement(all, field.value.start, field.value.start + field.value.count) { s, e in
                    if equalsIgnoringCase(all, s, e, "close") || equalsIgnoringCase(all, s, e, "keep-alive")
                        || equalsIgnoringCase(all, s, e, "upgrade") || equalsIgnoringCase(all, s, e, "te")
                        || equalsIgnoringCase(all, s, e, "trailer") {
                        return true
                    }
                    other = true
                    return false
                }
                if other { return true }
            }
            return false
        }
    }

    /// Removes every field with that name: for a message Larder changes before anything reads it.
    public mutating func removeFields(named name: StaticString) {
        while let i = firstIndex(of: name) { fields.remove(at: i) }
    }

    /// Appends a field line. The caller vouches for it: `name` a token, `value` without CR, LF or NUL.
    public mutating func appendField(name: StaticString, value: [UInt8]) {
        let nameStart = storage.count
        storage.append(contentsOf: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        let valueStart = storage.count
        storage.append(contentsOf: value)
        fields.append(HeaderField(name: ByteRange(start: nameStart, count: name.utf8CodeUnitCount),
                                  value: ByteRange(start: valueStart, count: value.count)))
    }

    /// Name of field `index` as a String (for logs and configuration code, not the hot path).
    public func nameString(at index: Int) -> String {
        withBytes(fields[index].name) { String(decoding: $0, as: UTF8.self) }
    }
    /// Value of field `index` as a String (for logs and configuration code, not the hot path).
    /// `body` with the value of the one field named `name`; nil when there is none or more than one
    /// (a field whose meaning is a single value, repeated, is no value at all).
    public func withOnlyValue<R>(_ name: StaticString, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        storage.withUnsafeBytes { all -> R? in
            var only: ByteRange?
            for field in fields
            where equalsIgnoringCase(all, field.name.start, field.name.start + field.name.count, name) {
                if only != nil { return nil }
                only = field.value
            }
            return only.map { body(UnsafeRawBufferPointer(rebasing: all[$0.start..<($0.start + $0.count)])) }
        }
    }

    public func valueString(at index: Int) -> String {
        withBytes(fields[index].value) { String(decoding: $0, as: UTF8.self) }
    }
    /// Value of the first field with that name as a String, if any.
    public func value(of name: StaticString) -> String? {
        firstIndex(of: name).map { valueString(at: $0) }
    }
}
