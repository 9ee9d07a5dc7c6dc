import LarderConfig
import Statistics

/// What a configuration reload did: applied the keys that can change in a running proxy (listing
/// those that wait for a restart), or rejected the new configuration and kept the old one.
public enum ReloadOutcome: Sendable, Equatable {
    case applied(live: [String], restart: [String])
    case rejected(String)

    var isRejected: Bool { if case .rejected = self { true } else { false } }

    /// One line for the log.
    public var summary: String {
        switch self {
        case .applied(let live, let restart):
            if live.isEmpty && restart.isEmpty { return "configuration reloaded: nothing changed" }
            var s = "configuration reloaded: "
            s += live.isEmpty ? "nothing applied" : "applied " + live.joined(separator: ", ")
            if !restart.isEmpty { s += "; needs a restart to change: " + restart.joined(separator: ", ") }
            return s
        case .rejected(let why):
            return "configuration reload rejected, the old configuration stays in force: \(why)"
        }
    }

    var json: String {
        switch self {
        case .applied(let live, let restart):
            let status = live.isEmpty && restart.isEmpty ? "unchanged" : "applied"
            return "{\"status\":\"\(status)\",\"applied\":[" + live.map(jsonString).joined(separator: ",")
                + "],\"needs_restart\":[" + restart.map(jsonString).joined(separator: ",") + "]}"
        case .rejected(let why):
            return "{\"status\":\"rejected\",\"error\":\(jsonString(why))}"
        }
    }
}
