import HTTPWire
import LarderConfig

/// What a mirror does to the answer of one request.
enum MirrorPlan: Equatable {
    /// Passed as it comes (a package file, a path the mirror knows nothing of); only a redirect's
    /// `Location` is mapped back onto the mirror.
    case relay
    /// An index document that names files by absolute upstream URL, or lists versions by date:
    /// collected whole, rewritten (and filtered), then answered with a length and a validator of its own.
    case document(RegistryDocument)
    /// A package file of a mirror with `min_release_age`: refused while its `Last-Modified` is younger.
    case ageCheckedFile
}

/// The documents a mirror rewrites.
enum RegistryDocument: Equatable {
    /// `/simple/NAME/`: PEP 503 HTML or PEP 691 JSON, by `Content-Type`.
    case pypiSimple
    /// `/pypi/NAME/json`: the JSON API.
    case pypiJSON
    /// An npm package document, full or abbreviated.
    case npmPackage
    /// The crates.io sparse index's `config.json`.
    case cratesConfig
}

/// The mirror's part in one request: which mirror, what it does to the answer, and (while a
/// document is collected) the answer held back until it is whole.
final class MirrorExchange {
    let match: MirrorMatch
    let config: MirrorConfig
    let plan: MirrorPlan
    /// `http://HOST[:PORT]/pypi/`: where the client reached the mirror, from its own `Host`
    /// (for a captured forward request, the upstream's own URL: nothing is rewritten).
    /// Documents are rewritten for each answer, never stored rewritten, so one client's `Host`
    /// can only ever reach that client.
    let publicBase: [UInt8]
    /// upstream prefix → the mirror's URL for it, longest first, neither ending in `/`.
    let urlMap: [(upstream: [UInt8], mirror: [UInt8])]
    /// The path of the upstream this request went to, and the mirror's URL for it: a redirect
    /// to `/simple/six/` from `https://pypi.org/` is `http://HOST/pypi/simple/six/`.
    let routeUpstreamPath: [UInt8]
    let routeBase: [UInt8]
    /// The client's `If-None-Match`, kept back from the upstream: it names this mirror's validator.
    var clientValidators: [UInt8]?
    /// The client asked for PyPI's HTML form while the mirror fetched the JSON one (dates are only there).
    var clientWantsHTML = false

    /// A held-back answer.
    struct Held {
        var head: ResponseHead
        var storedAge: Int64?
        var cacheStatus: CacheStatusField
        var sharedWithout: [[UInt8]]?
        var body: [UInt8] = []
    }
    enum Answer {
        /// Nothing held: bytes go to the client as they come.
        case passing
        case holding(Held)
        /// Refused once its head was seen (a file too young): the body is dropped, then the refusal written.
        case refusing(status: Int, reason: String)
    }
    var answer = Answer.passing

    /// A document is collected whole before it is rewritten; a bigger one is refused rather than
    /// held in memory (PyPI's and npm's largest indexes are a few tens of MB).
    static let maxDocumentBytes = 64 << 20

    init(match: MirrorMatch, entry: MirrorTable.Entry, plan: MirrorPlan, publicBase: [UInt8]) {
        self.match = match
        self.config = entry.config
        self.plan = plan
        self.publicBase = publicBase
        var map: [(upstream: [UInt8], mirror: [UInt8])] = entry.routes.map { route in
            (Array(route.prefix.dropLast()), Array((publicBase + route.subpath).dropLast()))
        }
        map.sort { $0.upstream.count > $1.upstream.count }
        urlMap = map
        let route = entry.routes[match.route]
        routeUpstreamPath = Array(route.upstream.path.utf8)
        routeBase = publicBase + route.subpath
    }

    var isHolding: Bool {
        if case .passing = answer { return false }
        return true
    }
}
