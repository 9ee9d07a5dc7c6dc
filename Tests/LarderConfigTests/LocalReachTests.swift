import Testing
@testable import LarderConfig

/// Where `larder healthcheck` connects to reach an admin endpoint bound on this machine.
@Suite struct LocalReachTests {
    @Test("wildcards and localhost are reached on loopback; other addresses as they are", arguments: [
        ("0.0.0.0", "127.0.0.1"), ("::", "::1"), ("[::]", "::1"), ("localhost", "127.0.0.1"), ("LOCALHOST", "127.0.0.1"),
        ("127.0.0.1", "127.0.0.1"), ("127.0.0.2", "127.0.0.2"), ("::1", "::1"), ("[::1]", "::1"),
        ("10.1.2.3", "10.1.2.3"), ("fd00::5", "fd00::5"),
    ])
    func reachedLocally(_ bound: String, _ reached: String) {
        let endpoint = Endpoint(host: bound, port: 9090).reachedLocally
        #expect(endpoint == Endpoint(host: reached, port: 9090))
    }
}
