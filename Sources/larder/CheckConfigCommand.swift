import ArgumentParser
import Glibc
import LarderConfig

/// Validates a configuration file and prints every problem with its line; exit 1 when there are any.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check-config",
                                                    abstract: "Validate a configuration file.")

    @Option(name: .long, help: "The configuration file to check.")
    var config: String

    func run() throws {
        do {
            _ = try ConfigLoader.resolve(file: config, environment: ProcessEnvironment.variables(), commandLine: [])
        } catch {
            print(error.description)
            throw ExitCode(1)
        }
        print("\(config): OK")
    }
}
