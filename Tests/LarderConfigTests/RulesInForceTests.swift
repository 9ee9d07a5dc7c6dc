import Testing
@testable import LarderConfig

/// `Config.rulesInForce`: the rules the cache applies, each with where it is written, in the same
/// order as `effectiveRules` (the admin endpoint names a rule by its place in this list).
@Suite struct RulesInForceTests {
    @Test func eachRuleSaysWhereItIsWritten() throws {
        let config = try ConfigLoader.load(yaml: """
            mirrors: [{name: npm, upstream: "https://npm.internal.example/"}]
            cache:
              presets: [pypi]
              rules:
                - {path_prefix: /own/, freshness: {forced: 1h}}
            """)
        let inForce = config.rulesInForce
        #expect(inForce.map(\.rule) == config.effectiveRules)
        #expect(inForce[0].source == RuleSource(preset: nil, index: 0))
        let pypi = try #require(Presets.named("pypi")).rules
        let npm = try #require(Presets.named("npm")).rules
        #expect(inForce[1...pypi.count].map(\.source) == pypi.indices.map { RuleSource(preset: "pypi", index: $0) })
        #expect(inForce[1...pypi.count].map(\.rule) == pypi)
        // npm's rules bound to registry.npmjs.org are followed by copies for the mirror's host,
        // written in the same place of the same preset.
        let npmPart = inForce[(1 + pypi.count)...]
        #expect(npmPart.count > npm.count)
        for (rule, source) in npmPart {
            #expect(source.preset == "npm")
            var written = npm[source.index]
            if rule.host?.description == "npm.internal.example" { written.host = rule.host }
            #expect(rule == written)
        }
        #expect(npmPart.contains { $0.rule.host?.description == "npm.internal.example" })
    }
}
