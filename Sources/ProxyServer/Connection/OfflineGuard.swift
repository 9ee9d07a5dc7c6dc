import CachePolicy
import HTTPWire
import Statistics

/// `cache.offline` on a client's request: `NetworkAccess` decides before anything is sent
/// upstream; this answers the refusals.
enum OfflineGuard {
    /// The request's access to the network; a refusal has already been answered.
    static func access(_ request: RequestHead, intercepted: Bool = false, on c: ClientConnection) -> NetworkAccess {
        let access = NetworkAccess.decide(offline: c.worker.settings.offline, method: request.method,
                                          hasBody: c.context.bodyPending, upgrade: request.upgradesToWebSocket,
                                          intercepted: intercepted)
        if case .refused(let status, let reason) = access { refuse(status, reason, on: c) }
        return access
    }

    /// Counted and answered; logged at debug level only, since while offline refusals are routine.
    static func refuse(_ status: Int, _ reason: String, on c: ClientConnection) {
        c.worker.stats.add(.offlineRefusals)
        c.worker.logger.debug("\(status) to \(c.peer): \(reason)")
        c.context.cache = nil
        c.respond(status, reason, extraField: cacheStatusField)
    }

    /// Offline, a read the cache did not answer after all.
    static func refuseUncached(on c: ClientConnection) {
        refuse(504, NetworkAccess.notCachedReason, on: c)
    }

    private static let cacheStatusField = "Cache-Status: "
        + String(decoding: CacheStatus(detail: "offline").serialized(), as: UTF8.self)
}
