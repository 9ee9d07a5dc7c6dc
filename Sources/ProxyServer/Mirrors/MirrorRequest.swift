import HTTPWire
import LarderConfig
import Registries

/// The first step of routing: a request under a mirror's path (or a forward `http://` request a
/// mirror captures) is pointed at its upstream URL, and from then on routed like any absolute-form
/// request, through every access rule, budget and cache step of the forward path.
extension ClientConnection {
    func routeToMirror() -> RouteStep {
        // Read in place first: a copy of the table costs reference counts on every request.
        guard !worker.settings.mirrors.isEmpty, context.mirror == nil, interceptedOrigin == nil else { return .goOn }
        let table = worker.settings.mirrors
        let resolution = request.headers.withBytes(request.target) { bytes -> MirrorTable.Resolution in
            if bytes.first == UInt8(ascii: "/") { return table.resolve(originForm: bytes) }
            guard case .success(let target) = RequestRouter.parseTarget(request) else { return .notMirrored }
            return table.capture(target, bytes: bytes)
        }
        switch resolution {
        case .notMirrored:
            return .goOn
        case .refused(let status, let reason):
            worker.logger.notice("\(status) to \(peer): \(reason)")
            answerError(status, reason, source: .local)
            return .taken
        case .mirrored(let match, let target):
            let entry = table.entries[match.entry]
            guard request.method == .get || request.method == .head else {
                answerError(405, "the \(entry.config.name) mirror only reads (GET and HEAD)",
                            extraField: "Allow: GET, HEAD", source: .local)
                return .taken
            }
            var base: [UInt8] = []
            if match.rewritesURLs {
                guard let authority = clientAuthority() else {
                    answerError(400, "a mirror's documents name it by the request's Host, and this one has none",
                                source: .local)
                    return .taken
                }
                base = Array((overTLS ? "https://" : "http://").utf8) + authority + entry.path
            }
            let route = entry.routes[match.route]
            let plan: MirrorPlan
            switch MirrorPlans.plan(entry.config, route: route, relativePath: match.relativePath) {
            case .plan(let p):
                plan = p
            case .refused(let reason):
                worker.logger.notice("400 to \(peer): \(reason) in a mirror path (\(entry.config.name))")
                answerError(400, "\(reason) in a mirror path (\(entry.config.name))", source: .local)
                return .taken
            }
            let exchange = MirrorExchange(match: match, entry: entry, plan: plan, publicBase: base,
                                          budget: worker.mirrorState.held)
            let consistent = entry.config.kind == .debian
                ? AptConsistency.byHashTarget(route: route, relativePath: match.relativePath, suites: worker.mirrorState.aptSuites)
                : nil
            prepareUpstreamRequest(exchange, target: consistent ?? target)
            context.mirror = exchange
            return .goOn
        }
    }

    /// The Host the client reached Larder by, normalised (`host[:port]`, IPv6 in brackets): only
    /// ever written into this client's own answer.
    private func clientAuthority() -> [UInt8]? {
        guard let i = request.headers.firstIndex(of: "host") else { return nil }
        return request.headers.withBytes(request.headers.fields[i].value) { bytes -> [UInt8]? in
            guard !bytes.isEmpty, let parsed = try? RequestTarget.parseHost(bytes) else { return nil }
            var out: [UInt8] = []
            let v6 = parsed.host.contains(UInt8(ascii: ":"))
            if v6 { out.append(UInt8(ascii: "[")) }
            out += parsed.host
            if v6 { out.append(UInt8(ascii: "]")) }
            if let port = parsed.port { out += Array(":\(port)".utf8) }
            return out
        }
    }

    /// The request as the upstream gets it. A document is asked for whole and uncompressed (it is
    /// rewritten), without the client's validators (they name the mirror's rewrite, not the
    /// upstream's bytes), and in the form that carries dates when versions are held back by age.
    private func prepareUpstreamRequest(_ m: MirrorExchange, target: [UInt8]) {
        context.request.replaceTarget(target)
        guard case .document(let document) = m.plan else { return }
        if let i = request.headers.firstIndex(of: "if-none-match") {
            m.clientValidators = request.headers.withBytes(request.headers.fields[i].value) { Array($0) }
        }
        for name: StaticString in ["accept-encoding", "range", "if-range", "if-none-match", "if-modified-since",
                                   "if-match", "if-unmodified-since"] {
            context.request.headers.removeFields(named: name)
        }
        guard m.config.minReleaseAge != nil else { return }
        switch document {
        case .pypiSimple:
            m.clientWantsHTML = !(request.headers.value(of: "accept")?.contains("application/vnd.pypi.simple.v1+json") ?? false)
            context.request.headers.removeFields(named: "accept")
            context.request.headers.appendField(name: "Accept", value: Array("application/vnd.pypi.simple.v1+json".utf8))
        case .npmPackument:
            // The abbreviated form carries no dates.
            context.request.headers.removeFields(named: "accept")
            context.request.headers.appendField(name: "Accept", value: Array("application/json".utf8))
        default:
            break
        }
    }
}

/// Which answers of a mirror are documents to rewrite and which are files, by the registry's layout.
enum MirrorPlans {
    enum Verdict: Equatable {
        case plan(MirrorPlan)
        case refused(String)
    }

    static func plan(_ config: MirrorConfig, route: MirrorTable.Route, relativePath path: [UInt8]) -> Verdict {
        guard let kind = Registries.RegistryKind(rawValue: config.kind.rawValue) else { return .plan(.relay) }
        switch kind.classify(path: path) {
        case .rejected(let reason):
            return .refused(reason)
        case .packageFile:
            return .plan(config.minReleaseAge != nil ? .ageCheckedFile : .relay)
        case .passthrough:
            return .plan(.relay)
        case .indexDocument(.aptRelease):
            let text = String(decoding: path, as: UTF8.self)
            return .plan(AptConsistency.releaseFile(route: route, relativePath: text).map { .aptRelease($0) } ?? .relay)
        case .indexDocument(let document):
            let rewritten: Set<IndexDocument> = [.pypiSimple, .pypiJSONAPI, .npmPackument, .npmVersion, .cratesConfig]
            return .plan(rewritten.contains(document) ? .document(document) : .relay)
        }
    }
}

/// The Debian side of a mirror: which requests are a suite's release file, and which index
/// requests are fetched by hash (`AptSuites`).
enum AptConsistency {
    /// `dists/<suite>/InRelease` or `dists/<suite>/Release`: the suite it describes.
    static func releaseFile(route: MirrorTable.Route, relativePath: String) -> AptSuiteLocation? {
        guard let dist = AptDistPath(requestPath: String(relativePath.dropFirst(route.subpath.count))),
              dist.relativePath == "InRelease" || dist.relativePath == "Release" else { return nil }
        return AptSuiteLocation(upstream: route.upstream, path: route.upstream.path + "dists/\(dist.suite)/")
    }

    /// An index the suite's last release lists, in a suite that serves indexes by hash: the
    /// upstream URL of its by-hash twin, which never changes.
    static func byHashTarget(route: MirrorTable.Route, relativePath: [UInt8], suites: AptSuites) -> [UInt8]? {
        let text = String(decoding: relativePath.dropFirst(route.subpath.count), as: UTF8.self)
        guard let dist = AptDistPath(requestPath: text), !dist.isByHash,
              !["InRelease", "Release", "Release.gpg"].contains(dist.relativePath) else { return nil }
        let suite = AptSuiteLocation(upstream: route.upstream, path: route.upstream.path + "dists/\(dist.suite)/")
        guard let byHash = suites.byHashPath(suiteURL: suite.url, path: dist.relativePath) else { return nil }
        return Array(route.prefix) + Array("dists/\(dist.suite)/\(byHash)".utf8)
    }
}
