/// Lexical path facts for configuration checks (no file system access: symbolic links are not followed).
enum ConfigPaths {
    /// Whether `path` is `directory` or lies below it, both read the same way (relative paths from
    /// the same working directory; a relative and an absolute one are never compared).
    static func isWithin(_ path: String, _ directory: String) -> Bool {
        guard path.hasPrefix("/") == directory.hasPrefix("/") else { return false }
        let inner = components(path), outer = components(directory)
        // `..` is left only at the start: more of them than the directory has climbs out of it.
        return inner.count >= outer.count && Array(inner.prefix(outer.count)) == outer
            && inner.dropFirst(outer.count).first != ".."
    }

    /// Components with `.` and empty ones dropped and `..` applied (one past the start is kept).
    static func components(_ path: String) -> [Substring] {
        var out: [Substring] = []
        for part in path.split(separator: "/") where part != "." {
            if part == "..", let last = out.last, last != ".." { out.removeLast() } else { out.append(part) }
        }
        return out
    }
}
