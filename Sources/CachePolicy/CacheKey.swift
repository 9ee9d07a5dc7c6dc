#if canImport(Glibc)
import Glibc
#endif
import HTTPWire

public enum CacheKey {
    /// The primary key: normalised absolute URI. Scheme and host lowercase, default port elided,
    /// path and query byte-exact (an empty path becomes `/`), fragment never present.
    ///
    /// IPv6 hosts are written in brackets; a port of 0 or less counts as the default.
    public static func primary(scheme: URIScheme, host: [UInt8], port: Int, pathAndQuery: UnsafeRawBufferPointer) -> [UInt8] {
        var end = pathAndQuery.count  // up to a "#"
        if let base = pathAndQuery.baseAddress, let hash = memchr(base, 0x23, end) { end = base.distance(to: hash) }
        let prefix = scheme.prefix
        let bracket = host.first != 0x5B && host.withUnsafeBytes { $0.baseAddress.map { memchr($0, 0x3A, host.count) != nil } ?? false }
        let defaultPort = scheme.defaultPort
        let digits = port > 0 && port != defaultPort ? decimalDigits(port) : 0
        let slash = end == 0 || pathAndQuery[0] != byteSlash
        let count = prefix.utf8CodeUnitCount + (bracket ? 2 : 0) + host.count + (digits > 0 ? 1 + digits : 0)
            + (slash ? 1 : 0) + end
        // Written in place on the stack, then copied into an array of the right size in one piece:
        // the key is built for every request, and growing an array byte by byte cost more than the
        // lookup it serves (the array initializers that size first are not specialized, dearer still).
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { out in
            let p = out.baseAddress!
            var at = prefix.utf8CodeUnitCount
            UnsafeMutableRawPointer(p).copyMemory(from: prefix.utf8Start, byteCount: at)
            if bracket { p[at] = 0x5B; at += 1 }
            host.withUnsafeBytes { h in
                // Eight bytes at a time: the host is lowered for every request.
                var i = 0
                if let source = h.baseAddress {
                    let target = UnsafeMutableRawPointer(p + at)
                    while i + 8 <= h.count {
                        target.storeBytes(of: asciiLowered(source.loadUnaligned(fromByteOffset: i, as: UInt64.self)),
                                          toByteOffset: i, as: UInt64.self)
                        i += 8
                    }
                }
                while i < h.count { p[at + i] = asciiLower(h[i]); i += 1 }
            }
            at += host.count
            if bracket { p[at] = 0x5D; at += 1 }
            if digits > 0 {
                p[at] = asciiColon
                var rest = port
                for i in stride(from: at + digits, to: at, by: -1) {
                    p[i] = 0x30 &+ UInt8(truncatingIfNeeded: rest % 10)
                    rest /= 10
                }
                at += 1 + digits
            }
            if slash { p[at] = byteSlash; at += 1 }
            if end > 0 { UnsafeMutableRawPointer(p + at).copyMemory(from: pathAndQuery.baseAddress!, byteCount: end) }
            return Array(UnsafeBufferPointer(out))
        }
    }

    private static func decimalDigits(_ value: Int) -> Int {
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        return digits
    }

    /// The secondary (Vary) key: for each name in `varyFields` (lowercase, in the given order), the
    /// request's values for it, normalised so that spellings with the same meaning select the same
    /// variant; absent fields are distinct from empty ones. Two requests select the same variant iff
    /// equal keys.
    ///
    /// Encoding, per name: the name, 0x00, then 0x01 when the request lacks the field, else its list
    /// elements joined by "," (empty elements dropped, as RFC 9110 §5.6.1 reads them), then 0x00.
    /// Field values cannot hold 0x00 or 0x01, so the encoding is unambiguous.
    ///
    /// Elements lose the whitespace around them (every field). Fields whose values are
    /// case-insensitive tokens with parameters (`VaryValues.caseless`) are lowercased outside quoted
    /// strings and lose the whitespace around `;` and `=`; `Accept-Encoding` and `Accept-Language`
    /// express preference by `q`, not by position, so their elements are sorted too. Any other
    /// field keeps its elements byte-exact and in order. The keys are stored: a change here makes
    /// requests find other stored variants than before (the old ones age out), never wrong ones.
    public static func secondary(varyFields: [[UInt8]], request: HeaderBlock) -> [UInt8] {
        if varyFields.isEmpty { return [] }
        var key: [UInt8] = []
        key.reserveCapacity(varyFields.reduce(0) { $0 + $1.count + 32 })
        request.storage.withUnsafeBytes { all in
            for name in varyFields {
                key.append(contentsOf: name)
                key.append(0x00)
                let values = VaryValues(name)
                var present = false
                var wroteElement = false
                var sorted: [[UInt8]] = []
                for field in request.fields
                where equalsLowered(all, field.name.start, field.name.start + field.name.count, name) {
                    present = true
                    forEachListElement(all, field.value.start, field.value.start + field.value.count) { s, e in
                        switch values {
                        case .exact:
                            if wroteElement { key.append(asciiComma) }
                            key.append(contentsOf: UnsafeRawBufferPointer(rebasing: all[s..<e]))
                        case .caseless:
                            if wroteElement { key.append(asciiComma) }
                            appendCaseless(all, s, e, to: &key)
                        case .caselessUnordered:
                            var element: [UInt8] = []
                            appendCaseless(all, s, e, to: &element)
                            sorted.append(element)
                        }
                        wroteElement = true
                        return true
                    }
                }
                if !sorted.isEmpty {
                    sorted.sort { $0.lexicographicallyPrecedes($1) }
                    for (i, element) in sorted.enumerated() {
                        if i > 0 { key.append(asciiComma) }
                        key.append(contentsOf: element)
                    }
                }
                if !present { key.append(0x01) }
                key.append(0x00)
            }
        }
        return key
    }

    /// How a Vary-selected field's values compare.
    enum VaryValues {
        /// Byte-exact elements in order: values that may be case-sensitive or order-significant
        /// (and every field not known to be otherwise).
        case exact
        /// Case-insensitive tokens with parameters, in order (`Accept-Charset`, RFC 9110 §12.5.2).
        case caseless
        /// The same, and the order carries no meaning: preference is by `q` (RFC 9110 §12.5.3
        /// content-codings, §12.5.4 with RFC 4647 §2 language ranges).
        case caselessUnordered

        init(_ lowercasedName: [UInt8]) {
            if lowercasedName.elementsEqual("accept-encoding".utf8) || lowercasedName.elementsEqual("accept-language".utf8) {
                self = .caselessUnordered
            } else if lowercasedName.elementsEqual("accept-charset".utf8) {
                self = .caseless
            } else {
                self = .exact
            }
        }
    }

    /// `p[start..<end]` lowercased, without whitespace around `;` and `=`; quoted strings as sent.
    private static func appendCaseless(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int, to out: inout [UInt8]) {
        var i = start
        var pendingSpace = false
        while i < end {
            let b = p[i]
            if b == asciiQuote {
                if pendingSpace { out.append(0x20); pendingSpace = false }
                let close = quotedStringEnd(p, i, end) ?? end
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: p[i..<close]))
                i = close
                continue
            }
            if isOWS(b) {
                pendingSpace = true
            } else if b == 0x3B || b == 0x3D {  // ";" "=": whitespace around them means nothing
                pendingSpace = false
                out.append(b)
                i += 1
                while i < end, isOWS(p[i]) { i += 1 }
                continue
            } else {
                if pendingSpace { out.append(0x20); pendingSpace = false }
                out.append(asciiLower(b))
            }
            i += 1
        }
    }
}
