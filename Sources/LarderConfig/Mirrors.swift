import HTTPWire
import Yams

/// The registry formats a mirror knows: which documents it rewrites so that every file a client
/// fetches comes through Larder, and which carry the dates `min_release_age` needs.
public enum RegistryKind: String, Sendable, Equatable, CaseIterable {
    case debian, pypi, npm, crates, go, maven, rubygems
    /// Any other upstream: paths are mapped, documents pass unchanged.
    case plain

    /// The cache preset of the same name, turned on with the mirror.
    public var preset: String? { self == .plain ? nil : rawValue }

    /// Formats whose index documents date each version (PyPI's PEP 700 `upload-time`, npm's `time`).
    public var datesVersions: Bool { self == .pypi || self == .npm }
}

/// Where a mirror fetches from: an `http(s)://host[:port]/path/` prefix, its path ending in `/`.
public struct MirrorUpstream: Sendable, Equatable, CustomStringConvertible {
    public var scheme: URIScheme
    public var host: String
    public var port: Int
    /// Starts and ends with `/`.
    public var path: String

    public init(scheme: URIScheme, host: String, port: Int, path: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
    }

    /// The prefix as a URL, the default port elided: `https://pypi.org/`.
    public var description: String {
        let defaultPort = scheme.defaultPort
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(scheme.name)://\(h)\(port == defaultPort ? "" : ":\(port)")\(path)"
    }

    /// `http(s)://host[:port]/path`; a path not ending in `/` gets one.
    public static func parse(_ text: String) throws(ValueError) -> MirrorUpstream {
        let t = text.trimmingSpaces()
        let schemeEnd = t.firstRange(of: "://")
        guard let schemeEnd else { throw ValueError("expected https://HOST[:PORT]/PATH/, got \"\(text)\"") }
        let rest = t[schemeEnd.upperBound...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let origin = try ConfigLoader.parseOriginURL(String(t[..<slash]))
        var path = String(rest[slash...])
        if path.isEmpty { path = "/" }
        if !path.hasSuffix("/") { path += "/" }
        guard MirrorPaths.isPlainPath(path) else {
            throw ValueError("the upstream's path may hold letters, digits and - . _ ~ / only, "
                             + "without . or .. segments, got \"\(text)\"")
        }
        return MirrorUpstream(scheme: origin.scheme, host: origin.host, port: origin.port, path: path)
    }
}

/// A second upstream under a mirror's path: PyPI's files host under `files/`, crates.io's
/// downloads under `dl/`.
public struct MirrorRoute: Sendable, Equatable {
    /// A path below the mirror's, ending in `/`: `files/`.
    public var subpath: String
    public var upstream: MirrorUpstream

    public init(subpath: String, upstream: MirrorUpstream) {
        self.subpath = subpath
        self.upstream = upstream
    }
}

/// One `mirrors` entry: a path on Larder's own listeners that stands for an upstream registry,
/// fetched over verified TLS by Larder, so clients need no CA and no proxy setting.
public struct MirrorConfig: Sendable, Equatable {
    public var name: String
    public var kind: RegistryKind
    /// On Larder's listeners, starts and ends with `/`: `/pypi/`.
    public var path: String
    public var upstream: MirrorUpstream
    public var also: [MirrorRoute]
    /// Versions published more recently than this are hidden and their files refused; nil: off.
    public var minReleaseAge: Double?

    public init(name: String, kind: RegistryKind, path: String, upstream: MirrorUpstream, also: [MirrorRoute] = [],
                minReleaseAge: Double? = nil) {
        self.name = name
        self.kind = kind
        self.path = path
        self.upstream = upstream
        self.also = also
        self.minReleaseAge = minReleaseAge
    }

    /// The public registries, reached at `/NAME/`.
    public static func builtIn(_ kind: RegistryKind) -> MirrorConfig? {
        func url(_ s: String) -> MirrorUpstream {
            do throws(ValueError) { return try MirrorUpstream.parse(s) } catch { fatalError("built-in mirror \(s)") }
        }
        let name = kind.rawValue
        switch kind {
        case .debian: return MirrorConfig(name: name, kind: kind, path: "/debian/", upstream: url("https://deb.debian.org/debian/"))
        case .pypi:
            return MirrorConfig(name: name, kind: kind, path: "/pypi/", upstream: url("https://pypi.org/"),
                                also: [MirrorRoute(subpath: "files/", upstream: url("https://files.pythonhosted.org/"))])
        case .npm: return MirrorConfig(name: name, kind: kind, path: "/npm/", upstream: url("https://registry.npmjs.org/"))
        case .crates:
            return MirrorConfig(name: name, kind: kind, path: "/crates/", upstream: url("https://index.crates.io/"),
                                also: [MirrorRoute(subpath: "dl/", upstream: url("https://static.crates.io/crates/"))])
        case .go: return MirrorConfig(name: name, kind: kind, path: "/go/", upstream: url("https://proxy.golang.org/"))
        case .maven:
            return MirrorConfig(name: name, kind: kind, path: "/maven/", upstream: url("https://repo.maven.apache.org/maven2/"))
        case .rubygems: return MirrorConfig(name: name, kind: kind, path: "/rubygems/", upstream: url("https://rubygems.org/"))
        case .plain: return nil
        }
    }

    public static let builtInNames = RegistryKind.allCases.filter { $0 != .plain }.map(\.rawValue)
}

/// Checks on the paths mirrors are named by.
public enum MirrorPaths {
    /// Letters, digits, `-._~` and `/`, no `.` or `..` segment, no `//`: a path that means one
    /// thing to every server and cannot climb out of the prefix it is joined to.
    public static func isPlainPath(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        for c in path.unicodeScalars {
            let ok = (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9")
                || c == "-" || c == "." || c == "_" || c == "~" || c == "/"
            if !ok { return false }
        }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().dropLast()
        return !segments.contains { $0.isEmpty || $0 == "." || $0 == ".." }
    }
}

extension ConfigSchema {
    static let mirrorKeys = ["name", "kind", "path", "upstream", "also", "min_release_age"]

    /// `mirrors`: built-in names (`pypi`) or mappings (`{name, kind, path, upstream, also, min_release_age}`).
    static func mirrors(_ n: Node) throws(ValueError) -> [MirrorConfig] {
        var out: [MirrorConfig] = []
        for (i, item) in try list(n).enumerated() {
            let m = try mirror(item, place: "mirror \(i + 1)")
            if out.contains(where: { $0.name == m.name }) { throw ValueError("mirror \"\(m.name)\" is listed twice") }
            if let other = out.first(where: { $0.path == m.path }) {
                throw ValueError("mirrors \"\(other.name)\" and \"\(m.name)\" both use the path \(m.path)")
            }
            out.append(m)
        }
        return out
    }

    private static func mirror(_ item: Node, place: String) throws(ValueError) -> MirrorConfig {
        if case .scalar = item {
            let name = try nonEmpty(item)
            guard let kind = RegistryKind(rawValue: name), let m = MirrorConfig.builtIn(kind) else {
                throw ValueError("\(place): unknown mirror \"\(name)\" (built in: "
                                 + MirrorConfig.builtInNames.joined(separator: ", ") + "; or give a mapping with upstream)")
            }
            return m
        }
        guard case .mapping(let map) = item else { throw ValueError("\(place): expected a name or a mapping, got \(describe(item))") }
        var name: String?, kind: RegistryKind?, path: String?, upstream: MirrorUpstream?
        var also: [MirrorRoute]?, minAge: Double?
        for (k, v) in map {
            let key = try scalar(k)
            do throws(ValueError) {
                switch key {
                case "name":
                    let text = try nonEmpty(v)
                    guard text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
                        throw ValueError("letters, digits, - and _ only, got \"\(text)\"")
                    }
                    name = text
                case "kind": kind = try choiceOf(v, RegistryKind.self)
                case "path":
                    var text = try nonEmpty(v)
                    if !text.hasSuffix("/") { text += "/" }
                    guard text != "/", MirrorPaths.isPlainPath(text) else {
                        throw ValueError("expected /NAME/ (letters, digits and - . _ ~), got \"\(text)\"")
                    }
                    path = text
                case "upstream": upstream = try MirrorUpstream.parse(try nonEmpty(v))
                case "also": also = try mirrorRoutes(v)
                case "min_release_age":
                    if let s = try scalarOrNull(v), s != "off" {
                        let age = try positiveDuration(v)
                        guard age <= 36_500 * 86_400 else { throw ValueError("at most 36500d, got \"\(s)\"") }
                        minAge = age
                    }
                default: throw ValueError("unknown key (known: \(mirrorKeys.joined(separator: ", ")))")
                }
            } catch {
                throw ValueError("\(place): \(key): \(error.message)")
            }
        }
        guard let name else { throw ValueError("\(place): needs a name") }
        let resolvedKind = kind ?? RegistryKind(rawValue: name) ?? .plain
        let builtIn = MirrorConfig.builtIn(resolvedKind)
        guard let resolvedUpstream = upstream ?? builtIn?.upstream else {
            throw ValueError("mirror \"\(name)\": needs an upstream (https://HOST/PATH/)")
        }
        // A built-in's second hosts belong to its own upstream: a mirror of another registry
        // (a devpi, an internal npm) names its own or serves files itself.
        let resolvedAlso = also ?? (upstream == nil ? builtIn?.also ?? [] : [])
        if minAge != nil, !resolvedKind.datesVersions {
            throw ValueError("mirror \"\(name)\": min_release_age needs a registry whose index dates its versions "
                             + "(kind pypi or npm), not \(resolvedKind.rawValue)")
        }
        return MirrorConfig(name: name, kind: resolvedKind, path: path ?? "/\(name)/", upstream: resolvedUpstream,
                            also: resolvedAlso, minReleaseAge: minAge)
    }

    /// `also: {files: https://files.pythonhosted.org/}`: subpath → upstream.
    private static func mirrorRoutes(_ n: Node) throws(ValueError) -> [MirrorRoute] {
        guard case .mapping(let map) = n else { throw ValueError("expected {SUBPATH: URL, …}, got \(describe(n))") }
        var routes: [MirrorRoute] = []
        for (k, v) in map {
            var sub = try scalar(k)
            while sub.hasPrefix("/") { sub.removeFirst() }
            if !sub.hasSuffix("/") { sub += "/" }
            guard sub != "/", MirrorPaths.isPlainPath("/" + sub) else {
                throw ValueError("a subpath is letters, digits and - . _ ~, got \"\(sub)\"")
            }
            routes.append(MirrorRoute(subpath: sub, upstream: try MirrorUpstream.parse(try nonEmpty(v))))
        }
        return routes
    }

    private static func choiceOf<T: CaseIterable & RawRepresentable>(_ n: Node, _: T.Type) throws(ValueError) -> T
    where T.RawValue == String {
        let s = try scalar(n)
        guard let value = T(rawValue: s) else {
            throw ValueError("expected one of \(T.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(s)\"")
        }
        return value
    }
}

extension ValueShape where T == [MirrorConfig] {
    static var mirrors: ValueShape<[MirrorConfig]> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.mirrors(n) }, render: { mirrors in
            "[" + mirrors.map(ConfigText.mirror).joined(separator: ", ") + "]"
        })
    }
}

extension ConfigText {
    /// A mirror written out in full, so that it reads back the same whatever defaults it came from.
    static func mirror(_ m: MirrorConfig) -> String {
        var parts = ["name: \(scalar(m.name))", "kind: \(m.kind.rawValue)", "path: \(scalar(m.path))",
                     "upstream: \(scalar(m.upstream.description))"]
        parts.append("also: {" + m.also.map { "\(scalar($0.subpath)): \(scalar($0.upstream.description))" }
            .joined(separator: ", ") + "}")
        if let age = m.minReleaseAge { parts.append("min_release_age: \(duration(age))") }
        return "{" + parts.joined(separator: ", ") + "}"
    }
}

extension Config {
    /// `cache.presets`, then the preset of each mirror's registry not already listed: a mirror
    /// turns its preset on, so that `mirrors: [pypi]` alone keeps PyPI's files.
    public var presetsInForce: [String] {
        var names = cache.presets
        for m in mirrors {
            if let p = m.kind.preset, Presets.names.contains(p), !names.contains(p) { names.append(p) }
        }
        return names
    }

    /// The rules that apply: the user's own first (they win), then each preset's in force, in order.
    /// A preset rule bound to its registry's public host (npm's documents, crates.io's index) is
    /// followed by the same rule for the upstream hosts of each mirror of that registry.
    public var effectiveRules: [CacheRuleConfig] { rulesInForce.map(\.rule) }

    /// `effectiveRules`, each with where it is written (a mirror host's copy of a preset rule is
    /// the preset's rule), for the admin endpoint's account of an entry's lifetime.
    public var rulesInForce: [(rule: CacheRuleConfig, source: RuleSource)] {
        cache.rules.enumerated().map { (rule: $1, source: RuleSource(preset: nil, index: $0)) }
            + presetsInForce.flatMap { name -> [(rule: CacheRuleConfig, source: RuleSource)] in
                let hosts = mirrors.filter { $0.kind.preset == name }
                    .flatMap { [$0.upstream.host] + $0.also.map(\.upstream.host) }
                return (Presets.named(name)?.rules ?? []).enumerated().flatMap { i, rule in
                    Self.withMirrorHosts(rule, hosts).map { (rule: $0, source: RuleSource(preset: name, index: i)) }
                }
            }
    }

    /// `rule`, and when it is bound to a host, a copy bound to each of `hosts` it does not match.
    private static func withMirrorHosts(_ rule: CacheRuleConfig, _ hosts: [String]) -> [CacheRuleConfig] {
        guard let bound = rule.host else { return [rule] }
        var copies = [rule]
        for host in hosts where !bound.matches(Array(host.utf8)) {
            guard let pattern = try? ConfigLoader.parseHostPattern(host),
                  !copies.contains(where: { $0.host == pattern }) else { continue }
            var copy = rule
            copy.host = pattern
            copies.append(copy)
        }
        return copies
    }
}
