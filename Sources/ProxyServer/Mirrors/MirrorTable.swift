import HTTPWire
import LarderConfig

/// The `mirrors` of the configuration as routing needs them: which request is a mirror's, and the
/// upstream URL it stands for. Pure, so every rule is table-tested without a connection.
///
/// A mirror is not an open proxy: a request reaches only the upstream prefix of its route, with a
/// path that cannot climb out of it (`.`/`..` segments, encoded or not, and backslashes are
/// refused), so the access rules and budgets of the forward path, which the rewritten request
/// goes through, see exactly the upstream URL that is fetched.
struct MirrorTable: Sendable {
    struct Route: Sendable {
        /// Below the mirror's path, `files/`; empty for the mirror's own upstream.
        var subpath: [UInt8]
        var upstream: MirrorUpstream
        /// `https://host[:port]/path/`, as the rewritten target starts.
        var prefix: [UInt8]
    }

    struct Entry: Sendable {
        var config: MirrorConfig
        /// `/pypi/`
        var path: [UInt8]
        /// Longest subpath first; the mirror's own upstream last.
        var routes: [Route]
    }

    private(set) var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }

    init(_ mirrors: [MirrorConfig]) {
        for m in mirrors {
            var routes = m.also.map { Route(subpath: Array($0.subpath.utf8), upstream: $0.upstream,
                                            prefix: Array($0.upstream.description.utf8)) }
            routes.sort { $0.subpath.count > $1.subpath.count }
            routes.append(Route(subpath: [], upstream: m.upstream, prefix: Array(m.upstream.description.utf8)))
            entries.append(Entry(config: m, path: Array(m.path.utf8), routes: routes))
        }
        entries.sort { $0.path.count > $1.path.count }
    }

    enum Resolution: Equatable {
        case notMirrored
        case refused(Int, String)
        /// `target`: the upstream URL to fetch, in absolute form.
        case mirrored(MirrorMatch, target: [UInt8])
    }

    /// An origin-form target under a mirror's path: the upstream URL it stands for.
    func resolve(originForm target: UnsafeRawBufferPointer) -> Resolution {
        guard let entryIndex = entries.firstIndex(where: { target.starts(with: $0.path) }) else { return .notMirrored }
        let entry = entries[entryIndex]
        let rest = target[entry.path.count...]
        let pathEnd = rest.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? rest.endIndex
        let path = rest[..<pathEnd]
        if let problem = Self.climbs(path) { return .refused(400, "\(problem) in a mirror path (\(entry.config.name))") }
        let routeIndex = entry.routes.firstIndex { path.starts(with: $0.subpath) }!
        let route = entry.routes[routeIndex]
        var upstreamTarget = route.prefix
        let queryEnd = rest.firstIndex(of: UInt8(ascii: "#")) ?? rest.endIndex
        upstreamTarget.append(contentsOf: rest[(rest.startIndex + route.subpath.count)..<queryEnd])
        let match = MirrorMatch(entry: entryIndex, route: routeIndex, relativePath: Array(path), rewritesURLs: true)
        return .mirrored(match, target: upstreamTarget)
    }

    /// A forward-mode `http://` request for a URL that an https mirror upstream serves (the same
    /// host, under its path): fetched as that https URL, so one upstream URL is one stored entry
    /// whichever way a client reached it, and its bytes come over verified TLS. The client named
    /// the upstream itself, so documents reach it unrewritten.
    func capture(_ target: RequestTarget, bytes: UnsafeRawBufferPointer) -> Resolution {
        guard target.form == .absolute, target.scheme == .http, target.port == 80,
              let pathStart = target.pathOffset else { return .notMirrored }
        let end = target.fragmentStart ?? bytes.count
        let pathAndQuery = bytes[pathStart..<end]
        let pathEnd = pathAndQuery.firstIndex(of: UInt8(ascii: "?")) ?? pathAndQuery.endIndex
        let path = pathAndQuery[..<pathEnd]
        for (entryIndex, entry) in entries.enumerated() {
            for (routeIndex, route) in entry.routes.enumerated() {
                let up = route.upstream
                guard up.scheme == .https, up.host.utf8.elementsEqual(target.host),
                      path.starts(with: up.path.utf8) else { continue }
                if Self.climbs(path) != nil { return .notMirrored }
                var upstreamTarget = route.prefix
                upstreamTarget.removeLast(up.path.utf8.count)
                upstreamTarget.append(contentsOf: pathAndQuery)
                let relative = route.subpath + Array(path.dropFirst(up.path.utf8.count))
                let match = MirrorMatch(entry: entryIndex, route: routeIndex, relativePath: relative, rewritesURLs: false)
                return .mirrored(match, target: upstreamTarget)
            }
        }
        return .notMirrored
    }

    /// Why a path could leave the prefix it is joined to: a `.` or `..` segment (RFC 3986 §5.2.4
    /// removes them, and so may the upstream), spelled with `%2e` or not, between `/`s or the
    /// `%2f` and `%5c` an upstream may decode into separators; or a backslash, which some servers
    /// read as `/`.
    static func climbs(_ path: some Collection<UInt8>) -> String? {
        let bytes = Array(path)
        if bytes.contains(UInt8(ascii: "\\")) { return "a backslash" }
        var dots = 0
        var others = 0
        var i = 0
        func segmentEnds() -> Bool {
            defer { dots = 0; others = 0 }
            return others == 0 && (dots == 1 || dots == 2)
        }
        while i <= bytes.count {
            if i == bytes.count || bytes[i] == UInt8(ascii: "/") {
                if segmentEnds() { return "a dot segment" }
                i += 1
            } else if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count,
                      let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) {
                switch Int(high) << 4 | Int(low) {
                case 0x2e: dots += 1
                case 0x2f, 0x5c: if segmentEnds() { return "a dot segment" }
                default: others += 1
                }
                i += 3
            } else {
                if bytes[i] == UInt8(ascii: ".") { dots += 1 } else { others += 1 }
                i += 1
            }
        }
        return nil
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// A request a mirror serves: which mirror and route, and the path below the mirror's.
struct MirrorMatch: Sendable, Equatable {
    var entry: Int
    var route: Int
    /// The path after the mirror's own (`files/packages/…`, `simple/six/`), without the query.
    var relativePath: [UInt8]
    /// The client reached Larder's mirror path (not the upstream's own URL through the proxy):
    /// absolute upstream URLs in what it gets are rewritten to the mirror's.
    var rewritesURLs: Bool
}
