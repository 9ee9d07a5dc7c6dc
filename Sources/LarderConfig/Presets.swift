import Yams

/// Shipped rule sets for package registries, named in `cache.presets`: ordinary cache rules (the
/// syntax of `cache.rules`) written in `Config/presets/NAME.yaml` and embedded in the binary
/// (`PresetFiles`), so Larder needs no file beside it to use them.
public enum Presets {
    public struct Preset: Sendable, Equatable {
        public let name: String
        /// One line, for `larder presets`.
        public let description: String
        public let rules: [CacheRuleConfig]
        /// The file as shipped, for `larder presets show NAME`.
        public let text: String
    }

    /// Every shipped preset, in the order `larder presets` lists them.
    public static let all: [Preset] = PresetFiles.all.map { file in
        do throws(ValueError) {
            return try parse(name: file.name, text: file.text)
        } catch {
            // The embedded files are checked by the unit tests; a bad one is a build mistake.
            fatalError("preset \(file.name): \(error.message)")
        }
    }

    public static let names: [String] = PresetFiles.all.map(\.name)

    public static func named(_ name: String) -> Preset? { all.first { $0.name == name } }

    /// A preset file: `description` (one line) and `rules` (as `cache.rules`).
    public static func parse(name: String, text: String) throws(ValueError) -> Preset {
        let root: Node?
        do { root = try Yams.compose(yaml: text) } catch { throw ValueError("not YAML: \(error)") }
        guard case .mapping(let top)? = root else { throw ValueError("expected a mapping of description and rules") }
        var description: String?
        var rules: [CacheRuleConfig]?
        for (k, v) in top {
            switch try ConfigSchema.scalar(k) {
            case "description": description = try ConfigSchema.nonEmpty(v)
            case "rules": rules = try ConfigSchema.cacheRules(v)
            case let other: throw ValueError("unknown key \"\(other)\" (known: description, rules)")
            }
        }
        guard var rules, let description, !rules.isEmpty else { throw ValueError("needs a description and rules") }
        for i in rules.indices { rules[i].fromPreset = true }
        return Preset(name: name, description: description, rules: rules, text: text)
    }
}

extension Config.Cache {
    /// The rules that apply: the user's own first (they win), then each preset's, in the order listed.
    public var effectiveRules: [CacheRuleConfig] {
        rules + presets.flatMap { Presets.named($0)?.rules ?? [] }
    }
}

/// Where a rule in force is written: `cache.rules`, or a preset's file (`larder presets show NAME`).
public struct RuleSource: Sendable, Equatable {
    /// The preset's name; nil for the user's own `cache.rules`.
    public var preset: String?
    /// The rule's place in its list, from 0.
    public var index: Int

    public init(preset: String?, index: Int) {
        self.preset = preset
        self.index = index
    }
}

extension CacheRuleConfig {
    /// The rule as the configuration file writes it, e.g. `{path: "**/packages/**.whl", status: [200], freshness: {forced: 365d}}`.
    public var written: String { ConfigText.rule(self) }
}
