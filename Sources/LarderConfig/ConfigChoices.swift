import CachePolicy
import HTTPWire

/// The closed sets of values keys take, parsed once at load: consumers switch over them and never
/// read a string again. Raw values are the spellings the file uses.
extension Config {
    /// `log_level`, swift-log's levels.
    public enum LogLevel: String, Sendable, Equatable, CaseIterable {
        case trace, debug, info, notice, warning, error, critical
    }

    /// `access_log`: where the lines go (nil in `Config.accessLog`: nowhere).
    public enum AccessLogDestination: Sendable, Equatable {
        case stdout
        /// A file, appended to and reopened on SIGUSR1.
        case file(String)
    }

    /// `session.http2`: whether https origins are offered HTTP/2.
    public enum OriginHTTP2: String, Sendable, Equatable, CaseIterable {
        /// ALPN offers `h2` and `http/1.1`; the origin picks.
        case auto
        /// ALPN offers `http/1.1` only.
        case off
    }

    /// `cache.range_misses`: what a ranged request that finds nothing to answer it from does.
    public enum RangeMisses: String, Sendable, Equatable, CaseIterable {
        /// The whole object is fetched and stored; the client's range is cut from it as it streams.
        case fill
        /// The client's range goes to the origin as it is; the 206 is stored as a piece.
        case pieces
    }

    /// `access_log_format`.
    public enum AccessLogFormat: String, Sendable, Equatable, CaseIterable {
        /// Apache/nginx combined, with the cache result and the seconds taken appended.
        case combined
        /// One JSON object per line.
        case json
    }

    /// `session.tls_minimum_version` and `session.tls_maximum_version`, in order.
    public enum TLSVersion: String, Sendable, Equatable, CaseIterable, Comparable {
        case tls12 = "1.2"
        case tls13 = "1.3"

        public static func < (a: TLSVersion, b: TLSVersion) -> Bool {
            allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
        }
    }

    /// `tls.intercept_key_type`: the key of minted certificates.
    public enum KeyType: String, Sendable, Equatable, CaseIterable {
        case ecP256 = "ec-p256"
        case rsa2048 = "rsa-2048"
    }

    /// `cache.durability`.
    public enum Durability: String, Sendable, Equatable, CaseIterable {
        /// Commits are not synced one by one; the cache is synced every `cache.sync_interval`.
        case fast
        /// Every commit is synced.
        case safe
    }

    /// `cache.revalidation`, `cache.default_policy` and a rule's `policy` and `storage` take the cache
    /// policy's own types: one set of cases, spelled as the file spells them.
    public typealias Revalidation = RevalidationMethod
    public typealias RequestPolicy = RequestCachePolicy
    public typealias StoragePolicy = CachePolicy.StoragePolicy
}

