import CachePolicy
import HTTPWire
import Statistics

/// `cache.offline` on a client's request: `NetworkAccess` decides before anything is sent
/// upstream; this answers the refusals. Online it costs one flag read (it runs on every hit).
enum OfflineGuard {
    /// `.taken` when the request was refused (and answered) because Larder is offline.
    static func check(_ request: RequestHead, intercepted: Bool = false, on c: ClientConnection) -> RouteStep {
        // Read in place: a copy of the settings would cost a reference count per field.
        guard c.worker.settings.cache.policy.offline else { return .goOn }
        let access = NetworkAccess.decide(offline: true, method: request.method, hasBody: c.context.bodyPending,
                                          upgrade: request.upgradesToWebSocket, intercepted: intercepted)
        guard case .refused(let status, let reason) = access else { return .goOn }
        refuse(status, reason, on: c)
        return .taken
    }

    /// Offline, a read the cache did not answer after all (a damaged entry, several ranges) is
    /// refused with 504.
    static func checkUncached(on c: ClientConnection) -> RouteStep {
        guard c.worker.settings.cache.policy.offline else { return .goOn }
        refuse(504, NetworkAccess.notCachedReason, on: c)
        return .taken
    }

    /// Counted and answered; logged at debug level only, since while offline refusals are routine.
    private static func refuse(_ status: Int, _ reason: String, on c: ClientConnection) {
        c.worker.stats.add(.offlineRefusals)
        c.worker.logger.debug("\(status) to \(c.peer): \(reason)")
        c.context.cache = nil
        c.answerError(status, reason, source: .offline)
    }
}
