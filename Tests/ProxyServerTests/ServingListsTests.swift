import Testing
import LarderConfig
@testable import ProxyServer

/// The named lists in force, as the start log, `/stats` and the dashboard name them.
@Suite struct ServingListsTests {
    @Test func presetsInForce() throws {
        var config = Config()
        #expect(ServingLists(config).jsonMembers == "\"presets\":[]")
        #expect(ServingLists(config).logLine == "cache presets in force: none")
        config.cache.presets = ["debian", "pypi"]
        #expect(ServingLists(config).jsonMembers == "\"presets\":[\"debian\",\"pypi\"]")
        #expect(ServingLists(config).logLine == "cache presets in force: debian, pypi")
    }
}
