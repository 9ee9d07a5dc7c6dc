/// What differs between two configurations, key by key, and whether each difference can take
/// effect in a running Larder (a reload) or needs a restart: each key's `ConfigField.reload` says.
public enum ConfigDiff {
    /// Keys whose values differ: those a reload applies, and those that wait for a restart.
    public static func between(_ old: Config, _ new: Config) -> (live: [String], restart: [String]) {
        var live: [String] = []
        var restart: [String] = []
        for field in ConfigSchema.fields where !field.same(old, new) {
            switch field.reload {
            case .live: live.append(field.key)
            case .restart: restart.append(field.key)
            }
        }
        return (live, restart)
    }

    /// Sets `key` in `config` back to its value in `from` (a reload keeps restart-only values).
    public static func keep(_ key: String, from: Config, in config: inout Config) {
        ConfigSchema.byKey[key]?.copy(from, &config)
    }

    /// The keys a reload cannot apply.
    public static var restartKeys: [String] { ConfigSchema.fields.filter { $0.reload == .restart }.map(\.key) }
}
