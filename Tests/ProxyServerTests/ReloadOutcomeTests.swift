import Testing
import LarderConfig
@testable import ProxyServer

/// What a reload answers and logs: never "applied" for a change that is not in force.
@Suite struct ReloadOutcomeTests {
    static let certificate = ReloadFailure(keys: ["tls.certificate_file", "tls.key_file"],
                                           reason: "TLS certificate not reloaded, the old one stays in use: bad PEM")

    static let rows: [(outcome: ReloadOutcome, status: String, summary: String)] = [
        (.applied(live: [], restart: [], failed: []), "unchanged", "configuration reloaded: nothing changed"),
        (.applied(live: ["via_name"], restart: [], failed: []), "applied", "configuration reloaded: applied via_name"),
        (.applied(live: ["via_name", "cache.offline"], restart: ["workers"], failed: []), "partly applied",
         "configuration partly applied: applied via_name, cache.offline; needs a restart to change: workers"),
        (.applied(live: [], restart: ["workers", "listen"], failed: []), "not applied",
         "configuration not applied: needs a restart to change: workers, listen"),
        (.applied(live: ["via_name"], restart: [], failed: [certificate]), "partly applied",
         "configuration partly applied: applied via_name; TLS certificate not reloaded, the old one stays in use: bad PEM"),
        (.applied(live: [], restart: [], failed: [certificate]), "not applied",
         "configuration not applied: TLS certificate not reloaded, the old one stays in use: bad PEM"),
        (.rejected("cache.offlline: unknown key"), "rejected",
         "configuration reload rejected, the old configuration stays in force: cache.offlline: unknown key"),
    ]

    @Test(arguments: rows.indices) func statusAndLogLine(_ i: Int) {
        let row = Self.rows[i]
        #expect(row.outcome.status == row.status)
        #expect(row.outcome.summary == row.summary)
        #expect(row.outcome.json.contains("\"status\":\"\(row.status)\""))
        #expect(row.outcome.leavesSomethingOut == ["partly applied", "not applied", "rejected"].contains(row.status))
    }

    @Test func jsonListsWhatWasAndWasNotApplied() {
        let outcome = ReloadOutcome.applied(live: ["via_name"], restart: ["workers"], failed: [Self.certificate])
        #expect(outcome.json == "{\"status\":\"partly applied\",\"applied\":[\"via_name\"],\"needs_restart\":[\"workers\"],"
                + "\"failed\":[{\"keys\":[\"tls.certificate_file\",\"tls.key_file\"],\"error\":"
                + "\"TLS certificate not reloaded, the old one stays in use: bad PEM\"}]}")
    }
}
