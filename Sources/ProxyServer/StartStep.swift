/// The steps of start-up, in the order `ProxyServer.start` takes them. A step that fails stops
/// the start, and the line that says why begins with what Larder was doing (`doing`).
public enum StartStep: CaseIterable, Comparable, Sendable {
    /// Whoever built the configuration, it passes the loader's checks.
    case checkConfiguration
    /// The soft limit on open files up to the hard one, before the settings size their budgets by it.
    case raiseOpenFiles
    case loadSettings
    /// Before the cache opens: a damaged cache is moved aside, with `cache_dir/ca` where earlier
    /// versions kept the CA, which must be moved out first.
    case loadInterceptionCA
    case openCache
    case openAccessLog
    case loadCertificate
    /// After the cache: minted certificates are kept under `cache_dir`.
    case startInterception
    case prepareWorkers
    /// The listen addresses, parsed before any socket is opened.
    case planListeners
    /// Every configured port another process holds stops the start, before any is bound.
    case checkPorts
    case bindListeners
    /// After the proxy listeners: `POST /warm` warms through the first one.
    case startAdmin
    case startWorkers

    /// What Larder was doing, for the line that says why it stopped.
    public var doing: String {
        switch self {
        case .checkConfiguration: return "checking the configuration"
        case .raiseOpenFiles: return "raising the open files limit"
        case .loadSettings: return "loading the settings"
        case .loadInterceptionCA: return "loading the interception CA"
        case .openCache: return "opening the cache"
        case .openAccessLog: return "opening the access log"
        case .loadCertificate: return "loading the TLS certificate"
        case .startInterception: return "starting interception"
        case .prepareWorkers: return "preparing the workers"
        case .planListeners: return "reading the listen addresses"
        case .checkPorts: return "checking that no other process holds the ports"
        case .bindListeners: return "binding the proxy listeners"
        case .startAdmin: return "starting the admin endpoint"
        case .startWorkers: return "starting the workers"
        }
    }
}
