import HTTPWire

public enum Invalidation {
    /// RFC 9111 §4.4: after a non-error (2xx, 3xx) response to an unsafe method (anything but GET,
    /// HEAD, OPTIONS, TRACE), the primary keys to invalidate: the target URI, and the Location and
    /// Content-Location of the response when they are on the same origin (relative references
    /// resolved against the target). `targetKey` is the request's primary key.
    ///
    /// References are resolved as RFC 3986 §5.2 says (dot segments removed, fragments dropped);
    /// other schemes, userinfo, and hosts that are not plain names or IP literals are ignored.
    public static func targets(method: HTTPMethod, status: Int, targetKey: [UInt8], response: ResponseHead) -> [[UInt8]] {
        switch method {
        case .get, .head, .options, .trace: return []
        default: break
        }
        guard status >= 200, status < 400 else { return [] }
        var keys = [targetKey]
        guard let base = BaseURI(key: targetKey) else { return keys }
        for name: StaticString in ["location", "content-location"] {
            guard let resolved = response.headers.withFirstValue(name, { resolve($0, against: base) }) ?? nil,
                  !keys.contains(resolved) else { continue }
            keys.append(resolved)
        }
        return keys
    }

    /// The target's primary key taken apart: origin prefix, path, query.
    struct BaseURI {
        var key: [UInt8]
        var scheme: URIScheme
        /// End of `scheme://authority` in `key`.
        var originEnd: Int
        /// End of the path (start of `?query`, or the key's end).
        var pathEnd: Int

        init?(key: [UInt8]) {
            let https: [UInt8] = Array("https://".utf8)
            let http: [UInt8] = Array("http://".utf8)
            let authorityStart: Int
            if key.starts(with: https) {
                scheme = .https
                authorityStart = https.count
            } else if key.starts(with: http) {
                scheme = .http
                authorityStart = http.count
            } else {
                return nil
            }
            guard let slash = key[authorityStart...].firstIndex(of: byteSlash) else { return nil }
            self.key = key
            originEnd = slash
            pathEnd = key[slash...].firstIndex(of: 0x3F) ?? key.count
        }
    }

    /// The primary key `reference` names, if it is on the base's origin.
    static func resolve(_ reference: UnsafeRawBufferPointer, against base: BaseURI) -> [UInt8]? {
        var end = 0
        while end < reference.count, reference[end] != 0x23 { end += 1 }  // drop the fragment
        let ref = Array(reference[0..<end])
        guard !ref.contains(where: { $0 <= asciiSP || $0 >= 0x7F }) else { return nil }

        if let colon = schemeEnd(ref) {
            let scheme = ref[0..<colon].map(asciiLower)
            let uriScheme: URIScheme
            if scheme == Array("https".utf8) {
                uriScheme = .https
            } else if scheme == Array("http".utf8) {
                uriScheme = .http
            } else {
                return nil
            }
            guard ref.count >= colon + 3, ref[colon + 1] == byteSlash, ref[colon + 2] == byteSlash else { return nil }
            return sameOrigin(absolute(uriScheme, ref[(colon + 3)...]), base)
        }
        if ref.starts(with: [byteSlash, byteSlash]) {
            return sameOrigin(absolute(base.scheme, ref[2...]), base)
        }
        let (refPath, query) = splitQuery(ref[...])
        var path: [UInt8]
        if refPath.first == byteSlash {
            path = removeDotSegments(Array(refPath))
        } else if refPath.isEmpty {
            path = Array(base.key[base.originEnd..<base.pathEnd])
            if query == nil { return nil }  // the target itself
        } else {
            // RFC 3986 §5.2.3: merge with the base path up to its last "/".
            let basePath = base.key[base.originEnd..<base.pathEnd]
            let lastSlash = basePath.lastIndex(of: byteSlash) ?? base.originEnd
            path = removeDotSegments(Array(base.key[base.originEnd...lastSlash]) + refPath)
        }
        var key = Array(base.key[0..<base.originEnd])
        key += path
        if let query { key += query }
        return key
    }

    /// Length of `scheme` when `ref` begins with `scheme ":"` (RFC 3986 §3.1).
    private static func schemeEnd(_ ref: [UInt8]) -> Int? {
        guard let first = ref.first, isAlpha(first) else { return nil }
        for (i, b) in ref.enumerated() {
            if b == asciiColon { return i }
            if !(isAlpha(b) || isDigit(b) || b == 0x2B || b == 0x2D || b == 0x2E) { return nil }
        }
        return nil
    }

    /// `authority path-abempty [ "?" query ]` after `scheme://`, as a primary key.
    private static func absolute(_ scheme: URIScheme, _ rest: ArraySlice<UInt8>) -> [UInt8]? {
        let authorityEnd = rest.firstIndex { $0 == byteSlash || $0 == 0x3F } ?? rest.endIndex
        let authority = rest[rest.startIndex..<authorityEnd]
        guard let (host, port) = hostAndPort(authority, scheme: scheme) else { return nil }
        let (path, query) = splitQuery(rest[authorityEnd...])
        var pathAndQuery = removeDotSegments(Array(path))
        if let query { pathAndQuery += query }
        return pathAndQuery.withUnsafeBytes { CacheKey.primary(scheme: scheme, host: host, port: port, pathAndQuery: $0) }
    }

    private static func hostAndPort(_ authority: ArraySlice<UInt8>, scheme: URIScheme) -> ([UInt8], Int)? {
        var i = authority.startIndex
        var host: [UInt8] = []
        if i < authority.endIndex, authority[i] == 0x5B {  // "[" IPv6 literal "]"
            guard let close = authority.firstIndex(of: 0x5D) else { return nil }
            host = authority[(i + 1)..<close].map(asciiLower)
            guard !host.isEmpty, host.allSatisfy({ isDigit($0) || ($0 &- 0x61 < 6) || $0 == asciiColon || $0 == 0x2E })
            else { return nil }
            i = close + 1
        } else {
            while i < authority.endIndex, authority[i] != asciiColon {
                let b = authority[i]
                guard isAlpha(b) || isDigit(b) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E else { return nil }
                host.append(asciiLower(b))
                i += 1
            }
            guard !host.isEmpty else { return nil }
        }
        var port = scheme.defaultPort
        if i < authority.endIndex {
            guard authority[i] == asciiColon else { return nil }
            let digits = authority[(i + 1)...]
            if !digits.isEmpty {
                guard digits.count <= 5, digits.allSatisfy(isDigit) else { return nil }
                port = digits.reduce(0) { $0 * 10 + Int($1 &- 0x30) }
                guard port > 0, port <= 65_535 else { return nil }
            }
        }
        return (host, port)
    }

    private static func sameOrigin(_ key: [UInt8]?, _ base: BaseURI) -> [UInt8]? {
        guard let key, key.count >= base.originEnd, key[0..<base.originEnd].elementsEqual(base.key[0..<base.originEnd]),
              key.count == base.originEnd || key[base.originEnd] == byteSlash else { return nil }
        return key
    }

    private static func splitQuery(_ bytes: ArraySlice<UInt8>) -> (path: ArraySlice<UInt8>, query: ArraySlice<UInt8>?) {
        guard let mark = bytes.firstIndex(of: 0x3F) else { return (bytes, nil) }
        return (bytes[bytes.startIndex..<mark], bytes[mark...])
    }

    /// RFC 3986 §5.2.4.
    static func removeDotSegments(_ path: [UInt8]) -> [UInt8] {
        var input = path[...]
        var output: [UInt8] = []
        func dropLastSegment() {
            if let slash = output.lastIndex(of: byteSlash) {
                output.removeSubrange(slash...)
            } else {
                output.removeAll()
            }
        }
        let dot: UInt8 = 0x2E
        while !input.isEmpty {
            if input.starts(with: [dot, dot, byteSlash]) {
                input = input.dropFirst(3)
            } else if input.starts(with: [dot, byteSlash]) {
                input = input.dropFirst(2)
            } else if input.starts(with: [byteSlash, dot, byteSlash]) {
                input = input.dropFirst(2)
            } else if input.elementsEqual([byteSlash, dot]) {
                input = [byteSlash][...]
            } else if input.starts(with: [byteSlash, dot, dot, byteSlash]) {
                input = input.dropFirst(3)
                dropLastSegment()
            } else if input.elementsEqual([byteSlash, dot, dot]) {
                input = [byteSlash][...]
                dropLastSegment()
            } else if input.elementsEqual([dot]) || input.elementsEqual([dot, dot]) {
                input = [][...]
            } else {
                var segmentEnd = input.startIndex
                if input[segmentEnd] == byteSlash { segmentEnd += 1 }
                while segmentEnd < input.endIndex, input[segmentEnd] != byteSlash { segmentEnd += 1 }
                output += input[input.startIndex..<segmentEnd]
                input = input[segmentEnd...]
            }
        }
        if output.isEmpty { output = [byteSlash] }
        return output
    }
}
