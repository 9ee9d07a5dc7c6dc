/// A PEP 503 HTML project page made from a PEP 691 JSON one, so a mirror can fetch (and filter)
/// the JSON form upstream and still answer a client that asked for HTML.
///
/// Each file becomes one `<a>` carrying what pip and uv read from it: the URL with a
/// `#<hash>=<value>` fragment (PEP 503; sha256 when listed), `data-requires-python` (PEP 503),
/// `data-core-metadata` and its older spelling `data-dist-info-metadata` (PEP 658, PEP 714: both,
/// so older clients still find the metadata), `data-gpg-sig` (PEP 503), `data-yanked` (PEP 592)
/// and `data-provenance` (PEP 740). Every value is HTML-escaped. `upload-time` and `size` have no
/// HTML form and are dropped.
public enum PyPISimpleHTML {
    public static func render(fromJSON document: [UInt8]) throws(RegistryDocumentError) -> [UInt8] {
        var reader = ProjectPageReader(document: document)
        var scanner = JSONScanner(document)
        do {
            try scanner.scan(&reader)
        } catch {
            throw .json(error)
        }
        return Array(page(reader.page).utf8)
    }

    static func page(_ project: ProjectPage) -> String {
        let name = HTMLText.escaped(project.name)
        var html = """
            <!DOCTYPE html>
            <html>
              <head>
                <meta name="pypi:repository-version" content="\(HTMLText.escaped(project.apiVersion))">
                <title>Links for \(name)</title>
              </head>
              <body>
                <h1>Links for \(name)</h1>

            """
        for file in project.files { html += "    " + anchor(file) + "<br />\n" }
        html += "  </body>\n</html>\n"
        return html
    }

    static func anchor(_ file: ProjectPage.File) -> String {
        var attributes = [("href", href(file))]
        if let requiresPython = file.requiresPython, !requiresPython.isEmpty {
            attributes.append(("data-requires-python", requiresPython))
        }
        if let metadata = file.coreMetadata.map(metadataValue) {
            attributes.append(("data-dist-info-metadata", metadata))
            attributes.append(("data-core-metadata", metadata))
        }
        if let gpgSignature = file.gpgSignature { attributes.append(("data-gpg-sig", gpgSignature ? "true" : "false")) }
        if let reason = file.yanked { attributes.append(("data-yanked", reason)) }
        if let provenance = file.provenance { attributes.append(("data-provenance", provenance)) }
        let written = attributes.map { "\($0.0)=\"\(HTMLText.escaped($0.1))\"" }.joined(separator: " ")
        return "<a \(written)>\(HTMLText.escaped(file.filename))</a>"
    }

    /// The URL with the file's hash as its fragment, unless it already has a fragment.
    private static func href(_ file: ProjectPage.File) -> String {
        guard !file.url.contains("#"), let (name, value) = preferredHash(file.hashes) else { return file.url }
        return "\(file.url)#\(name)=\(value)"
    }

    /// PEP 658: `true`, or `<hashname>=<hashvalue>` when the metadata's hash is known.
    private static func metadataValue(_ hashes: [String: String]) -> String {
        preferredHash(hashes).map { "\($0.0)=\($0.1)" } ?? "true"
    }

    /// sha256 (what PyPI lists, and pip checks), else the first name in order.
    private static func preferredHash(_ hashes: [String: String]) -> (String, String)? {
        if let sha256 = hashes["sha256"] { return ("sha256", sha256) }
        return hashes.min { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

/// What a PEP 691 project page says, as far as its HTML form needs.
struct ProjectPage: Equatable {
    struct File: Equatable {
        var filename = ""
        var url = ""
        var hashes: [String: String] = [:]
        var requiresPython: String?
        /// nil: no metadata file; empty: one, hash unknown (`true`); else its hashes.
        var coreMetadata: [String: String]?
        var gpgSignature: Bool?
        /// nil: not yanked; else the reason, possibly empty.
        var yanked: String?
        var provenance: String?
    }

    var name = ""
    var apiVersion = "1.0"
    var files: [File] = []
}

/// Reads a PEP 691 page into a `ProjectPage`.
private struct ProjectPageReader: JSONVisitor {
    let document: [UInt8]
    var page = ProjectPage()
    private var file = ProjectPage.File()
    /// PEP 714 renamed `dist-info-metadata` to `core-metadata`; the new name wins when both are given.
    private var legacyMetadata: [String: String]?
    private var metadata: [String: String]?
    private var metadataSeen = false

    private static let fileEntry = JSONPathPattern("files[]")
    private static let apiVersion = JSONPathPattern("meta.api-version")

    init(document: [UInt8]) { self.document = document }

    mutating func visit(_ value: JSONValue, at path: JSONPath) {
        if path.count == 1, path.key(at: 0) == "name", let name = string(value) {
            page.name = name
        } else if path.matches(Self.apiVersion), let version = string(value) {
            page.apiVersion = version
        } else if path.matches(Self.fileEntry) {
            endFile()
        } else if path.count >= 3, path.hasPrefix(Self.fileEntry), let key = path.key(at: 2) {
            fileMember(key, value, at: path)
        }
    }

    private mutating func fileMember(_ key: String, _ value: JSONValue, at path: JSONPath) {
        let nested = path.count == 4 ? path.key(at: 3) : nil
        switch (key, path.count) {
        case ("filename", 3): file.filename = string(value) ?? ""
        case ("url", 3): file.url = string(value) ?? ""
        case ("hashes", 4): if let nested, let hash = string(value) { file.hashes[nested] = hash }
        case ("requires-python", 3): file.requiresPython = string(value)
        case ("gpg-sig", 3): file.gpgSignature = bool(value)
        case ("provenance", 3): file.provenance = string(value)
        case ("yanked", 3): file.yanked = yankedReason(value)
        case ("core-metadata", 3):
            metadataSeen = true
            metadata = metadataValue(value, previous: metadata)
        case ("core-metadata", 4):
            if let nested, let hash = string(value) { metadata = (metadata ?? [:]).merging([nested: hash]) { $1 } }
        case ("dist-info-metadata", 3), ("data-dist-info-metadata", 3):
            legacyMetadata = metadataValue(value, previous: legacyMetadata)
        case ("dist-info-metadata", 4), ("data-dist-info-metadata", 4):
            if let nested, let hash = string(value) { legacyMetadata = (legacyMetadata ?? [:]).merging([nested: hash]) { $1 } }
        default: break
        }
    }

    private mutating func endFile() {
        file.coreMetadata = metadataSeen ? metadata : legacyMetadata
        page.files.append(file)
        file = ProjectPage.File()
        metadata = nil
        legacyMetadata = nil
        metadataSeen = false
    }

    /// PEP 691: `true`/`false`, or an object of hashes (whose members were read as they ended).
    private func metadataValue(_ value: JSONValue, previous: [String: String]?) -> [String: String]? {
        switch value.kind {
        case .bool: bool(value) == true ? [:] : nil
        case .object: previous ?? [:]
        default: nil
        }
    }

    /// PEP 691: `true`, or a reason; pip reads `false` and an empty reason as not yanked.
    private func yankedReason(_ value: JSONValue) -> String? {
        switch value.kind {
        case .bool: bool(value) == true ? "" : nil
        case .string: string(value).flatMap { $0.isEmpty ? nil : $0 }
        default: nil
        }
    }

    private func string(_ value: JSONValue) -> String? {
        guard value.kind == .string else { return nil }
        return JSONString.decode(document[value.contentRange], hasEscapes: value.hasEscapes)
    }

    private func bool(_ value: JSONValue) -> Bool? {
        guard value.kind == .bool else { return nil }
        return document[value.range.lowerBound] == UInt8(ascii: "t")
    }
}
