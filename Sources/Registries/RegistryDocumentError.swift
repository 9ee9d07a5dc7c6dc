/// Why a registry document could not be read; the caller passes it on unchanged or refuses it.
public enum RegistryDocumentError: Error, Sendable, Equatable, CustomStringConvertible {
    case json(JSONScanError)
    case html(HTMLScanError)
    /// A member the operation needs is absent (e.g. an npm document without `time`).
    case missingMember(String)

    public var description: String {
        switch self {
        case .json(let error): error.description
        case .html(let error): error.description
        case .missingMember(let name): "the document has no \"\(name)\" member"
        }
    }
}
