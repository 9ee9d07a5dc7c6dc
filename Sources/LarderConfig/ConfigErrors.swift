/// One problem found in a configuration source: the key it concerns, where it is, what is wrong.
public struct ConfigProblem: Sendable, Equatable, CustomStringConvertible {
    /// Where the value came from: a file name, `environment`, or `command line`.
    public var source: String
    /// Dotted key (`session.connect_timeout`); empty when the problem is the document itself.
    public var key: String
    /// 1-based line in the file, when the source has lines.
    public var line: Int?
    public var message: String

    public init(source: String, key: String, line: Int?, message: String) {
        self.source = source
        self.key = key
        self.line = line
        self.message = message
    }

    /// `larder.yaml:12: session.connect_timeout: expected a duration such as 10s or 500ms, got "soon"`
    public var description: String {
        let place = line.map { "\(source):\($0)" } ?? source
        return key.isEmpty ? "\(place): \(message)" : "\(place): \(key): \(message)"
    }
}

/// Every problem found, so an operator fixes a file in one pass rather than one error per run.
public struct ConfigErrors: Error, Sendable, Equatable, CustomStringConvertible {
    public var problems: [ConfigProblem]

    public init(_ problems: [ConfigProblem]) { self.problems = problems }

    public var description: String { problems.map(\.description).joined(separator: "\n") }
}
