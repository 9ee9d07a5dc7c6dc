import HTTPWire

/// Whether a request may reach the network, decided before anything is sent upstream.
///
/// Offline (`cache.offline`) is absolute: a read the cache can answer is answered from it (fresh or
/// stale, as returnCacheDataDontLoad does, whatever policy the request or a rule names) or gets a
/// 504; anything the cache never answers — a tunnel, a WebSocket upgrade, an unsafe method, OPTIONS,
/// TRACE, a request with a body — is refused with 503.
public enum NetworkAccess: Sendable, Equatable {
    /// Online: routed as usual.
    case allowed
    /// Offline: only the cache may answer; whatever it cannot answer is a 504.
    case cacheOnly
    /// Offline and nothing stored can answer it.
    case refused(status: Int, reason: String)

    /// - Parameters:
    ///   - hasBody: a request body follows the head (the cache never answers such a request).
    ///   - upgrade: a WebSocket upgrade, which would become a tunnel.
    ///   - intercepted: a CONNECT that `tls.intercept` terminates here: no tunnel is opened, and the
    ///     requests inside are routed (and judged) one by one.
    public static func decide(offline: Bool, method: HTTPMethod, hasBody: Bool, upgrade: Bool,
                              intercepted: Bool = false) -> NetworkAccess {
        guard offline else { return .allowed }
        switch method {
        case .connect:
            return intercepted ? .cacheOnly : .refused(status: 503, reason: offlineReason("CONNECT tunnels are not opened"))
        case .get, .head:
            if upgrade { return .refused(status: 503, reason: offlineReason("upgrades are not forwarded")) }
            if hasBody {
                return .refused(status: 503, reason: offlineReason("a request with a body is never answered from the cache"))
            }
            return .cacheOnly
        case .options, .trace, .post, .put, .delete, .patch, .other:
            return .refused(status: 503, reason: offlineReason("\(name(method)) are not forwarded"))
        }
    }

    /// The 504 of a read the cache could not answer while offline.
    public static let notCachedReason = offlineReason("this response is not in the cache (or may not be served from it)")

    private static func offlineReason(_ what: String) -> String {
        "Larder is offline (cache.offline): nothing is sent to origins; " + what
    }

    private static func name(_ method: HTTPMethod) -> String {
        switch method {
        case .get: return "GET requests"
        case .head: return "HEAD requests"
        case .post: return "POST requests"
        case .put: return "PUT requests"
        case .delete: return "DELETE requests"
        case .patch: return "PATCH requests"
        case .options: return "OPTIONS requests"
        case .trace: return "TRACE requests"
        case .connect: return "CONNECT requests"
        case .other: return "requests with other methods"
        }
    }
}
