@preconcurrency import CLibevent
import Glibc

/// Asynchronous name resolution with libevent's evdns, one per worker loop: /etc/hosts first, then
/// answers kept in a `NameCache` (within their TTLs), then the name servers of /etc/resolv.conf
/// (or the ones configured), asked for A and AAAA records. Concurrent lookups of one name share
/// its queries. Lookups pending at once are bounded by a `LookupBudget` (per client address, per
/// registered domain, in all): beyond it a lookup fails at once (`refused`) rather than waiting
/// behind the others inside evdns, where queries beyond its in-flight limit wait untimed.
/// Numeric addresses never touch DNS.
public final class Resolver {
    private let dns: OpaquePointer
    private let loop: EventLoop
    private let clock: any ProxyClock
    private let hosts: [String: [SocketAddress]]
    private var cache: NameCache
    private var budget: LookupBudget
    private var lookups: [String: Lookup] = [:]

    /// One query's wait for an answer, and how many times it is sent: a name server that never
    /// answers fails a lookup after about `lookupTimeout` seconds.
    public static let queryTimeout = 3
    public static let queryAttempts = 2
    public static var lookupTimeout: Int { queryTimeout * queryAttempts }
    /// Queries evdns keeps in flight (its default, 64, is 32 lookups: a handful of dead names
    /// would fill it). `LookupBudget.defaultTotal` lookups of two queries each stay below it.
    public static let maxInflightQueries = 1_024
    /// Once one family's addresses are in, how long the other family's answer is waited for.
    static let otherFamilyGrace = 0.5
    /// Seconds an answer missing a family is kept.
    static let partialAnswerTTL: UInt32 = 2
    /// Every family's answer is waited for, however late (until the lookup's timeout), rather
    /// than going on with the first after `otherFamilyGrace`: where answers decide a destination
    /// check and not a connection (through a parent proxy), a late family's addresses must be
    /// checked too, or a name whose denied address comes second slips past.
    public var waitsForEveryFamily = false

    public enum Failure: Error, Sendable, Equatable {
        /// The name does not exist, has no address, or the name server said why not.
        case notFound(String)
        /// No name server answered within `seconds`.
        case timedOut(seconds: Int)
        /// Not asked: too many lookups pending (the reason says whose).
        case refused(String)
    }

    /// A configured name server libevent would not take.
    public struct BadNameServer: Error, Sendable, CustomStringConvertible {
        public let server: String
        public var description: String { "name server \(server) is not an address libevent accepts" }
    }

    /// - Parameter nameServers: `host:port` strings to ask instead of resolv.conf's.
    public init(loop: EventLoop, nameServers: [String] = [], clock: any ProxyClock = SystemClock.shared,
                budget: LookupBudget = LookupBudget(), cacheCapacity: Int = NameCache.capacity,
                hostsFile: String = "/etc/hosts") throws(BadNameServer) {
        self.loop = loop
        self.clock = clock
        self.budget = budget
        cache = NameCache(capacity: cacheCapacity)
        hosts = HostsFile.load(hostsFile)
        dns = evdns_base_new(loop.base, 0)!
        if nameServers.isEmpty {
            _ = evdns_base_resolv_conf_parse(dns, larder_DNS_OPTIONS_ALL, "/etc/resolv.conf")
        } else {
            for server in nameServers where evdns_base_nameserver_ip_add(dns, server) != 0 {
                evdns_base_free(dns, 0)
                throw BadNameServer(server: server)
            }
        }
        _ = evdns_base_set_option(dns, "timeout:", String(Resolver.queryTimeout))
        _ = evdns_base_set_option(dns, "attempts:", String(Resolver.queryAttempts))
        _ = evdns_base_set_option(dns, "max-inflight:", String(Resolver.maxInflightQueries))
    }

    deinit {
        for lookup in lookups.values { lookup.grace?.cancel() }
        evdns_base_free(dns, 1)
    }

    /// Lookups waiting for name servers, and names kept (tests, statistics).
    public var pendingLookups: Int { lookups.count }
    public var cachedNames: Int { cache.count }

    /// What `host` is known to resolve to without asking anyone (the hosts file, or a cached
    /// answer still within its TTL), addresses with port 0; nil: it must be looked up.
    public func known(_ host: String) -> NameCache.Answer? {
        if let fixed = hosts[host] { return .addresses(fixed) }
        return cache.answer(for: host, now: clock.monotonic)
    }

    /// Resolves `host`; `completion` runs exactly once on the loop, possibly before this returns
    /// (numeric hosts, the hosts file, cached answers, refusals). Cancelling suppresses the
    /// completion; the lookup itself runs on for the cache and keeps its place in the budget.
    /// - Parameter client: the address (network order) the lookup is made for; nil for Larder's own.
    @discardableResult
    public func resolve(host: String, port: Int, client: [UInt8]? = nil,
                        _ completion: @escaping (Result<[SocketAddress], Failure>) -> Void) -> ResolveRequest {
        let request = ResolveRequest(port: port, completion: completion)
        if let literal = SocketAddress(ipLiteral: host, port: port) {
            request.finish(.success([literal]))
            return request
        }
        if let answer = known(host) {
            switch answer {
            case .addresses(let list): request.deliver(list)
            case .notFound(let reason): request.finish(.failure(.notFound(reason)))
            case .timedOut: request.finish(.failure(.timedOut(seconds: Resolver.lookupTimeout)))
            }
            return request
        }
        if let lookup = lookups[host] {
            lookup.waiters.append(request)
            return request
        }
        let domain = LookupBudget.registeredDomain(of: host)
        if let refusal = budget.admit(client: client, domain: domain) {
            request.finish(.failure(.refused(refusal.reason)))
            return request
        }
        let lookup = Lookup(host: host, client: client, domain: domain, resolver: self)
        lookup.waiters.append(request)
        lookups[host] = lookup
        start(lookup)
        return request
    }

    private func start(_ lookup: Lookup) {
        let v4 = Unmanaged.passRetained(lookup).toOpaque()
        lookup.v4Query = evdns_base_resolve_ipv4(dns, lookup.host, 0, { result, _, count, ttl, addresses, arg in
            Unmanaged<Lookup>.fromOpaque(arg!).takeRetainedValue()
                .answered(ipv6: false, result: result, count: count, ttl: ttl, addresses: addresses)
        }, v4)
        let v6 = Unmanaged.passRetained(lookup).toOpaque()
        lookup.v6Query = evdns_base_resolve_ipv6(dns, lookup.host, 0, { result, _, count, ttl, addresses, arg in
            Unmanaged<Lookup>.fromOpaque(arg!).takeRetainedValue()
                .answered(ipv6: true, result: result, count: count, ttl: ttl, addresses: addresses)
        }, v6)
        // evdns refused to send (a name it cannot encode): no callback will come for that family.
        if lookup.v4Query == nil {
            Unmanaged<Lookup>.fromOpaque(v4).release()
            lookup.v4 = .failed("not a name that can be looked up")
        }
        if lookup.v6Query == nil {
            Unmanaged<Lookup>.fromOpaque(v6).release()
            lookup.v6 = .failed("not a name that can be looked up")
        }
        if lookup.v4Query == nil || lookup.v6Query == nil { decide(lookup) }
    }

    /// One family's answer is in (or the grace for the other ran out): finish when that decides.
    fileprivate func decide(_ lookup: Lookup, graceOver: Bool = false) {
        guard !lookup.finished else { return }
        let now = clock.monotonic
        switch LookupAnswers.verdict(v4: lookup.v4, v6: lookup.v6, graceOver: graceOver) {
        case .waitForOther:
            return
        case .waitBrieflyForOther:
            if waitsForEveryFamily { return }
            if lookup.grace == nil {
                let t = Timer(loop: loop) { [weak self, weak lookup] in
                    if let self, let lookup { self.decide(lookup, graceOver: true) }
                }
                lookup.grace = t
                t.schedule(after: Resolver.otherFamilyGrace)
            }
            return
        case .addresses(let list, let ttl):
            // One family still unanswered after the grace: what came is used now, but kept only
            // briefly, so a late family's addresses are seen (and checked) by the next lookup.
            let partial = lookup.v4 == nil || lookup.v6 == nil
            cache.remember(addresses: list, ttl: partial ? min(ttl, Resolver.partialAnswerTTL) : ttl,
                           for: lookup.host, now: now)
            finish(lookup) { $0.deliver(list) }
        case .notFound(let reason, let soaTTL):
            cache.rememberNotFound(reason, soaTTL: soaTTL, for: lookup.host, now: now)
            finish(lookup) { $0.finish(.failure(.notFound(reason))) }
        case .timedOut:
            cache.rememberTimeout(for: lookup.host, now: now)
            finish(lookup) { $0.finish(.failure(.timedOut(seconds: Resolver.lookupTimeout))) }
        case .failed(let reason):
            finish(lookup) { $0.finish(.failure(.notFound(reason))) }
        }
    }

    private func finish(_ lookup: Lookup, _ answer: (ResolveRequest) -> Void) {
        lookup.finished = true
        lookup.grace?.cancel()
        lookup.grace = nil
        // A query still out is cancelled; its callback still comes (with DNS_ERR_CANCEL).
        if let q = lookup.v4Query { evdns_cancel_request(dns, q) }
        if let q = lookup.v6Query { evdns_cancel_request(dns, q) }
        if lookups[lookup.host] === lookup { lookups[lookup.host] = nil }
        budget.release(client: lookup.client, domain: lookup.domain)
        let waiters = lookup.waiters
        lookup.waiters = []
        for w in waiters { answer(w) }
    }
}

/// One name being looked up: its two queries, what each answered, who waits.
private final class Lookup {
    let host: String
    let client: [UInt8]?
    let domain: String
    weak var resolver: Resolver?
    var waiters: [ResolveRequest] = []
    /// evdns's handles while their callbacks are to come (valid only until then).
    var v4Query: OpaquePointer?
    var v6Query: OpaquePointer?
    var v4: LookupAnswers.Family?
    var v6: LookupAnswers.Family?
    var grace: Timer?
    var finished = false

    init(host: String, client: [UInt8]?, domain: String, resolver: Resolver) {
        self.host = host
        self.client = client
        self.domain = domain
        self.resolver = resolver
    }

    func answered(ipv6: Bool, result: Int32, count: Int32, ttl: Int32, addresses: UnsafeMutableRawPointer?) {
        if ipv6 { v6Query = nil } else { v4Query = nil }
        guard !finished, result != DNS_ERR_CANCEL, let resolver else { return }
        let ttl = UInt32(max(0, ttl))
        let family: LookupAnswers.Family
        switch result {
        case DNS_ERR_NONE:
            var list: [SocketAddress] = []
            if let addresses, count > 0 {
                let size = ipv6 ? 16 : 4
                let raw = UnsafeRawBufferPointer(start: addresses, count: Int(count) * size)
                for i in 0..<Int(count) {
                    if let a = SocketAddress(addressBytes: Array(raw[i * size..<(i + 1) * size]), port: 0) { list.append(a) }
                }
            }
            family = list.isEmpty ? .noData(ttl: ttl) : .addresses(list, ttl: ttl)
        case DNS_ERR_NOTEXIST: family = .nxdomain(ttl: ttl)
        case DNS_ERR_NODATA: family = .noData(ttl: ttl)
        case DNS_ERR_TIMEOUT, DNS_ERR_SERVERFAILED: family = .timedOut
        default: family = .failed(String(cString: evdns_err_to_string(result)))
        }
        if ipv6 { v6 = family } else { v4 = family }
        resolver.decide(self)
    }
}

/// An outstanding resolution.
public final class ResolveRequest {
    private let port: Int
    private var completion: ((Result<[SocketAddress], Resolver.Failure>) -> Void)?

    init(port: Int, completion: @escaping (Result<[SocketAddress], Resolver.Failure>) -> Void) {
        self.port = port
        self.completion = completion
    }

    /// Addresses with port 0, given the port asked for.
    func deliver(_ addresses: [SocketAddress]) {
        finish(.success(addresses.map { $0.withPort(port) }))
    }

    func finish(_ result: Result<[SocketAddress], Resolver.Failure>) {
        let c = completion
        completion = nil
        c?(result)
    }

    /// The completion has yet to run (and was not cancelled).
    public var isPending: Bool { completion != nil }

    /// The completion will not run.
    public func cancel() {
        completion = nil
    }
}
