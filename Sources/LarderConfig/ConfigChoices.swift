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

    /// `cache.revalidation`: how a stale entry is checked with its origin.
    public enum Revalidation: String, Sendable, Equatable, CaseIterable {
        /// HEAD with the stored validators, then GET if changed (the documented way).
        case head
        /// RFC 9111's conditional GET (one round trip).
        case conditionalGet = "conditional-get"
    }

    /// `cache.default_policy` and a rule's `policy`: the request cache policies (NSURLRequest's).
    public enum RequestPolicy: String, Sendable, Equatable, CaseIterable {
        case useProtocolCachePolicy = "use-protocol-cache-policy"
        case reloadIgnoringLocalCacheData = "reload-ignoring-local-cache-data"
        case reloadRevalidatingCacheData = "reload-revalidating-cache-data"
        case returnCacheDataElseLoad = "return-cache-data-else-load"
        case returnCacheDataDontLoad = "return-cache-data-dont-load"
    }

    /// A rule's `storage` (NSURLCacheStoragePolicy).
    public enum StoragePolicy: String, Sendable, Equatable, CaseIterable {
        case allowed
        case memoryOnly = "memory-only"
        case notAllowed = "not-allowed"
    }
}

extension URIScheme {
    /// `http` or `https`, as written in a URL.
    public var name: String {
        switch self {
        case .http: return "http"
        case .https: return "https"
        }
    }
}
