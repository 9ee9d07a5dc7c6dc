import EventLoop
import HTTP2
import HTTPWire
import LarderConfig
import SessionClient

/// The configuration as the hot path wants it: bytes instead of strings, limits in parser form.
struct ProxySettings: Sendable {
    var headLimits: HeadLimits
    var viaName: [UInt8]
    var connectPorts: Set<Int>
    var purgeAllowedFrom: [AddressRange]
    var allowClients: [AddressRange]
    /// Load balancers whose PROXY protocol headers are believed.
    var proxyProtocolFrom: [AddressRange]
    var destinations: DestinationRules
    /// nil when `auth.users_file` is not set.
    var authenticator: ProxyAuthenticator?
    var reverseOrigin: OriginKey?
    var reverseHost: ReverseHost
    var reverseAllowedHosts: [HostPattern]
    var clientHeaderTimeout: Double
    var maxRequestBody: Int
    /// `limits.max_connections` shared out among the workers.
    var maxConnectionsPerWorker: Int
    var maxConnectionsPerClient: Int
    /// What the open-files limit allows (read when the settings are made, at start and reload).
    var descriptors: DescriptorBudget
    var detachedFetches: DetachedFetchLimits
    /// `limits.origin_fetches_per_client` (0: no limit).
    var originFetchesPerClient: Int
    var clientIdleTimeout: Double
    var session: SessionConfiguration
    var cache: CacheSetup
    /// Cache-Status values and canned answers for what Larder answers itself.
    var localAnswers: LocalAnswers
    /// Where requests go, from the settings above (made once per configuration, not per request).
    var router: RequestRouter
    /// `mirrors`: registry paths on the listeners and the upstreams they stand for.
    var mirrors: MirrorTable
    /// `http2.*`: nil when HTTP/2 is off.
    var http2: H2Settings?
    /// `http2.stream_output`: answer bytes queued per HTTP/2 stream before its producer waits.
    var h2StreamOutput: Int

    /// Reads `auth.users_file` and `session.proxy_credentials_file` too: a missing or malformed
    /// file is a start-up error, or a rejected reload.
    static func load(_ config: Config, ownListeners: OwnListeners,
                     clock: any ProxyClock = SystemClock.shared) throws(ProxyServer.StartError) -> ProxySettings {
        var users: UsersFile?
        if let path = config.auth.usersFile {
            guard let text = ConfigLoader.readFile(path) else {
                throw .config("auth.users_file: cannot read \(path)")
            }
            do {
                users = try UsersFile.parse(text)
            } catch {
                throw .config("auth.users_file \(path): \(error.description)")
            }
        }
        var parentCredentials: ProxyCredentials?
        if let path = config.session.parentProxyCredentialsFile {
            guard config.session.parentProxy != nil else {
                throw .config("session.proxy_credentials_file is set but session.proxy is not")
            }
            guard let text = ConfigLoader.readFile(path) else {
                throw .config("session.proxy_credentials_file: cannot read \(path)")
            }
            do {
                parentCredentials = try ProxyCredentials.parse(text)
            } catch {
                throw .config("session.proxy_credentials_file \(path): \(error.description)")
            }
        }
        return ProxySettings(config, ownListeners: ownListeners, users: users, parentCredentials: parentCredentials,
                             clock: clock)
    }

    init(_ config: Config, ownListeners: OwnListeners, users: UsersFile?, parentCredentials: ProxyCredentials? = nil,
         clock: any ProxyClock = SystemClock.shared) {
        headLimits = HeadLimits(maxHeadBytes: config.limits.maxHeadBytes,
                                maxHeaderCount: config.limits.maxHeaderCount,
                                maxRequestLineBytes: config.limits.maxURIBytes)
        viaName = Array(config.viaName.utf8)
        connectPorts = Set(config.connectPorts)
        purgeAllowedFrom = config.purgeAllowedFrom
        allowClients = config.allowClients
        proxyProtocolFrom = config.proxyProtocolFrom
        destinations = DestinationRules(config.denyDestinations, ownListeners: ownListeners,
                                        protectThisHost: config.protectThisHost.applies(allowClients: config.allowClients))
        authenticator = users.map {
            ProxyAuthenticator(users: $0, realm: config.auth.realm, destinations: config.auth.destinations,
                               pendingLimit: config.auth.maxPendingChecks,
                               pendingPerClient: config.auth.maxPendingChecksPerClient, clock: clock)
        }
        if let r = config.reverseOrigin {
            reverseOrigin = OriginKey(scheme: r.scheme, host: r.host, port: r.port)
        }
        reverseHost = config.reverseHost
        reverseAllowedHosts = config.reverseAllowedHosts
        clientHeaderTimeout = config.limits.clientHeaderTimeout
        maxRequestBody = config.limits.maxRequestBody
        let workers = ProxyServer.workerCount(config)
        descriptors = DescriptorBudget(limit: OpenFilesLimit.current, workers: workers)
        let connections = descriptors.maxConnections(configured: config.limits.maxConnections)
        maxConnectionsPerWorker = max(1, (connections + workers - 1) / workers)
        maxConnectionsPerClient = config.limits.maxConnectionsPerClient
        detachedFetches = DetachedFetchLimits(fetchesPerClient: config.limits.detachedFetchesPerClient,
                                              bytesPerClient: config.limits.detachedBytesPerClient,
                                              fetches: config.limits.detachedFetches,
                                              bytes: config.limits.detachedBytes)
        originFetchesPerClient = config.limits.originFetchesPerClient
        clientIdleTimeout = config.limits.clientIdleTimeout
        http2 = config.http2.enabled
            ? H2Settings(maxConcurrentStreams: config.http2.maxConcurrentStreams, streamWindow: config.http2.streamWindow,
                         connectionWindow: config.http2.connectionWindow, maxHeaderListSize: config.http2.maxHeaderList)
            : nil
        h2StreamOutput = config.http2.streamOutput
        session = SessionConfiguration(
            httpAdditionalHeaders: config.session.httpAdditionalHeaders.map { AdditionalHeader(name: $0.name, value: $0.value) },
            timeoutIntervalForRequest: config.session.timeoutIntervalForRequest,
            timeoutIntervalForResource: config.session.timeoutIntervalForResource,
            connectTimeout: config.session.connectTimeout,
            httpMaximumConnectionsPerHost: config.session.httpMaximumConnectionsPerHost,
            // The default equals the default cap; a lower cap alone lowers both.
            maxIdleConnectionsPerHost: min(config.session.maxIdleConnectionsPerHost,
                                           config.session.httpMaximumConnectionsPerHost),
            reuseAfterBodylessAnswers: config.session.reuseAfterBodylessAnswers,
            refuseThisMachine: config.protectThisHost.applies(allowClients: config.allowClients),
            idleConnectionTimeout: config.session.idleConnectionTimeout,
            parentProxy: config.session.parentProxy.map {
                ProxyAddress(host: $0.host, port: $0.port, credentials: parentCredentials)
            },
            nameServers: config.session.dnsServers.map(\.description),
            maxResponseHeadBytes: config.limits.maxResponseHeadBytes,
            tlsMinimumVersion: config.session.tlsMinimumVersion.rawValue,
            tlsMaximumVersion: config.session.tlsMaximumVersion.rawValue,
            caFile: config.session.caFile,
            trustExceptions: config.tls.trust.map { TrustException(hostPattern: $0.host, sha256: $0.sha256) })
        session.maxIdleConnections = max(1, descriptors.idleOriginConnections / workers)
        session.http2 = config.session.http2 == .auto
        cache = CacheSetup(config)
        localAnswers = LocalAnswers(cacheName: cache.cacheName)
        router = RequestRouter(reverseOrigin: reverseOrigin, reverseHost: reverseHost,
                               reverseAllowedHosts: reverseAllowedHosts, usesParentProxy: session.parentProxy != nil)
        mirrors = MirrorTable(config.mirrors)
    }
}
