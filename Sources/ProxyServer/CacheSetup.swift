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
    /// RFC 9213 targeted fields honoured, lower-case, in order (`cache.targeted_cache_control`).
    let targetedFields: [[UInt8]]
    /// `cache.finish_aborted_fraction` (nil: off) and `cache.finish_aborted_max_size`.
    let finishAbortedFraction: Double?
    let finishAbortedMaxSize: Int
    /// `cache.range_misses` is `fill`: a ranged miss fetches the whole object (`RangeFill`).
    let fillsRangeMisses: Bool
    /// `via_name` as Cache-Status names this cache, serialized once.
    let cacheName: CacheName

    init(_ config: Config) {
        let c = config.cache
        var p = PolicySettings()
        p.defaultRequestPolicy = c.offline ? .returnCacheDataDontLoad : c.defaultPolicy
        p.offline = c.offline
        p.revalidation = c.revalidation
        p.heuristicFraction = c.heuristicFraction
        p.heuristicCap = Int64(c.heuristicMax)
        policy = p
        // The user's own rules first (they win), then the presets' in the order listed.
        rules = CacheRules(config.effectiveRules.map { r in
            let f: FreshnessOverride? = (r.forcedLifetime ?? r.maximumLifetime ?? r.defaultLifetime) == nil ? nil
                : FreshnessOverride(forcedLifetime: r.forcedLifetime.map { Int64($0) },
                                    maximumLifetime: r.maximumLifetime.map { Int64($0) },
                                    defaultLifetime: r.defaultLifetime.map { Int64($0) }, guarded: r.fromPreset)
            return CacheRule(scheme: r.scheme?.name, host: r.host, pathPrefix: r.pathPrefix, path: r.path, statuses: r.statuses,
                             contentTypePrefix: r.contentType, requestPolicy: r.policy,
                             storagePolicy: r.storage, freshness: f, ignoreReload: r.ignoreReload)
        })
        store = CacheSettings(
            disk: DiskStoreSettings(directory: config.cacheDirectory, capacity: c.diskCapacity,
                                    durability: Durability(c.durability), syncInterval: c.syncInterval),
            memoryCapacity: c.memoryCapacity, memoryObjectLimit: min(c.memoryMaxObjectSize, c.memoryCapacity),
            maxObjectSize: c.maxObjectSize, ephemeral: c.ephemeral)
        collapseRequests = c.collapseRequests
        finishAbortedFraction = c.finishAbortedFraction
        finishAbortedMaxSize = c.finishAbortedMaxSize
        fillsRangeMisses = c.rangeMisses == .fill
        switch c.targetedCacheControl {
        case .auto: targetedFields = config.reverseOrigin == nil ? [] : [Array("cdn-cache-control".utf8)]
        case .fields(let names): targetedFields = names.map { Array($0.utf8) }
        }
        cacheName = CacheName(config.viaName)
    }
}

// The configuration's closed sets, one case for one case: a new case fails to compile here.

extension Durability {
    init(_ durability: Config.Durability) {
        switch durability {
        case .fast: self = .fast
        case .safe: self = .safe
        }
    }
}
