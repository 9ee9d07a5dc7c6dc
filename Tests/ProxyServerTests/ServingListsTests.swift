import Testing
import LarderConfig
@testable import ProxyServer

/// The named lists in force, as the start log, `/stats` and the dashboard name them.
@Suite struct ServingListsTests {
    @Test func presetsInForce() throws {
        var config = Config()
        #expect(ServingLists(config).jsonMembers == "\"presets\":[],\"mirrors\":[]")
        #expect(ServingLists(config).logLine == "cache presets in force: none")
        config.cache.presets = ["debian", "pypi"]
        #expect(ServingLists(config).jsonMembers == "\"presets\":[\"debian\",\"pypi\"],\"mirrors\":[]")
        #expect(ServingLists(config).logLine == "cache presets in force: debian, pypi")
    }
}

@Suite struct ServingListsMirrorTests {
    @Test func mirrorsAndThePresetsTheyTurnOn() throws {
        var config = Config()
        config.cache.presets = ["debian"]
        let tools = MirrorConfig(name: "tools", kind: .npm, path: "/tools/",
                                 upstream: MirrorUpstream(scheme: .https, host: "10.0.0.1", port: 8443, path: "/t/"),
                                 minReleaseAge: 86_400)
        config.mirrors = [try #require(MirrorConfig.builtIn(.pypi)), tools]
        let lists = ServingLists(config)
        #expect(lists.presets == ["debian", "pypi", "npm"])
        let line: String = "cache presets in force: debian, pypi, npm; mirrors: pypi /pypi/ → https://pypi.org/ "
            + "(files/ → https://files.pythonhosted.org/); tools /tools/ → https://10.0.0.1:8443/t/, min_release_age 86400s"
        #expect(lists.logLine == line)
        let pypi: String = "{\"name\":\"pypi\",\"kind\":\"pypi\",\"path\":\"/pypi/\",\"upstream\":\"https://pypi.org/\","
            + "\"also\":{\"files/\":\"https://files.pythonhosted.org/\"},\"min_release_age\":null}"
        let npm: String = "{\"name\":\"tools\",\"kind\":\"npm\",\"path\":\"/tools/\",\"upstream\":\"https://10.0.0.1:8443/t/\","
            + "\"also\":{},\"min_release_age\":86400}"
        let json: String = "\"presets\":[\"debian\",\"pypi\",\"npm\"],\"mirrors\":[" + pypi + "," + npm + "]"
        #expect(lists.jsonMembers == json)
    }
}
