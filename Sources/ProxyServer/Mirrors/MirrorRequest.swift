import HTTPWire
import LarderConfig

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
            let plan = MirrorPlans.plan(entry.config, relativePath: match.relativePath)
            let exchange = MirrorExchange(match: match, entry: entry, plan: plan, publicBase: base)
            prepareUpstreamRequest(exchange, target: target)
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
        case .npmPackage:
            // The abbreviated form carries no dates.
            context.request.headers.removeFields(named: "accept")
            context.request.headers.appendField(name: "Accept", value: Array("application/json".utf8))
        case .pypiJSON, .cratesConfig:
            break
        }
    }
}

/// Which answers of a mirror are documents to rewrite and which are files.
enum MirrorPlans {
    static func plan(_ config: MirrorConfig, relativePath path: [UInt8]) -> MirrorPlan {
        let text = String(decoding: path, as: UTF8.self)
        let aged = config.minReleaseAge != nil
        switch config.kind {
        case .pypi:
            if text.hasPrefix("simple/") { return .document(.pypiSimple) }
            if text.hasPrefix("pypi/"), text.hasSuffix("/json") { return .document(.pypiJSON) }
            if text.hasPrefix("files/") || text.contains("/packages/") { return aged ? .ageCheckedFile : .relay }
        case .npm:
            if text.contains("/-/") { return aged ? .ageCheckedFile : .relay }
            if !text.isEmpty, !text.hasPrefix("-/") { return .document(.npmPackage) }
        case .crates:
            if text == "config.json" { return .document(.cratesConfig) }
        case .debian, .go, .maven, .rubygems, .plain:
            break
        }
        return .relay
    }
}
