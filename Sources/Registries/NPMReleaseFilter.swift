/// `min_release_age` for npm: versions published after the cutoff are taken out of a full package
/// document, so the client resolves ranges among old-enough versions only.
///
/// Only the full document (`application/json`) says when each version was published (`time`); the
/// abbreviated one (`application/vnd.npm.install-v1+json`) does not, so the mirror must fetch the
/// full one to filter. A version without a readable `time` entry is kept.
///
/// The document is edited in place rather than decoded and re-serialised, so key order, the
/// README and every other member stay byte for byte: removed are `versions[v]` and `time[v]` for
/// each too-new `v`, and the `dist-tags` that pointed at one. `latest` moves back to the highest
/// remaining release (SemVer precedence, no pre-release) below the one it named, or failing that
/// the highest remaining release, or failing that the highest remaining version; other tags are
/// removed, as there is no telling what they should name instead.
public enum NPMReleaseFilter {
    public struct Result: Sendable, Equatable {
        public var document: [UInt8]
        /// Versions taken out, and their tarballs (`versions[v].dist.tarball`).
        public var removed: RemovedVersions
        public var distTagChanges: [DistTagChange]
    }

    /// A dist-tag that named a removed version.
    public struct DistTagChange: Sendable, Equatable {
        public var tag: String
        public var from: String
        /// The version it names now; nil when the tag was removed.
        public var to: String?
    }

    public static func filter(_ document: [UInt8], age: ReleaseAge) throws(RegistryDocumentError) -> Result {
        var reader = PackumentReader(document: document)
        var scanner = JSONScanner(document)
        do {
            try scanner.scan(&reader)
        } catch {
            throw .json(error)
        }
        if !reader.versionNames.isEmpty, reader.time.isEmpty { throw .missingMember("time") }

        let dropped = reader.tooNewVersions(age: age)
        guard !dropped.isEmpty else { return Result(document: document, removed: RemovedVersions(), distTagChanges: []) }
        let remaining = reader.versionNames.filter { !dropped.contains($0) }
        let (tagEdits, changes) = distTagEdits(reader.distTags, dropped: dropped, remaining: remaining)
        var edits = tagEdits
        for container in reader.versions + reader.time {
            edits += ByteEdits.removals(of: container.map(\.span)) { dropped.contains(container[$0].key) }
        }
        return Result(document: ByteEdits.apply(edits, to: document),
                      removed: reader.removedVersions(dropped), distTagChanges: changes)
    }

    /// Edits for the tags that named a dropped version: `latest` rewritten (or removed), others removed.
    private static func distTagEdits(_ containers: [[PackumentReader.Tag]], dropped: Set<String>,
                                     remaining: [String]) -> ([ByteEdit], [DistTagChange]) {
        var edits: [ByteEdit] = []
        var changes: [DistTagChange] = []
        for tags in containers {
            var removed = Set<Int>()
            for (index, tag) in tags.enumerated() {
                guard let target = tag.version, dropped.contains(target) else { continue }
                let replacement = tag.name == "latest" ? latest(replacing: target, among: remaining) : nil
                if let replacement {
                    edits.append(ByteEdit(range: tag.valueContents, replacement: JSONString.encode(replacement)))
                } else {
                    removed.insert(index)
                }
                changes.append(DistTagChange(tag: tag.name, from: target, to: replacement))
            }
            edits += ByteEdits.removals(of: tags.map(\.span)) { removed.contains($0) }
        }
        return (edits, changes)
    }

    /// What `latest` names once `old` is gone (see the type's comment).
    static func latest(replacing old: String, among remaining: [String]) -> String? {
        let versions = remaining.compactMap { name in SemVer(name).map { (name, $0) } }
        let releases = versions.filter { !$0.1.isPrerelease }
        let highest: ([(String, SemVer)]) -> String? = { $0.max { $0.1 < $1.1 }?.0 }
        if let old = SemVer(old), let below = highest(releases.filter { $0.1 < old }) { return below }
        return highest(releases) ?? highest(versions)
    }
}

/// Reads what the npm filter needs from a package document, grouped by container (a document
/// with a repeated top-level member has each occurrence edited on its own, commas and all).
private struct PackumentReader: JSONVisitor {
    struct Member {
        var key: String
        var span: EntrySpan
    }

    struct Tag {
        var name: String
        var version: String?
        var valueContents: Range<Int>
        var span: EntrySpan
    }

    let document: [UInt8]
    var versions: [[Member]] = []
    var time: [[Member]] = []
    var distTags: [[Tag]] = []
    /// Every version's newest `time` entry (a repeated key reads as the later of its times).
    var published: [String: Int64] = [:]
    var tarballs: [String: String] = [:]

    private var openVersions: [Member] = []
    private var openTime: [Member] = []
    private var openTags: [Tag] = []

    private static let versionMember = JSONPathPattern("versions.*")
    private static let tarball = JSONPathPattern("versions.*.dist.tarball")
    private static let timeMember = JSONPathPattern("time.*")
    private static let tagMember = JSONPathPattern("dist-tags.*")

    init(document: [UInt8]) { self.document = document }

    /// Version names in document order, each once.
    var versionNames: [String] {
        var seen = Set<String>()
        return versions.joined().map(\.key).filter { seen.insert($0).inserted }
    }

    func tooNewVersions(age: ReleaseAge) -> Set<String> {
        Set(versionNames.filter { name in published[name].map { !age.isOldEnough(published: $0) } ?? false })
    }

    func removedVersions(_ dropped: Set<String>) -> RemovedVersions {
        let names = versionNames.filter(dropped.contains)
        let files = names.compactMap { name in
            tarballs[name].map {
                RemovedVersions.File(filename: lastPathSegment($0), url: $0, published: published[name])
            }
        }
        return RemovedVersions(versions: names, files: files)
    }

    mutating func visit(_ value: JSONValue, at path: JSONPath) {
        switch path.count {
        case 1: closeContainer(value, at: path)
        case 2: member(value, at: path)
        case 4 where value.kind == .string && path.matches(Self.tarball):
            if let version = path.key(at: 1), let url = string(value) { tarballs[version] = url }
        default: break
        }
    }

    private mutating func member(_ value: JSONValue, at path: JSONPath) {
        guard let key = path.key(at: 1) else { return }
        if path.matches(Self.versionMember) {
            openVersions.append(Member(key: key, span: EntrySpan(value)))
        } else if path.matches(Self.timeMember) {
            openTime.append(Member(key: key, span: EntrySpan(value)))
            if value.kind == .string, let text = string(value), let seconds = Timestamps.rfc3339(text) {
                published[key] = max(published[key] ?? .min, seconds)
            }
        } else if path.matches(Self.tagMember) {
            let version = value.kind == .string ? string(value) : nil
            openTags.append(Tag(name: key, version: version, valueContents: value.contentRange, span: EntrySpan(value)))
        }
    }

    /// A top-level member ended: the members seen inside it form one container.
    private mutating func closeContainer(_ value: JSONValue, at path: JSONPath) {
        switch (path.key(at: 0), value.kind) {
        case ("versions", .object): versions.append(openVersions)
        case ("time", .object): time.append(openTime)
        case ("dist-tags", .object): distTags.append(openTags)
        default: break
        }
        openVersions = []
        openTime = []
        openTags = []
    }

    private func string(_ value: JSONValue) -> String? {
        JSONString.decode(document[value.contentRange], hasEscapes: value.hasEscapes)
    }
}

/// The last `/`-separated segment of a URL's path (query and fragment dropped).
func lastPathSegment(_ url: String) -> String {
    let path = url.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        .split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
    return path.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
}
