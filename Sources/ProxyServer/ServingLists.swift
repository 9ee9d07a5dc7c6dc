import LarderConfig
import Statistics

/// The named lists that shape what Larder serves, shown together in the start log, `/stats` and
/// the dashboard: the cache presets in force. Another list (mirrors, say) joins them as one more
/// property here, one more JSON member beside `presets` and one more part of the log line.
struct ServingLists: Equatable {
    /// `cache.presets`, in the order they apply.
    var presets: [String]

    init(_ config: Config) {
        presets = config.cache.presets
    }

    /// `"presets":["debian","pypi"]`: members of `/stats`' object.
    var jsonMembers: String {
        "\"presets\":[" + presets.map(jsonString).joined(separator: ",") + "]"
    }

    /// `cache presets in force: debian, pypi` (or `none`), at start and when a reload changes them.
    var logLine: String {
        "cache presets in force: " + (presets.isEmpty ? "none" : presets.joined(separator: ", "))
    }
}
