/// What a PyPI file's name says about its release, for telling which version a file belongs to:
/// PEP 691 lists files and versions separately and links them only through the file names.
enum PyPIFilenames {
    /// PEP 503 §"Normalized Names": lowercase, each run of `-`, `_`, `.` as one `-`.
    static func normalizedProjectName(_ name: String) -> String {
        var out = ""
        var inSeparatorRun = false
        for character in name.lowercased() {
            if character == "-" || character == "_" || character == "." {
                if !inSeparatorRun { out.append("-") }
                inSeparatorRun = true
            } else {
                out.append(character)
                inSeparatorRun = false
            }
        }
        return out
    }

    /// The version part of a distribution's file name, or nil for a kind of file whose name does
    /// not say (Windows installers, unknown extensions).
    ///
    /// Wheels (`name-1.0-py3-none-any.whl`, PEP 427) and eggs (`name-1.0-py3.8.egg`) escape `-` in
    /// the name, so the version is their second field. Source distributions (`name-1.0.tar.gz`,
    /// PEP 625) may have `-` in older names: the version follows the prefix that normalises to the
    /// project's name, or else the last `-`.
    static func version(ofFile filename: String, project: String?) -> String? {
        if filename.hasSuffix(".whl") || filename.hasSuffix(".egg") {
            let fields = filename.split(separator: "-", omittingEmptySubsequences: false)
            return fields.count >= 3 ? String(fields[1]) : nil
        }
        guard let stem = sdistStem(filename) else { return nil }
        if let project, let version = version(ofStem: stem, project: normalizedProjectName(project)) { return version }
        guard let dash = stem.lastIndex(of: "-") else { return nil }
        let version = stem[stem.index(after: dash)...]
        return version.isEmpty ? nil : String(version)
    }

    private static let sdistExtensions = [".tar.gz", ".tar.bz2", ".tar.xz", ".tar.Z", ".tar", ".tgz", ".zip"]

    private static func sdistStem(_ filename: String) -> Substring? {
        for suffix in sdistExtensions where filename.hasSuffix(suffix) {
            return filename.dropLast(suffix.count)
        }
        return nil
    }

    private static func version(ofStem stem: Substring, project: String) -> String? {
        var dash = stem.firstIndex(of: "-")
        while let position = dash {
            let version = stem[stem.index(after: position)...]
            if normalizedProjectName(String(stem[..<position])) == project {
                return version.isEmpty ? nil : String(version)
            }
            dash = version.firstIndex(of: "-")
        }
        return nil
    }

    /// A light normal form for comparing a file name's version with a listed one: lowercase, and
    /// `_` (how wheels write `-`, PEP 427) as `-`. Not PEP 440 normalisation (`1.0-beta` and `1.0b0`
    /// stay different): the filter removes a listed version only when a removed file spells it the
    /// same way and no kept file does.
    static func versionKey(_ version: String) -> String {
        String(version.lowercased().map { $0 == "_" ? "-" : $0 })
    }
}
