import ArgumentParser

/// `larder [run] [--config PATH] …` serves; `larder check-config --config PATH` validates.
struct LarderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "larder",
        abstract: "A caching forward HTTP proxy.",
        version: VersionCommand.line,
        subcommands: [RunCommand.self, CheckConfigCommand.self, ConfigKeysCommand.self, MetricsCommand.self, WarmCommand.self,
                      HealthcheckCommand.self, PasswdCommand.self, CACommand.self, PresetsCommand.self, VersionCommand.self],
        defaultSubcommand: RunCommand.self)
}
