/// The index documents a mirror rewrites, and where in each the links to rewrite are.
public enum IndexFormat: Sendable, Equatable, CaseIterable {
    /// PEP 503 simple project page (`text/html`, `application/vnd.pypi.simple.v1+html`).
    case pypiSimpleHTML
    /// PEP 691 simple project page (`application/vnd.pypi.simple.v1+json`).
    case pypiSimpleJSON
    /// PyPI's JSON API, `/pypi/<name>/json` and `/pypi/<name>/<version>/json`.
    case pypiJSONAPI
    /// An npm package document, full (`application/json`) or abbreviated
    /// (`application/vnd.npm.install-v1+json`): both hold `versions.*.dist.tarball`.
    case npmPackument
    /// One version's manifest, `/<name>/<version>` (or a dist-tag in place of the version).
    case npmVersion
    /// A crates.io sparse index's `config.json` (RFC 2789).
    case cratesConfig

    /// The JSON string members holding links; everything else in the document is left as sent.
    var linkPaths: [JSONPathPattern] {
        switch self {
        case .pypiSimpleHTML: []
        case .pypiSimpleJSON: [JSONPathPattern("files[].url")]
        case .pypiJSONAPI: [JSONPathPattern("urls[].url"), JSONPathPattern("releases.*[].url")]
        case .npmPackument: [JSONPathPattern("versions.*.dist.tarball")]
        case .npmVersion: [JSONPathPattern("dist.tarball")]
        case .cratesConfig: [JSONPathPattern("dl"), JSONPathPattern("api")]
        }
    }

    /// The simple API's format from the upstream's `Content-Type` (PEP 691 §"Content Types"):
    /// the JSON media type, or HTML (PEP 503's `text/html` or the versioned HTML type); nil for
    /// anything else, which the mirror passes on unrewritten.
    public init?(pypiSimpleContentType contentType: String) {
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingASCIIWhitespace().lowercased()
        } ?? ""
        switch mediaType {
        case "application/vnd.pypi.simple.v1+json", "application/vnd.pypi.simple.latest+json": self = .pypiSimpleJSON
        case "application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.latest+html", "text/html":
            self = .pypiSimpleHTML
        default: return nil
        }
    }
}

/// A rewritten document, and how many links it held.
public struct RewriteResult: Sendable, Equatable {
    public var document: [UInt8]
    /// Links whose upstream prefix was replaced.
    public var rewritten: Int
    /// Links in a rewritten position that matched no prefix (relative links, other hosts): left as sent.
    public var leftAlone: Int
}

/// Replacing upstream link prefixes in index documents, changing nothing else.
///
/// JSON documents are edited in place: only the string values at the format's link paths change;
/// keys, order, whitespace, numbers and every other string stay byte for byte. A link is read with
/// its escapes resolved (so `https:\/\/files.pythonhosted.org\/...` is recognised) and a rewritten
/// one is written back JSON-escaped, without `\/`. HTML pages change only in `href` values of `<a>`
/// and `<base>` tags (see `HTMLLinks`).
public enum IndexRewrite {
    public static func rewrite(_ document: [UInt8], as format: IndexFormat,
                               with map: URLPrefixMap) throws(RegistryDocumentError) -> RewriteResult {
        if format == .pypiSimpleHTML {
            do {
                return try HTMLLinks.rewrite(document, with: map)
            } catch {
                throw .html(error)
            }
        }
        return try rewriteJSON(document, linkPaths: format.linkPaths, with: map)
    }

    static func rewriteJSON(_ document: [UInt8], linkPaths: [JSONPathPattern],
                            with map: URLPrefixMap) throws(RegistryDocumentError) -> RewriteResult {
        var rewriter = JSONLinkRewriter(document: document, linkPaths: linkPaths, map: map)
        var scanner = JSONScanner(document)
        do {
            try scanner.scan(&rewriter)
        } catch {
            throw .json(error)
        }
        return RewriteResult(document: ByteEdits.apply(rewriter.edits, to: document),
                             rewritten: rewriter.edits.count, leftAlone: rewriter.leftAlone)
    }
}

/// Collects one edit per string value at a link path whose text starts with a mapped prefix.
private struct JSONLinkRewriter: JSONVisitor {
    let document: [UInt8]
    let linkPaths: [JSONPathPattern]
    let map: URLPrefixMap
    var edits: [ByteEdit] = []
    var leftAlone = 0

    mutating func visit(_ value: JSONValue, at path: JSONPath) {
        guard value.kind == .string, linkPaths.contains(where: path.matches) else { return }
        guard let link = JSONString.decode(document[value.contentRange], hasEscapes: value.hasEscapes),
              let rewritten = map.rewrite(link) else {
            leftAlone += 1
            return
        }
        edits.append(ByteEdit(range: value.contentRange, replacement: JSONString.encode(rewritten)))
    }
}

extension StringProtocol {
    func trimmingASCIIWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        let text = self[...]
        guard let first = text.firstIndex(where: { !isSpace($0) }),
              let last = text.lastIndex(where: { !isSpace($0) }) else { return Substring() }
        return Substring(text[first...last])
    }
}
