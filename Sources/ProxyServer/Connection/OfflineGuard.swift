import CachePolicy
import HTTPWire
import Statistics

/// `cache.offline` on a client's request: `NetworkAccess` decides before anything is sent
/// upstream; this answers the refusals. Online it costs one flag read (it runs on every hit).
enum OfflineGuard {
    /// False when the request was refused (and answered) because Larder is offline.
    static func admits(_ request: RequestHead, intercepted: Bool = false, on c: ClientConnection) -> Bool {
        // Read in place: a copy of the settings would cost a reference count per field.
        guard c.worker.settings.cache.policy.offline else { return true }
        let access = NetworkAccess.decide(offline: true, method: request.method, hasBody: c.context.bodyPending,
                                          upgrade: request.upgradesToWebSocket, intercepted: intercepted)
        guard case .refused(let status, let reason) = access else { return true }
        refuse(status, reason, on: c)
        return false
    }

    /// Offline, a read the cache did not answer after all (a damaged entry, several ranges): true
    /// when refused with 504.
    static func refusesUncached(on c: ClientConnection) -> Bool {
        guard c.worker.settings.cache.policy.offline else { return false }
        refuse(504, NetworkAccess.notCachedReason, on: c)
        return true
    }

    /// Counted and answered; logged at debug level only, since while offline refusals are routine.
    private static func refuse(_ status: Int, _ reason: String, on c: ClientConnection) {
        c.worker.stats.add(.offlineRefusals)
        c.worker.logger.debug("\(status) to \(c.peer): \(reason)")
        c.context.cache = nil
        c.respond(status, reason, cacheStatus: CacheStatus(detail: "offline")
            .serialized(cacheName: c.worker.settings.cache.cacheName))
    }
}
