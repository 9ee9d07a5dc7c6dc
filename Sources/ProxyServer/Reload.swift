import LarderConfig
import Statistics

/// What a configuration reload did: applied the keys that can change in a running proxy (listing
/// those that wait for a restart, and those whose change failed and kept their old values), or
/// rejected the new configuration and kept the old one.
public enum ReloadOutcome: Sendable, Equatable {
    case applied(live: [String], restart: [String], failed: [ReloadFailure])
    case rejected(String)

    var isRejected: Bool { if case .rejected = self { true } else { false } }

    /// Nothing changed; all of a change took effect; some of it did; none of it did (every changed
    /// key needs a restart or failed); the new configuration was refused. Never `applied` for a
    /// change that is not in force.
    public var status: String {
        switch self {
        case .applied(let live, let restart, let failed):
            if restart.isEmpty && failed.isEmpty { return live.isEmpty ? "unchanged" : "applied" }
            return live.isEmpty ? "not applied" : "partly applied"
        case .rejected:
            return "rejected"
        }
    }

    /// Whether something the new configuration asks for is not in force.
    var leavesSomethingOut: Bool { status == "partly applied" || status == "not applied" || isRejected }

    /// One line for the log.
    public var summary: String {
        switch self {
        case .applied(let live, let restart, let failed):
            if status == "unchanged" { return "configuration reloaded: nothing changed" }
            let lead = status == "applied" ? "configuration reloaded" : "configuration \(status)"
            var parts: [String] = []
            if !live.isEmpty { parts.append("applied " + live.joined(separator: ", ")) }
            if !restart.isEmpty { parts.append("needs a restart to change: " + restart.joined(separator: ", ")) }
            parts += failed.map(\.reason)
            return lead + ": " + parts.joined(separator: "; ")
        case .rejected(let why):
            return "configuration reload rejected, the old configuration stays in force: \(why)"
        }
    }

    var json: String {
        switch self {
        case .applied(let live, let restart, let failed):
            let failures = failed.map { f in
                "{\"keys\":[" + f.keys.map(jsonString).joined(separator: ",") + "],\"error\":" + jsonString(f.reason) + "}"
            }
            return "{\"status\":\(jsonString(status)),\"applied\":[" + live.map(jsonString).joined(separator: ",")
                + "],\"needs_restart\":[" + restart.map(jsonString).joined(separator: ",")
                + "],\"failed\":[" + failures.joined(separator: ",") + "]}"
        case .rejected(let why):
            return "{\"status\":\"rejected\",\"error\":\(jsonString(why))}"
        }
    }
}

/// What a reload could not put in force although the configuration was valid (certificate files
/// that do not load): the keys concerned, which keep their old values, and what happened instead.
public struct ReloadFailure: Sendable, Equatable {
    public var keys: [String]
    /// A whole sentence for the log and the answer.
    public var reason: String
}
