import ArgumentParser
import LarderConfig

/// `--config` alone: the file, else `$LARDER_CONFIG`, under the environment's `LARDER_…` settings.
/// For the commands that read the configuration but set nothing in it from their own flags.
struct ConfigFileOption: ParsableArguments {
    @Option(name: .long, help: "Configuration file (YAML). Default: $LARDER_CONFIG, else the built-in defaults.")
    var config: String?

    /// The file named by `--config`, else by `LARDER_CONFIG`; nil for the built-in defaults.
    func path(in environment: [String: String]) -> String? {
        config ?? environment["LARDER_CONFIG"]
    }

    /// Defaults, then the file, then `LARDER_…` variables, then `commandLine`, checked as a whole.
    func resolve(commandLine: [ConfigLoader.Setting] = []) throws(ConfigErrors) -> Config {
        let env = ProcessEnvironment.variables()
        return try ConfigLoader.resolve(file: path(in: env), environment: env, commandLine: commandLine)
    }
}
