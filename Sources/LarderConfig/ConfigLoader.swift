import Glibc
import Yams

/// Reads a configuration in layers, lowest first: the built-in defaults, a YAML file, `LARDER_…`
/// environment variables, command-line flags. Collects every problem before failing.
///
/// Checks between keys (`ConfigSchema.crossChecks`, such as "an admin endpoint off loopback needs a
/// token") run on whatever a caller ends up with, whichever layers it used: `resolve` checks the
/// merged result once, and each single-layer entry point checks its own result, so no source of
/// configuration can skip them.
public enum ConfigLoader {
    /// Parses `yaml` (named `fileName` in messages) over the defaults, and checks the result.
    public static func load(yaml: String, fileName: String = "config") throws(ConfigErrors) -> Config {
        let config = try parse(yaml: yaml, fileName: fileName)
        try check(config, source: fileName)
        return config
    }

    /// Reads and parses the file at `path`, and checks the result.
    public static func load(path: String) throws(ConfigErrors) -> Config {
        let config = try parse(path: path)
        try check(config, source: fileName(path))
        return config
    }

    /// The whole configuration: `file` (if any) over the defaults, then `environment`, then
    /// `commandLine`. Each layer's values must parse; the checks between keys run on the merged
    /// result, so a key from one layer may satisfy a check about another (a file's
    /// `admin_listen: 0.0.0.0:9090` with the token in `LARDER_ADMIN_TOKEN`). A failed check names
    /// the layer that set the key last.
    public static func resolve(file path: String?, environment: [String: String],
                               commandLine: [Setting]) throws(ConfigErrors) -> Config {
        var config = try path.map { p throws(ConfigErrors) in try parse(path: p) } ?? Config()
        try throwIfAny(environmentProblems(environment, applyingTo: &config))
        try throwIfAny(apply(commandLine, source: "command line", to: &config))
        try throwIfAny(ConfigSchema.crossChecks(config).map { check in
            let (source, name) = lastLayer(setting: check.key, file: path, environment: environment,
                                           commandLine: commandLine)
            return ConfigProblem(source: source, key: name, line: nil, message: check.message)
        })
        return config
    }

    /// Runs the checks between keys on `config`; problems are reported under `source`.
    public static func check(_ config: Config, source: String) throws(ConfigErrors) {
        try throwIfAny(ConfigSchema.crossChecks(config).map {
            ConfigProblem(source: source, key: $0.key, line: nil, message: $0.message)
        })
    }

    /// Applies `LARDER_<KEY>` variables (dots become underscores: `LARDER_SESSION_CONNECT_TIMEOUT`)
    /// and checks the result. Values use the file's syntax; lists may also be written comma-separated.
    public static func applyEnvironment(_ environment: [String: String], to config: inout Config) throws(ConfigErrors) {
        try throwIfAny(environmentProblems(environment, applyingTo: &config))
        try check(config, source: "environment")
    }

    /// One setting given as text outside the file: `name` is how the user wrote it (a flag or a
    /// variable), `key` the configuration key it sets.
    public struct Setting: Sendable, Equatable {
        public var name: String
        public var key: String
        public var value: String
        public init(name: String, key: String, value: String) { self.name = name; self.key = key; self.value = value }
    }

    /// Applies command-line settings with the same parsing and checks as the file.
    public static func applyCommandLine(_ settings: [Setting], to config: inout Config) throws(ConfigErrors) {
        try throwIfAny(apply(settings, source: "command line", to: &config))
        try check(config, source: "command line")
    }

    // MARK: layers without the checks between keys

    /// The file's values over the defaults; syntax and per-key problems only.
    static func parse(yaml: String, fileName: String) throws(ConfigErrors) -> Config {
        var config = Config()
        guard let top = try document(yaml: yaml, fileName: fileName) else { return config }
        var problems: [ConfigProblem] = []
        walk(top, prefix: "", problems: &problems, fileName: fileName) { field, value in
            do throws(ValueError) {
                try field.apply(&config, value)
                return nil
            } catch {
                return error.message
            }
        }
        try throwIfAny(problems)
        return config
    }

    /// Every key a document sets, with the value it gives (the checks of the shipped file use it).
    static func settings(yaml: String, fileName: String) throws(ConfigErrors) -> [(field: ConfigField, value: Node)] {
        guard let top = try document(yaml: yaml, fileName: fileName) else { return [] }
        var problems: [ConfigProblem] = []
        var settings: [(field: ConfigField, value: Node)] = []
        walk(top, prefix: "", problems: &problems, fileName: fileName) { field, value in
            settings.append((field, value))
            return nil
        }
        try throwIfAny(problems)
        return settings
    }

    /// The document's top-level mapping; nil for an empty document (all defaults).
    private static func document(yaml: String, fileName: String) throws(ConfigErrors) -> Node.Mapping? {
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigErrors(syntaxProblems(error, yaml: yaml, fileName: fileName))
        } catch {
            throw ConfigErrors([ConfigProblem(source: fileName, key: "", line: nil, message: "\(error)")])
        }
        guard let root, root.null == nil else { return nil }
        guard case .mapping(let top) = root else {
            throw ConfigErrors([ConfigProblem(source: fileName, key: "", line: root.mark?.line,
                                              message: "expected a mapping of keys to values at the top level")])
        }
        return top
    }

    private static func parse(path: String) throws(ConfigErrors) -> Config {
        guard let text = readFile(path) else {
            let reason = String(cString: strerror(errno))
            throw ConfigErrors([ConfigProblem(source: path, key: "", line: nil, message: "cannot read: \(reason)")])
        }
        return try parse(yaml: text, fileName: fileName(path))
    }

    private static func fileName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    private static func environmentProblems(_ environment: [String: String],
                                            applyingTo config: inout Config) -> [ConfigProblem] {
        var settings: [Setting] = []
        for field in ConfigSchema.fields {
            if let text = environment[field.environmentName] {
                settings.append(Setting(name: field.environmentName, key: field.key, value: text))
            }
        }
        return apply(settings, source: "environment", to: &config)
    }

    /// `LARDER_…` variables that set nothing: one warning each (with a suggestion when a setting is
    /// spelled nearly so), never a reason not to start — a Kubernetes Service named `larder` puts
    /// `LARDER_PORT=tcp://…` and its kin into every pod, and those are ignored silently.
    public static func environmentWarnings(_ environment: [String: String]) -> [String] {
        // Not settings: the configuration file, and the test hooks (a crash, how tunnels relay).
        let known = Set(ConfigSchema.fields.map(\.environmentName))
            .union(["LARDER_CONFIG", "LARDER_TEST_CRASH", "LARDER_TEST_TUNNEL_SPLICE", "LARDER_TEST_CLOCK_FILE"])
        var warnings: [String] = []
        for name in environment.keys.sorted()
        where name.hasPrefix("LARDER_") && !known.contains(name) && !isServiceLink(name) {
            let hint = suggestion(for: name, among: Array(known)).map { "; did you mean \($0)?" } ?? ""
            warnings.append("environment: \(name): unknown setting, ignored\(hint)")
        }
        return warnings
    }

    /// The variables Kubernetes (and Docker links) derive from a service named `larder`:
    /// `LARDER_PORT`, `LARDER_PORT_3128_TCP[_ADDR|_PORT|_PROTO]`, `LARDER_SERVICE_HOST`,
    /// `LARDER_SERVICE_PORT[_NAME]`.
    static func isServiceLink(_ name: String) -> Bool {
        let rest = name.dropFirst("LARDER_".count)
        if rest == "PORT" || rest == "SERVICE_HOST" || rest == "SERVICE_PORT" { return true }
        if rest.hasPrefix("SERVICE_PORT_") { return true }
        guard rest.hasPrefix("PORT_") else { return false }
        let parts = rest.split(separator: "_")  // PORT, number, protocol[, ADDR|PORT|PROTO]
        guard parts.count == 3 || parts.count == 4, parts[1].allSatisfy(\.isNumber),
              ["TCP", "UDP", "SCTP"].contains(parts[2]) else { return false }
        return parts.count == 3 || ["ADDR", "PORT", "PROTO"].contains(parts[3])
    }

    /// Where `key` was set last, spelled the way that layer spells it: (source, name).
    private static func lastLayer(setting key: String, file: String?, environment: [String: String],
                                  commandLine: [Setting]) -> (String, String) {
        if let flag = commandLine.last(where: { $0.key == key }) { return ("command line", flag.name) }
        if let field = ConfigSchema.byKey[key], environment[field.environmentName] != nil {
            return ("environment", field.environmentName)
        }
        return (file.map(fileName) ?? "defaults", key)
    }

    private static func throwIfAny(_ problems: [ConfigProblem]) throws(ConfigErrors) {
        guard problems.isEmpty else { throw ConfigErrors(problems) }
    }

    /// Runs each setting through its key's parser; problems are reported under the setting's name.
    private static func apply(_ settings: [Setting], source: String, to config: inout Config) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        for setting in settings {
            guard let field = ConfigSchema.byKey[setting.key] else {
                problems.append(ConfigProblem(source: source, key: setting.name, line: nil, message: "unknown setting"))
                continue
            }
            // Flow lists and mappings (`[a, b]`, `{X-A: b}`) use YAML; anything else is taken verbatim.
            let t = setting.value.trimmingSpaces()
            let isFlow = (t.hasPrefix("[") && t.hasSuffix("]")) || (t.hasPrefix("{") && t.hasSuffix("}"))
            let node = isFlow ? ((try? Yams.compose(yaml: setting.value)).flatMap { $0 } ?? Node(setting.value))
                : Node(setting.value)
            do {
                try field.apply(&config, node)
            } catch {
                problems.append(ConfigProblem(source: source, key: setting.name, line: nil, message: error.message))
            }
        }
        return problems
    }

    // MARK: walking the document

    /// Visits each known key's value in document order; `visit` returns what is wrong with it, if anything.
    private static func walk(_ mapping: Node.Mapping, prefix: String, problems: inout [ConfigProblem], fileName: String,
                             visit: (ConfigField, Node) -> String?) {
        var seen: Set<String> = []
        for (keyNode, value) in mapping {
            let line = keyNode.mark?.line
            guard case .scalar(let k) = keyNode else {
                problems.append(ConfigProblem(source: fileName, key: prefix, line: line,
                                              message: "keys must be plain names"))
                continue
            }
            let key = prefix + k.string
            guard seen.insert(key).inserted else {
                problems.append(ConfigProblem(source: fileName, key: key, line: line, message: "appears twice"))
                continue
            }
            if ConfigSchema.sections.contains(key) {
                if case .mapping(let inner) = value {
                    walk(inner, prefix: key + ".", problems: &problems, fileName: fileName, visit: visit)
                } else if value.null == nil {
                    problems.append(ConfigProblem(source: fileName, key: key, line: line,
                                                  message: "expected a section of keys, got \(ConfigSchema.describe(value))"))
                }
                continue
            }
            guard let field = ConfigSchema.byKey[key] else {
                let candidates = ConfigSchema.fields.map(\.key) + Array(ConfigSchema.sections)
                let hint = suggestion(for: key, among: candidates).map { "; did you mean \($0)?" } ?? ""
                problems.append(ConfigProblem(source: fileName, key: key, line: line, message: "unknown key\(hint)"))
                continue
            }
            if let message = visit(field, value) {
                problems.append(ConfigProblem(source: fileName, key: key, line: value.mark?.line ?? line, message: message))
            }
        }
    }

    private static func syntaxProblems(_ error: YamlError, yaml: String, fileName: String) -> [ConfigProblem] {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
             .composer(_, let problem, let mark, _):
            return [ConfigProblem(source: fileName, key: "", line: mark.line, message: "YAML syntax: \(problem)")]
        case .duplicatedKeysInMapping(let duplicates, let context):
            // Yams marks the mapping; point at the repeated key's own line instead.
            let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false)
            return duplicates.sorted().map { key in
                let repeats = lines.indices.filter { i in
                    i + 1 >= context.mark.line && lines[i].trimmingSpaces().hasPrefix(key + ":")
                }
                let line = repeats.count > 1 ? repeats[1] + 1 : context.mark.line
                return ConfigProblem(source: fileName, key: key, line: line, message: "appears twice")
            }
        default:
            return [ConfigProblem(source: fileName, key: "", line: nil, message: "YAML: \(error)")]
        }
    }

    /// The closest known name within a small edit distance, for "did you mean" hints.
    static func suggestion(for name: String, among candidates: [String]) -> String? {
        let scored = candidates.map { ($0, editDistance(name.lowercased(), $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, name.count / 4) else { return nil }
        return best.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a.utf8), y = Array(b.utf8)
        var previous = Array(0...y.count)
        for i in 1...max(x.count, 1) where !x.isEmpty {
            var current = [i] + Array(repeating: 0, count: y.count)
            for j in 1...max(y.count, 1) where !y.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1,
                                 previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return x.isEmpty ? y.count : previous[y.count]
    }

    public static func readFile(_ path: String) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n > 0 { bytes.append(contentsOf: chunk[0..<n]) }
            if n < chunk.count {
                if ferror(f) != 0 { return nil }
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
