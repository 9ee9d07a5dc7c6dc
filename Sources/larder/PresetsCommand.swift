import ArgumentParser
import LarderConfig

/// `larder presets [list]` names the shipped rule sets for package registries; `larder presets
/// show NAME` prints one as shipped (the rules `cache.presets: [NAME]` adds after `cache.rules`).
struct PresetsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presets",
        abstract: "List the cache presets for package registries, or show one's rules.",
        subcommands: [List.self, Show.self],
        defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "Print each preset's name and what it is for.")

        func run() {
            let width = Presets.names.map(\.count).max() ?? 0
            for preset in Presets.all {
                print(preset.name + String(repeating: " ", count: width - preset.name.count + 2) + preset.description)
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Print a preset's rules, in the syntax of cache.rules.")

        @Argument(help: "The preset's name (larder presets lists them).")
        var name: String

        func run() throws {
            guard let preset = Presets.named(name) else {
                throw ValidationError("unknown preset \"\(name)\" (known: \(Presets.names.joined(separator: ", ")))")
            }
            print(preset.text, terminator: "")
        }
    }
}
