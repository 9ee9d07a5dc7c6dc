/// A request path under `dists/<suite>/`, split into the suite and the path its Release file lists.
///
/// The suite is the first segment after `dists/`: `dists/bookworm-updates/main/binary-amd64/Packages.xz`
/// is suite `bookworm-updates`, path `main/binary-amd64/Packages.xz`. Old suites named with a slash
/// (`dists/stretch/updates/…`) read as suite `stretch` and path `updates/…`.
public struct AptDistPath: Sendable, Equatable {
    public var suite: String
    public var relativePath: String

    public init(suite: String, relativePath: String) {
        self.suite = suite
        self.relativePath = relativePath
    }

    /// Reads `dists/<suite>/<path>` (with or without a leading `/`); nil for anything else, or for
    /// a path with an empty, `.` or `..` segment.
    public init?(requestPath: String) {
        var segments = requestPath.split(separator: "/", omittingEmptySubsequences: false)
        if segments.first == "" { segments.removeFirst() }
        guard segments.count >= 3, segments[0] == "dists",
              segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else { return nil }
        suite = String(segments[1])
        relativePath = segments[2...].joined(separator: "/")
    }

    /// `dists/<suite>/<path>`
    public var requestPath: String { "dists/\(suite)/\(relativePath)" }

    /// Whether the path already names a file by hash (`…/by-hash/<algorithm>/<hex>`).
    public var isByHash: Bool {
        let segments = relativePath.split(separator: "/")
        return segments.count >= 3 && segments[segments.count - 3] == "by-hash"
    }

    /// The file's by-hash twin in the same directory: `<dir>/by-hash/SHA256/<hex>` (the Debian
    /// repository format, "Acquire-By-Hash").
    public func byHashPath(sha256: String) -> AptDistPath {
        AptDistPath(suite: suite, relativePath: Self.byHashPath(directoryOf: relativePath, sha256: sha256))
    }

    static func byHashPath(directoryOf relativePath: String, sha256: String) -> String {
        let directory = relativePath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return (directory.isEmpty ? "" : directory + "/") + "by-hash/SHA256/" + sha256
    }
}
