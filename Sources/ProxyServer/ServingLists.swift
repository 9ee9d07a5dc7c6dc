import LarderConfig
import Statistics

/// The named lists that shape what Larder serves, shown together in the start log, `/stats` and
/// the dashboard: the cache presets in force (those listed, then those the mirrors turn on) and
/// the registry mirrors.
struct ServingLists: Equatable {
    /// The presets in force, in the order they apply.
    var presets: [String]
    var mirrors: [MirrorConfig]

    init(_ config: Config) {
        presets = config.presetsInForce
        mirrors = config.mirrors
    }

    /// `"presets":["debian","pypi"],"mirrors":[{"name":"pypi","path":"/pypi/",…}]`: members of `/stats`' object.
    var jsonMembers: String {
        "\"presets\":[" + presets.map(jsonString).joined(separator: ",") + "],\"mirrors\":["
            + mirrors.map(Self.json).joined(separator: ",") + "]"
    }

    private static func json(_ m: MirrorConfig) -> String {
        var members = ["\"name\":" + jsonString(m.name), "\"kind\":" + jsonString(m.kind.rawValue),
                       "\"path\":" + jsonString(m.path), "\"upstream\":" + jsonString(m.upstream.description)]
        members.append("\"also\":{" + m.also.map { jsonString($0.subpath) + ":" + jsonString($0.upstream.description) }
            .joined(separator: ",") + "}")
        members.append("\"min_release_age\":" + (m.minReleaseAge.map { String(Int64($0)) } ?? "null"))
        return "{" + members.joined(separator: ",") + "}"
    }

    /// `cache presets in force: debian, pypi; mirrors: pypi /pypi/ → https://pypi.org/ (files/ →
    /// https://files.pythonhosted.org/)` (or `none`), at start and when a reload changes them.
    var logLine: String {
        var line = "cache presets in force: " + (presets.isEmpty ? "none" : presets.joined(separator: ", "))
        guard !mirrors.isEmpty else { return line }
        line += "; mirrors: " + mirrors.map { m in
            var text = "\(m.name) \(m.path) → \(m.upstream)"
            if !m.also.isEmpty { text += " (" + m.also.map { "\($0.subpath) → \($0.upstream)" }.joined(separator: ", ") + ")" }
            if let age = m.minReleaseAge { text += ", min_release_age \(Int64(age))s" }
            return text
        }.joined(separator: "; ")
        return line
    }
}
