import CachePolicy
import CacheStore
import LarderConfig

/// The cache configuration in the forms CachePolicy and CacheStore take. A class: exchanges take
/// it per request, and a reference costs one count where a copy of the struct would cost one per
/// field.
final class CacheSetup: Sendable {
    let policy: PolicySettings
    let rules: CacheRules
    let store: CacheSettings
    let collapseRequests: Bool

    init(_ config: Config) {
        let c = config.cache
        var p = PolicySettings()
        p.defaultRequestPolicy = c.offline ? .returnCacheDataDontLoad
            : (RequestCachePolicy(rawValue: c.defaultPolicy) ?? .useProtocolCachePolicy)
        p.revalidation = RevalidationMethod(rawValue: c.revalidation) ?? .head
        p.heuristicFraction = c.heuristicFraction
        p.heuristicCap = Int64(c.heuristicMax)
        policy = p
        rules = CacheRules(c.rules.map { r in
            let f: FreshnessOverride? = (r.forcedLifetime ?? r.maximumLifetime ?? r.defaultLifetime) == nil ? nil
                : FreshnessOverride(forcedLifetime: r.forcedLifetime.map { Int64($0) },
                                    maximumLifetime: r.maximumLifetime.map { Int64($0) },
                                    defaultLifetime: r.defaultLifetime.map { Int64($0) })
            return CacheRule(scheme: r.scheme, host: r.host, pathPrefix: r.pathPrefix, statuses: r.statuses,
                             contentTypePrefix: r.contentType,
                             requestPolicy: r.policy.flatMap { RequestCachePolicy(rawValue: $0) },
                             storagePolicy: r.storage.flatMap { StoragePolicy(rawValue: $0) }, freshness: f)
        })
        store = CacheSettings(
            disk: DiskStoreSettings(directory: config.cacheDirectory, capacity: c.diskCapacity,
                                    durability: Durability(rawValue: c.durability) ?? .fast,
                                    syncInterval: c.syncInterval),
            memoryCapacity: c.memoryCapacity, memoryObjectLimit: min(c.memoryMaxObjectSize, c.memoryCapacity),
            maxObjectSize: c.maxObjectSize)
        collapseRequests = c.collapseRequests
    }
}
