#if canImport(Glibc)
import Glibc
#endif
import HTTPWire
import LarderConfig
import SessionClient

/// Where a request goes: decided from its head and the settings alone, so every rule of routing
/// is table-tested without a connection. A class of constants: the settings hold it, and a
/// request routed through it costs one reference count rather than one per field of a copy.
final class RequestRouter: Sendable {
    let reverseOrigin: OriginKey?
    let reverseHost: ReverseHost
    let reverseAllowedHosts: [HostPattern]
    let usesParentProxy: Bool
    /// `reverseOrigin`'s host as bytes, made once rather than for every request.
    private let reverseOriginHost: [UInt8]

    init(reverseOrigin: OriginKey?, reverseHost: ReverseHost, reverseAllowedHosts: [HostPattern], usesParentProxy: Bool) {
        self.reverseOrigin = reverseOrigin
        self.reverseHost = reverseHost
        self.reverseAllowedHosts = reverseAllowedHosts
        self.usesParentProxy = usesParentProxy
        reverseOriginHost = Array((reverseOrigin?.host ?? "").utf8)
    }

    /// Where requests go: where to connect, how to name the origin upstream, and under which
    /// origin the cache keys them. A class: a request hands it from the router to the cache's
    /// exchange and on to the relay, and a struct of this many arrays and strings cost a
    /// reference count per field at each hand-over. Nothing of one request's own is in it (its
    /// path travels beside it), so that requests naming the same host in reverse mode share one
    /// (`RouteMemo`).
    final class Destination: Sendable {
        let origin: OriginKey
        let route: OutboundHead.Route
        /// The origin as the cache key and rules name it (reverse mode keys on the Host it forwards).
        let keyedAs: OriginKey
        /// Checked against access rules and authentication before forwarding (forward proxying only),
        /// with the target's host as bytes.
        let checkAccess: Bool
        let accessHost: [UInt8]
        /// `keyedAs.host` as bytes, when the router has them: the cache key is built from bytes.
        let keyedHost: [UInt8]?
        /// An `ftp://` request with a login of its own (the URL's user or an `Authorization`): what it
        /// reads may be that user's alone, so the cache neither answers nor stores it.
        let carriesCredentials: Bool

        init(origin: OriginKey, route: OutboundHead.Route, keyedAs: OriginKey,
             checkAccess: Bool = false, accessHost: [UInt8] = [], keyedHost: [UInt8]? = nil,
             carriesCredentials: Bool = false) {
            self.origin = origin; self.route = route; self.keyedAs = keyedAs
            self.checkAccess = checkAccess; self.accessHost = accessHost; self.keyedHost = keyedHost
            self.carriesCredentials = carriesCredentials
        }
    }

    enum Route {
        /// Refused; the connection closes after the answer.
        case reject(Int, String)
        /// Refused or answered; the connection may go on.
        case respond(Int, String, extraField: String?)
        /// TRACE or OPTIONS with `Max-Forwards: 0`, and `OPTIONS *`.
        case answerLocally
        /// Reverse mode: a Host outside `reverse_allowed_hosts` (400, counted as a denied destination).
        case unservedHost(String)
        case purge(RequestTarget)
        case connect(RequestTarget)
        /// `path`: the target's path and query (no fragment), offsets into the request's target.
        case forward(Destination, path: Range<Int>)
    }

    /// `interceptedOrigin`: an intercepted CONNECT's destination; origin-form requests on its
    /// connection go there.
    /// `memo`: the last Host named in reverse mode and what it became, and the last origin
    /// forwarded to and its destination, kept by the caller (one per worker) because the requests
    /// it sees mostly name the same one.
    func route(_ request: RequestHead, interceptedOrigin: OriginKey?, isPurge: Bool,
               memo: RouteMemo? = nil) -> Route {
        if request.method == .connect {
            if reverseOrigin != nil {
                return .respond(405, "CONNECT is not available: this Larder is a reverse proxy for one origin",
                                extraField: "Allow: GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS")
            }
            switch Self.parseTarget(request) {
            case .success(let t): return .connect(t)
            case .failure(let error): return .reject(400, error.reason)
            }
        }
        let target: RequestTarget
        switch Self.parseTarget(request) {
        case .success(let t): target = t
        case .failure(let error): return .reject(error.requestStatus, error.reason)
        }
        let path = target.pathRange(targetLength: request.target.count)
        if request.method == .other, isPurge { return .purge(target) }
        if request.method == .trace || request.method == .options, OutboundHead.maxForwards(request) == 0 {
            return .answerLocally
        }
        switch target.form {
        case .asterisk:
            return .answerLocally
        case .authority:
            return .reject(400, "authority-form target is only for CONNECT")
        case .origin:
            if let origin = interceptedOrigin {
                let route = OutboundHead.Route(scheme: .https, originHost: Array(origin.host.utf8),
                                               originPort: origin.port, absoluteForm: false)
                return .forward(Destination(origin: origin, route: route, keyedAs: origin), path: path)
            }
            guard let reverse = reverseOrigin else {
                return .reject(400, "origin-form request: Larder is a forward proxy; send an absolute URI "
                               + "(http://host/path), or configure reverse_origin")
            }
            return reverseRoute(to: reverse, request: request, target: target, path: path, memo: memo)
        case .absolute:
            // A reverse proxy serves its one origin: an absolute URI names a Host, never a destination.
            if let reverse = reverseOrigin {
                return reverseRoute(to: reverse, request: request, target: target, path: path, memo: nil)
            }
            if target.scheme == .ftp { return ftpRoute(request, target: target, path: path) }
            if let shared = memo?.destination(madeBy: self, for: target) { return .forward(shared, path: path) }
            let origin = OriginKey(scheme: target.scheme, host: target.hostString, port: target.port)
            let route = OutboundHead.Route(scheme: target.scheme, originHost: target.host, originPort: target.port,
                                           absoluteForm: toParentInAbsoluteForm(target.scheme))
            let destination = Destination(origin: origin, route: route, keyedAs: origin, checkAccess: true,
                                          accessHost: target.host, keyedHost: target.host)
            memo?.keep(destination, madeBy: self, for: target)
            return .forward(destination, path: path)
        }
    }

    /// `ftp://` goes to the session's FTP gateway, or to the parent proxy, in absolute form with
    /// its credentials (both read them from the URL). Reading only: no uploads, no deletes.
    private func ftpRoute(_ request: RequestHead, target: RequestTarget, path: Range<Int>) -> Route {
        guard request.method == .get || request.method == .head else {
            return .respond(405, "ftp:// URLs are only read through this proxy (GET or HEAD)", extraField: "Allow: GET, HEAD")
        }
        let origin = OriginKey(scheme: .ftp, host: target.hostString, port: target.port)
        var route = OutboundHead.Route(scheme: .ftp, originHost: target.host, originPort: target.port, absoluteForm: true)
        if let userinfo = target.userinfo { route.userinfo = request.headers.withBytes(request.target) { Array($0[userinfo]) } }
        let credentials = route.userinfo.map { !Self.namesAnonymous($0) } ?? false
            || request.headers.firstIndex(of: "authorization") != nil
        return .forward(Destination(origin: origin, route: route, keyedAs: origin, checkAccess: true,
                                    accessHost: target.host, keyedHost: target.host, carriesCredentials: credentials),
                        path: path)
    }

    /// `anonymous` or `ftp` without a password (RFC 1635): the public login, whose answers are the
    /// same for everyone and may be cached. With a password it may be a real account of that
    /// name (`ftp` often is), whose files must not be served to everyone.
    private static func namesAnonymous(_ userinfo: [UInt8]) -> Bool {
        let parts = userinfo.split(separator: asciiColon, maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2, !parts[1].isEmpty { return false }
        let lowered = (parts.first ?? []).map(asciiLower)
        return lowered.isEmpty || lowered.elementsEqual("anonymous".utf8) || lowered.elementsEqual("ftp".utf8)
    }

    /// http:// requests go to a parent proxy in absolute form; https ones go in origin form,
    /// inside TLS with the origin through the parent's tunnel, the parent seeing none of it.
    private func toParentInAbsoluteForm(_ scheme: URIScheme) -> Bool {
        usesParentProxy && scheme == .http
    }

    static func parseTarget(_ request: RequestHead) -> Result<RequestTarget, HTTPWireError> {
        let method = request.method
        return request.headers.withBytes(request.target) { bytes in
            do throws(HTTPWireError) {
                return .success(try RequestTarget.parse(bytes, method: method))
            } catch {
                return .failure(error)
            }
        }
    }

    // MARK: - Reverse (accelerator) mode

    /// Every request goes to `reverse_origin`. The Host the client names is checked against
    /// `reverse_allowed_hosts`, and the cache keys on the Host actually sent upstream, so that one
    /// client's `Host: evil.example` can never become another client's page.
    private func reverseRoute(to reverse: OriginKey, request: RequestHead, target: RequestTarget,
                              path: Range<Int>, memo: RouteMemo?) -> Route {
        // The Host field is compared with the memo's once. A destination this router made is for
        // its one reverse origin, so it is shared without more (nothing the memo holds is copied).
        let sameHost = reverseHost == .client && memo?.holdsHost(of: request, target) == true
        if sameHost, let shared = memo?.destination(madeBy: self) { return .forward(shared, path: path) }
        let remembered = sameHost ? memo?.recall(for: reverse) : nil
        let named: ReverseHostName?
        if let remembered {
            named = remembered.named
        } else {
            switch Self.requestedHost(request, target) {
            case .success(let n): named = n
            case .failure(let problem): return .reject(400, problem.reason)
            }
        }
        if !reverseAllowedHosts.isEmpty {
            guard let named, reverseAllowedHosts.contains(where: { $0.matches(named.host) }) else {
                return .unservedHost("Host \(named.map { String(decoding: $0.host, as: UTF8.self) } ?? "(none)") "
                                     + "is not served here (reverse_allowed_hosts)")
            }
        }
        var route = OutboundHead.Route(scheme: reverse.scheme, originHost: reverseOriginHost,
                                       originPort: reverse.port, absoluteForm: toParentInAbsoluteForm(reverse.scheme))
        var keyedAs = reverse
        var keyedHost = reverseOriginHost
        var memoHoldsHost = false
        if reverseHost == .client, let named {
            if let remembered {
                route.host = remembered.authority
                keyedAs = remembered.keyedAs
                memoHoldsHost = true
            } else {
                // Key and forward the same spelling: the default port elided in both (`site:80` is `site`).
                let port = named.port ?? reverse.scheme.defaultPort
                let authority = authorityBytes(host: named.host, port: port, scheme: reverse.scheme)
                route.host = authority
                keyedAs = OriginKey(scheme: reverse.scheme, host: String(decoding: named.host, as: UTF8.self), port: port)
                memoHoldsHost = memo?.remember(request, target, reverse, named: named, authority: authority,
                                                keyedAs: keyedAs) ?? false
            }
            keyedHost = named.host
        }
        let destination = Destination(origin: reverse, route: route, keyedAs: keyedAs, keyedHost: keyedHost)
        if memoHoldsHost { memo?.keep(destination, madeBy: self) }
        return .forward(destination, path: path)
    }

    /// The host the client addressed: an absolute URI's authority (RFC 9112 §3.2.2: it overrides
    /// Host), else the Host field, normalised as targets are. Nil for an HTTP/1.0 request without Host.
    private static func requestedHost(_ request: RequestHead, _ target: RequestTarget) -> Result<ReverseHostName?, HostProblem> {
        if target.form == .absolute {
            let port = target.hasExplicitPort ? target.port : nil
            return .success(ReverseHostName(host: target.host, port: port))
        }
        guard let i = request.headers.firstIndex(of: "host") else { return .success(nil) }
        return request.headers.withBytes(request.headers.fields[i].value) { bytes -> Result<ReverseHostName?, HostProblem> in
            if bytes.isEmpty { return .success(nil) }  // a target without authority (RFC 9112 §3.2)
            guard let parsed = try? RequestTarget.parseHost(bytes) else {
                return .failure(HostProblem(reason: "Host \(String(decoding: bytes, as: UTF8.self)) is not a host name or address"))
            }
            return .success(ReverseHostName(host: parsed.host, port: parsed.port))
        }
    }
}

/// What a step of routing (or of taking an origin's answer) leaves to its caller.
enum RouteStep {
    /// Nothing done to the request: the next step runs.
    case goOn
    /// The step answered the request, or started what will: a fetch, following another's fetch,
    /// or a wait for a background check after which the request is routed again.
    case taken
}

struct HostProblem: Error {
    var reason: String
}

/// The Host a client named: normalised name or address, and the port if one was given.
struct ReverseHostName {
    var host: [UInt8]
    var port: Int?
}

/// What the last requests were routed to (`RequestRouter.route`), for the next ones, which mostly
/// name the same origin. One per worker, so never shared between threads.
///
/// In reverse mode, the last Host field routed by and what it became: reading a Host, checking
/// and normalising it, cost more than the rest of a hit's routing (origin-form requests only: an
/// absolute target's authority is parsed with the target anyway). For a forward proxy, the last
/// origin an absolute target named. Either way, the destination made for it, shared by the
/// requests that name it again while the router that made it is the one in force: making and
/// freeing one per request cost about 400 instructions of a hit.
final class RouteMemo {
    private var field: [UInt8] = []
    private var origin: OriginKey?
    private var named = ReverseHostName(host: [], port: nil)
    private var authority: [UInt8] = []
    private var keyedAs: OriginKey?
    /// The destination a router made for the host remembered, and that router: requests naming
    /// the host again share it while the configuration stays (a reload makes a new router).
    private var destination: RequestRouter.Destination?
    private var router: RequestRouter?

    /// What the host remembered became for `reverse`, for a request whose Host field is that
    /// host's (`holdsHost`).
    func recall(for reverse: OriginKey) -> (named: ReverseHostName, authority: [UInt8], keyedAs: OriginKey)? {
        guard let keyedAs, origin == reverse else { return nil }
        return (named, authority, keyedAs)
    }

    /// Whether the request's Host field is the one remembered, byte for byte.
    func holdsHost(of request: RequestHead, _ target: RequestTarget) -> Bool {
        guard target.form == .origin, !field.isEmpty, let value = Self.hostValue(request) else { return false }
        return request.headers.withBytes(value) { bytes in
            guard bytes.count == field.count, let a = bytes.baseAddress else { return false }
            return field.withUnsafeBytes { memcmp(a, $0.baseAddress!, bytes.count) == 0 }
        }
    }

    /// Whether the request's host is the one remembered now.
    @discardableResult
    func remember(_ request: RequestHead, _ target: RequestTarget, _ reverse: OriginKey, named: ReverseHostName,
                  authority: [UInt8], keyedAs: OriginKey) -> Bool {
        guard target.form == .origin, let value = Self.hostValue(request) else { return false }
        field = request.headers.withBytes(value) { Array($0) }
        origin = reverse
        self.named = named
        self.authority = authority
        self.keyedAs = keyedAs
        destination = nil
        router = nil
        return true
    }

    /// The destination `router` made for the host remembered (nil: none yet, or another router's).
    func destination(madeBy router: RequestRouter) -> RequestRouter.Destination? {
        self.router === router ? destination : nil
    }

    /// Keeps `router`'s destination for the host remembered.
    func keep(_ destination: RequestRouter.Destination, madeBy router: RequestRouter) {
        self.destination = destination
        self.router = router
    }

    // The forward proxy's last origin: an absolute target's scheme, host and port, and the
    // destination `forwardRouter` made for them.
    private var forwardScheme = URIScheme.http
    private var forwardHost: [UInt8] = []
    private var forwardPort = 0
    private var forwardDestination: RequestRouter.Destination?
    private var forwardRouter: RequestRouter?

    /// The destination `router` made for the origin `target` names, if it is the last one.
    func destination(madeBy router: RequestRouter, for target: RequestTarget) -> RequestRouter.Destination? {
        guard forwardRouter === router, target.port == forwardPort, target.scheme == forwardScheme,
              sameBytes(target.host, forwardHost) else { return nil }
        return forwardDestination
    }

    /// Keeps the destination `router` made for the origin `target` names.
    func keep(_ destination: RequestRouter.Destination, madeBy router: RequestRouter, for target: RequestTarget) {
        forwardScheme = target.scheme
        forwardHost = target.host
        forwardPort = target.port
        forwardDestination = destination
        forwardRouter = router
    }

    /// The Host field's value, as `RequestRouter.requestedHost` reads it: the first Host field.
    private static func hostValue(_ request: RequestHead) -> ByteRange? {
        request.headers.firstIndex(of: "host").map { request.headers.fields[$0].value }
    }
}
