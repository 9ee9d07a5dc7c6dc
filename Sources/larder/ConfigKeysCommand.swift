import ArgumentParser
import LarderConfig

/// `larder config-keys`: every configuration key with its default, from the table the loader uses.
struct ConfigKeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config-keys",
        abstract: "Print the configuration keys (default, reload behaviour, meaning) as a Markdown table.")

    func run() {
        print(ConfigSchema.markdown(), terminator: "")
    }
}
