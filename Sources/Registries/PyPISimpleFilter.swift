/// `min_release_age` for PyPI's simple API: files uploaded after the cutoff are taken out of a
/// PEP 691 JSON project page, so pip and uv resolve among old-enough files only.
///
/// Each file's `upload-time` (PEP 700, API version 1.1) says when it was uploaded; a file without
/// one, or with one that does not read as RFC 3339, is kept (and counted in `keptUndated`): PyPI
/// gives every file a time, other indexes may not. The PEP 700 `versions` list loses the versions
/// all of whose files were removed. PEP 691 ties files to versions only by file name, so a version
/// is removed when a removed file's name gives it (see `PyPIFilenames`) and no kept file's does;
/// a version with no files at all upstream stays listed, as upstream lists it.
///
/// The page is edited in place: everything but the removed entries stays byte for byte.
public enum PyPISimpleFilter {
    public struct Result: Sendable, Equatable {
        public var document: [UInt8]
        public var removed: RemovedVersions
        /// Files kept because they carry no readable `upload-time`.
        public var keptUndated: Int
    }

    public static func filter(_ document: [UInt8], age: ReleaseAge) throws(RegistryDocumentError) -> Result {
        var reader = SimplePageReader(document: document)
        var scanner = JSONScanner(document)
        do {
            try scanner.scan(&reader)
        } catch {
            throw .json(error)
        }
        let files = reader.files.joined()
        let tooNew: (SimplePageReader.File) -> Bool = { file in
            file.uploaded.map { !age.isOldEnough(published: $0) } ?? false
        }
        let keptUndated = files.filter { $0.uploaded == nil }.count
        guard files.contains(where: tooNew) else {
            return Result(document: document, removed: RemovedVersions(), keptUndated: keptUndated)
        }

        let droppedVersionKeys = versionKeys(files.filter(tooNew), project: reader.projectName)
            .subtracting(versionKeys(files.filter { !tooNew($0) }, project: reader.projectName))
        let isDroppedVersion: (SimplePageReader.Version) -> Bool = { version in
            version.name.map { droppedVersionKeys.contains(PyPIFilenames.versionKey($0)) } ?? false
        }

        var edits: [ByteEdit] = []
        for container in reader.files {
            edits += ByteEdits.removals(of: container.map(\.span)) { tooNew(container[$0]) }
        }
        for container in reader.versions {
            edits += ByteEdits.removals(of: container.map(\.span)) { isDroppedVersion(container[$0]) }
        }
        let removed = RemovedVersions(
            versions: reader.versions.joined().filter(isDroppedVersion).compactMap(\.name),
            files: files.filter(tooNew).map {
                RemovedVersions.File(filename: $0.filename ?? "", url: $0.url ?? "", published: $0.uploaded)
            })
        return Result(document: ByteEdits.apply(edits, to: document), removed: removed, keptUndated: keptUndated)
    }

    private static func versionKeys(_ files: [SimplePageReader.File], project: String?) -> Set<String> {
        Set(files.compactMap { file in
            file.filename.flatMap { PyPIFilenames.version(ofFile: $0, project: project) }.map(PyPIFilenames.versionKey)
        })
    }
}

/// Reads the files and versions of a PEP 691 page, grouped by container (a repeated `files` or
/// `versions` member is edited on its own).
private struct SimplePageReader: JSONVisitor {
    struct File {
        var span: EntrySpan
        var filename: String?
        var url: String?
        /// The latest of its `upload-time` values (a repeated key reads as the later time).
        var uploaded: Int64?
    }

    struct Version {
        var span: EntrySpan
        var name: String?
    }

    let document: [UInt8]
    var projectName: String?
    var files: [[File]] = []
    var versions: [[Version]] = []

    private var openFiles: [File] = []
    private var openFile = File(span: EntrySpan(start: 0, end: 0))
    private var openVersions: [Version] = []

    private static let name = JSONPathPattern("name")
    private static let filesPattern = JSONPathPattern("files")
    private static let fileEntry = JSONPathPattern("files[]")
    private static let versionsPattern = JSONPathPattern("versions")
    private static let versionEntry = JSONPathPattern("versions[]")

    init(document: [UInt8]) { self.document = document }

    mutating func visit(_ value: JSONValue, at path: JSONPath) {
        switch path.count {
        case 1:
            if path.matches(Self.name), value.kind == .string { projectName = string(value) }
            if path.matches(Self.filesPattern), value.kind == .array { files.append(openFiles) }
            if path.matches(Self.versionsPattern), value.kind == .array { versions.append(openVersions) }
            openFiles = []
            openVersions = []
        case 2 where path.matches(Self.fileEntry):
            openFile.span = EntrySpan(value)
            openFiles.append(openFile)
            openFile = File(span: EntrySpan(start: 0, end: 0))
        case 2 where path.matches(Self.versionEntry):
            openVersions.append(Version(span: EntrySpan(value), name: value.kind == .string ? string(value) : nil))
        case 3 where value.kind == .string && path.hasPrefix(Self.fileEntry):
            fileField(path.key(at: 2), string(value))
        default:
            break
        }
    }

    private mutating func fileField(_ key: String?, _ text: String?) {
        switch key {
        case "filename": openFile.filename = text
        case "url": openFile.url = text
        case "upload-time":
            if let seconds = text.flatMap(Timestamps.rfc3339) { openFile.uploaded = max(openFile.uploaded ?? .min, seconds) }
        default: break
        }
    }

    private func string(_ value: JSONValue) -> String? {
        JSONString.decode(document[value.contentRange], hasEscapes: value.hasEscapes)
    }
}
