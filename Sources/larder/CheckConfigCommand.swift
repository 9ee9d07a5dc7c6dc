import ArgumentParser
import Glibc
import LarderConfig

/// Validates a configuration file and prints every problem with its line; exit 1 when there are any.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check-config",
                                                    abstract: "Validate a configuration file.")

    @Option(name: .long, help: "The configuration file to check. Default: $LARDER_CONFIG.")
    var config: String?

    func run() throws {
        let env = ProcessEnvironment.variables()
        guard let file = config ?? env["LARDER_CONFIG"] else {
            printToStandardError("larder check-config: give --config PATH (or set LARDER_CONFIG)")
            throw ExitCode(2)
        }
        do {
            _ = try ConfigLoader.resolve(file: file, environment: env, commandLine: [])
        } catch {
            print(error.description)
            throw ExitCode(1)
        }
        print("\(file): OK")
    }
}
