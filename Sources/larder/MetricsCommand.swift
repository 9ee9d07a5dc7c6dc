import ArgumentParser
import Statistics

/// `larder metrics`: what each statistic means, from the same table the admin endpoint uses.
struct MetricsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print the statistics Larder reports (/stats keys, /metrics names) as a Markdown table.")

    func run() {
        print(Metrics.markdown(), terminator: "")
    }
}
