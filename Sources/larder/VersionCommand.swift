import ArgumentParser
import ProxyServer

/// `larder version`, the same line as `larder --version`: the one version string
/// (`LarderVersion.string`) that the admin endpoint also reports.
struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "version", abstract: "Print Larder's version.")

    static var line: String { "larder \(LarderVersion.string)" }

    func run() {
        print(Self.line)
    }
}
