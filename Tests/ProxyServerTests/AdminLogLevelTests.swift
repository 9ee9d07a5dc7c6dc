import HTTPWire
import Testing
@testable import ProxyServer

/// Answered polling of the admin endpoint is debug; changes, refusals and failures stay visible.
@Suite struct AdminLogLevelTests {
    @Test(arguments: [
        (HTTPMethod.get, "/healthz", 200, "debug"), (.head, "/healthz", 200, "debug"),
        (.get, "/readyz", 200, "debug"), (.get, "/readyz", 503, "debug"),
        (.get, "/stats", 200, "debug"), (.get, "/metrics", 200, "debug"), (.get, "/", 200, "debug"),
        (.get, "/stats/history", 200, "debug"), (.get, "/warm", 200, "debug"), (.get, "/cache", 404, "info"),
        (.get, "/metrics", 401, "info"), (.get, "/nope", 404, "info"), (.post, "/stats", 405, "info"),
        (.post, "/config/reload", 200, "info"), (.post, "/config/reload", 422, "info"),
        (.delete, "/cache", 200, "info"), (.delete, "/warm", 200, "info"),
        (.get, "/stats", 500, "error"), (.post, "/config/reload", 500, "error"), (.head, "/readyz", 503, "debug"),
    ])
    func level(_ method: HTTPMethod, _ path: String, _ status: Int, _ expected: String) {
        // Compared by name: the test target does not import swift-log.
        #expect(AdminLogLevel.of(method: method, path: path, status: status).rawValue == expected)
    }
}
