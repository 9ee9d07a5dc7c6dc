/// What a release-age filter took out of a document, for the log line that says so.
public struct RemovedVersions: Sendable, Equatable {
    public struct File: Sendable, Equatable {
        public var filename: String
        public var url: String
        /// When it was published (seconds since the epoch), if the document said.
        public var published: Int64?

        public init(filename: String, url: String, published: Int64?) {
            self.filename = filename
            self.url = url
            self.published = published
        }
    }

    /// Versions no longer listed, in document order.
    public var versions: [String] = []
    /// Files no longer listed, in document order.
    public var files: [File] = []

    public init(versions: [String] = [], files: [File] = []) {
        self.versions = versions
        self.files = files
    }

    public var isEmpty: Bool { versions.isEmpty && files.isEmpty }

    /// `removed 1 version (3.0.0) and 2 files (a.whl, a.tar.gz)`, listing at most ten of each.
    public var summary: String {
        guard !isEmpty else { return "removed nothing" }
        var parts: [String] = []
        if !versions.isEmpty { parts.append(Self.counted(versions, "version")) }
        if !files.isEmpty { parts.append(Self.counted(files.map(\.filename), "file")) }
        return "removed " + parts.joined(separator: " and ")
    }

    private static func counted(_ names: [String], _ noun: String) -> String {
        let shown = names.prefix(10).joined(separator: ", ")
        let more = names.count > 10 ? ", and \(names.count - 10) more" : ""
        return "\(names.count) \(noun)\(names.count == 1 ? "" : "s") (\(shown)\(more))"
    }
}
