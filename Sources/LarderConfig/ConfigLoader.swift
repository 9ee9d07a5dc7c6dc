import Glibc
import Yams

/// Reads a configuration: YAML text on top of the built-in defaults, then `LARDER_…` environment
/// variables on top of that. Collects every problem before failing.
public enum ConfigLoader {
    /// Parses `yaml` (named `fileName` in messages) over the defaults.
    public static func load(yaml: String, fileName: String = "config") throws(ConfigErrors) -> Config {
        var config = Config()
        var problems: [ConfigProblem] = []
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch let error as YamlError {
            throw ConfigErrors(syntaxProblems(error, yaml: yaml, fileName: fileName))
        } catch {
            throw ConfigErrors([ConfigProblem(source: fileName, key: "", line: nil, message: "\(error)")])
        }
        guard let root, root.null == nil else { return config }  // an empty file means all defaults
        guard case .mapping(let top) = root else {
            throw ConfigErrors([ConfigProblem(source: fileName, key: "", line: root.mark?.line,
                                              message: "expected a mapping of keys to values at the top level")])
        }
        walk(top, prefix: "", into: &config, problems: &problems, fileName: fileName)
        for (key, message) in ConfigSchema.crossChecks(config) {
            problems.append(ConfigProblem(source: fileName, key: key, line: nil, message: message))
        }
        guard problems.isEmpty else { throw ConfigErrors(problems) }
        return config
    }

    /// Reads and parses the file at `path`.
    public static func load(path: String) throws(ConfigErrors) -> Config {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let text = readFile(path) else {
            let reason = String(cString: strerror(errno))
            throw ConfigErrors([ConfigProblem(source: path, key: "", line: nil, message: "cannot read: \(reason)")])
        }
        return try load(yaml: text, fileName: name)
    }

    /// Applies `LARDER_<KEY>` variables (dots become underscores: `LARDER_SESSION_CONNECT_TIMEOUT`).
    /// Values use the file's syntax; lists may also be written comma-separated.
    public static func applyEnvironment(_ environment: [String: String], to config: inout Config) throws(ConfigErrors) {
        var settings: [Setting] = []
        for field in ConfigSchema.fields {
            if let text = environment[field.environmentName] {
                settings.append(Setting(name: field.environmentName, key: field.key, value: text))
            }
        }
        var problems = apply(settings, source: "environment", to: &config)
        let known = Set(ConfigSchema.fields.map(\.environmentName)).union(["LARDER_CONFIG"])
        for name in environment.keys.sorted() where name.hasPrefix("LARDER_") && !known.contains(name) {
            let hint = suggestion(for: name, among: Array(known)).map { "; did you mean \($0)?" } ?? ""
            problems.append(ConfigProblem(source: "environment", key: name, line: nil,
                                          message: "unknown setting\(hint)"))
        }
        for (key, message) in ConfigSchema.crossChecks(config) {
            problems.append(ConfigProblem(source: "environment", key: key, line: nil, message: message))
        }
        guard problems.isEmpty else { throw ConfigErrors(problems) }
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
        let problems = apply(settings, source: "command line", to: &config)
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

    private static func walk(_ mapping: Node.Mapping, prefix: String, into config: inout Config,
                             problems: inout [ConfigProblem], fileName: String) {
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
                    walk(inner, prefix: key + ".", into: &config, problems: &problems, fileName: fileName)
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
            do {
                try field.apply(&config, value)
            } catch {
                problems.append(ConfigProblem(source: fileName, key: key, line: value.mark?.line ?? line,
                                              message: error.message))
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
