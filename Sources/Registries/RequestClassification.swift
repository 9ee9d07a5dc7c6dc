/// The registries a mirror endpoint can front, each with its own path layout.
public enum RegistryKind: String, Sendable, CaseIterable {
    case pypi, npm, crates, debian, go, maven, rubygems
    /// Any other upstream: nothing is known of its layout, so nothing is rewritten or held back.
    case plain
}

/// What a request to a mirror endpoint asks for, from the path after the mirror's prefix.
public enum RequestClass: Sendable, Equatable {
    /// A document listing releases: fetched fresh, possibly rewritten or filtered.
    case indexDocument(IndexDocument)
    /// One release's file (immutable once published): subject to `min_release_age`.
    case packageFile
    /// Anything else: passed through as it is.
    case passthrough
    /// A path that could reach a different resource upstream than it seems to (`.` or `..`
    /// segments, also percent-encoded, or an empty segment): classifying it could let a file
    /// through unchecked, so it is refused.
    case rejected(reason: String)
}

/// The index documents of each registry.
public enum IndexDocument: Sendable, Equatable {
    /// `/simple/`, `/simple/<project>/` (PEP 503 HTML or PEP 691 JSON, by content type).
    case pypiSimple
    /// `/pypi/<project>/json`, `/pypi/<project>/<version>/json`.
    case pypiJSONAPI
    /// `/<name>`, `/@scope%2f<name>`, `/@scope/<name>`.
    case npmPackument
    /// `/<name>/<version-or-tag>`.
    case npmVersion
    /// `/config.json` (RFC 2789).
    case cratesConfig
    /// `/1/a`, `/2/ab`, `/3/a/abc`, `/ab/cd/abcd`: JSON lines without links, passed on unchanged.
    case cratesIndexEntry
    /// `dists/<suite>/InRelease`, `Release`, `Release.gpg`.
    case aptRelease
    /// Any other file under `dists/` (`Packages.xz`, by-hash files, …).
    case aptIndex
    /// `/<module>/@v/list`.
    case goVersionList
    /// `/<module>/@latest`.
    case goLatest
    /// `maven-metadata.xml` (and its checksums), `archetype-catalog.xml`.
    case mavenMetadata
    /// The compact index (`/versions`, `/names`, `/info/<gem>`), the specs files, the dependency API.
    case rubygemsIndex

    /// The link rewrite that applies to this document, given the upstream's `Content-Type` (which
    /// only the simple API needs); nil when its links need no rewriting.
    public func rewriteFormat(contentType: String?) -> IndexFormat? {
        switch self {
        case .pypiSimple: contentType.flatMap { IndexFormat(pypiSimpleContentType: $0) }
        case .pypiJSONAPI: .pypiJSONAPI
        case .npmPackument: .npmPackument
        case .npmVersion: .npmVersion
        case .cratesConfig: .cratesConfig
        default: nil
        }
    }
}

extension RegistryKind {
    /// Classifies the path after the mirror's prefix (`/simple/requests/`, with or without the
    /// leading `/`); a query or fragment is ignored.
    public func classify<Bytes: Collection<UInt8>>(path: Bytes) -> RequestClass {
        classify(path: String(decoding: path, as: UTF8.self))
    }

    public func classify(path: String) -> RequestClass {
        let segments = RequestPath.segments(path)
        if let reason = RequestPath.unsafeReason(segments) { return .rejected(reason: reason) }
        switch self {
        case .pypi: return RequestPath.pypi(segments)
        case .npm: return RequestPath.npm(segments)
        case .crates: return RequestPath.crates(segments)
        case .debian: return RequestPath.debian(segments)
        case .go: return RequestPath.go(segments)
        case .maven: return RequestPath.maven(segments)
        case .rubygems: return RequestPath.rubygems(segments)
        case .plain: return .passthrough
        }
    }
}

/// The layouts, one function per registry, over the path's `/`-separated segments (a trailing
/// `/` leaves a last empty segment).
enum RequestPath {
    static func segments(_ path: String) -> [Substring] {
        let withoutQuery = path.prefix { $0 != "?" && $0 != "#" }
        var segments = withoutQuery.split(separator: "/", omittingEmptySubsequences: false)
        if segments.first == "" { segments.removeFirst() }
        return segments
    }

    /// Dot segments, also spelled `%2e`, or hidden in a segment behind `%2f` or `%5c` (which an
    /// upstream may decode into a separator), and empty segments before the last.
    static func unsafeReason(_ segments: [Substring]) -> String? {
        for (index, segment) in segments.enumerated() {
            if segment.isEmpty, index < segments.count - 1 { return "empty path segment" }
            let decoded = segment.lowercased().replacing("%2e", with: ".").replacing("%2f", with: "/")
                .replacing("%5c", with: "/").replacing("\\", with: "/")
            if decoded.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == "." || $0 == ".." }) {
                return "dot segment in path"
            }
        }
        return nil
    }

    /// PEP 503/691 `/simple/**`; the JSON API; `/files/packages/**` (the files host under the mirror).
    static func pypi(_ s: [Substring]) -> RequestClass {
        switch s.first {
        case "simple": return .indexDocument(.pypiSimple)
        case "pypi" where (s.count == 3 || s.count == 4) && s.last == "json" && !s[1].isEmpty:
            return .indexDocument(.pypiJSONAPI)
        case "files" where s.count >= 3 && s[1] == "packages" && isFileName(s.last):
            return .packageFile
        default: return .passthrough
        }
    }

    /// `/<name>`, `/@scope%2f<name>`, `/@scope/<name>`, each optionally followed by `/<version>`
    /// or `/-/<file>.tgz`; `/-/…` is the registry's own API (search, audit).
    static func npm(_ s: [Substring]) -> RequestClass {
        guard let first = s.first, !first.isEmpty, !first.hasPrefix("-") else { return .passthrough }
        let nameLength = first.hasPrefix("@") && !first.lowercased().contains("%2f") ? 2 : 1
        guard s.count >= nameLength, s[..<nameLength].allSatisfy({ !$0.isEmpty }) else { return .passthrough }
        let rest = s[nameLength...]
        switch rest.count {
        case 0: return .indexDocument(.npmPackument)
        case 1 where !rest[rest.startIndex].isEmpty: return .indexDocument(.npmVersion)
        case 2 where rest.first == "-" && rest.last?.hasSuffix(".tgz") == true: return .packageFile
        default: return .passthrough
        }
    }

    /// The sparse index (RFC 2789): `config.json`, entries by name length; downloads under `/dl/`.
    static func crates(_ s: [Substring]) -> RequestClass {
        switch s.count {
        case 1 where s[0] == "config.json": return .indexDocument(.cratesConfig)
        case _ where s.first == "dl" && s.count >= 2 && isFileName(s.last): return .packageFile
        case 2 where (s[0] == "1" || s[0] == "2") && isFileName(s[1]): return .indexDocument(.cratesIndexEntry)
        case 3 where s[0] == "3" && s[1].count == 1 && isFileName(s[2]): return .indexDocument(.cratesIndexEntry)
        case 3 where s[0].count == 2 && s[1].count == 2 && isFileName(s[2]): return .indexDocument(.cratesIndexEntry)
        default: return .passthrough
        }
    }

    /// `dists/<suite>/…` (Release files and indexes); `pool/…` (packages).
    static func debian(_ s: [Substring]) -> RequestClass {
        switch s.first {
        case "dists" where s.count == 3 && ["InRelease", "Release", "Release.gpg"].contains(s[2]):
            return .indexDocument(.aptRelease)
        case "dists" where s.count >= 3 && isFileName(s.last): return .indexDocument(.aptIndex)
        case "pool" where s.count >= 2 && isFileName(s.last): return .packageFile
        default: return .passthrough
        }
    }

    /// The GOPROXY protocol: `<module>/@v/list`, `<module>/@latest`, `<module>/@v/<version>.{info,mod,zip}`.
    static func go(_ s: [Substring]) -> RequestClass {
        guard s.count >= 2, s.first != "sumdb" else { return .passthrough }
        if s.last == "@latest" { return .indexDocument(.goLatest) }
        guard s.count >= 3, s[s.count - 2] == "@v", let last = s.last else { return .passthrough }
        if last == "list" { return .indexDocument(.goVersionList) }
        let isVersionFile = [".info", ".mod", ".zip"].contains { last.hasSuffix($0) && last.count > $0.count }
        return isVersionFile ? .packageFile : .passthrough
    }

    /// `<group path>/<artifact>/<version>/<file>`; `maven-metadata.xml*` at the artifact or version level.
    static func maven(_ s: [Substring]) -> RequestClass {
        guard let last = s.last, !last.isEmpty else { return .passthrough }
        if last.hasPrefix("maven-metadata.xml") || last == "archetype-catalog.xml" { return .indexDocument(.mavenMetadata) }
        return s.count >= 4 ? .packageFile : .passthrough
    }

    /// `gems/<name>-<version>.gem`, `quick/Marshal.4.8/<name>-<version>.gemspec.rz`; the indexes.
    static func rubygems(_ s: [Substring]) -> RequestClass {
        switch s.count {
        case 1 where ["versions", "names"].contains(s[0]) || s[0].hasSuffix("specs.4.8.gz") || s[0].hasSuffix("specs.4.8"):
            return .indexDocument(.rubygemsIndex)
        case 2 where s[0] == "gems" && s[1].hasSuffix(".gem"): return .packageFile
        case 2 where s[0] == "info" && isFileName(s[1]): return .indexDocument(.rubygemsIndex)
        case 3 where s[0] == "quick" && s[1] == "Marshal.4.8" && s[2].hasSuffix(".gemspec.rz"): return .packageFile
        case 3 where s[0] == "api" && s[1] == "v1" && s[2].hasPrefix("dependencies"): return .indexDocument(.rubygemsIndex)
        default: return .passthrough
        }
    }

    private static func isFileName(_ segment: Substring?) -> Bool {
        segment.map { !$0.isEmpty } ?? false
    }
}
