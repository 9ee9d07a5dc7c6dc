import HTTPWire
import LarderConfig
import Registries

/// What a mirror does to the answer of one request.
enum MirrorPlan: Equatable {
    /// Passed as it comes (a package file, a path the mirror knows nothing of); only a redirect's
    /// `Location` is mapped back onto the mirror.
    case relay
    /// An index document that names files by absolute upstream URL, or lists versions by date:
    /// collected whole, rewritten (and filtered), then answered with a length and a validator of its own.
    case document(IndexDocument)
    /// A package file of a mirror with `min_release_age`: refused while its `Last-Modified` is younger.
    case ageCheckedFile
    /// A Debian suite's `InRelease` or `Release`: answered as it is, and read (`AptSuites`).
    case aptRelease(AptSuiteLocation)
}

extension MirrorPlan {
    /// A `200` to `GET` is held until whole: a document to rewrite, a release file to read.
    var holdsWholeAnswer: Bool {
        switch self {
        case .document, .aptRelease: return true
        case .relay, .ageCheckedFile: return false
        }
    }
}

/// Where a Debian suite's files are upstream: `https://deb.debian.org/debian/dists/bookworm/`.
struct AptSuiteLocation: Equatable {
    var upstream: MirrorUpstream
    /// `/debian/dists/bookworm/`
    var path: String
    var url: String { "\(upstream.scheme.name)://\(upstream.host):\(upstream.port)\(path)" }
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
    /// Each upstream's URL prefix → the mirror's URL for it (with and without the final `/`:
    /// crates' download template names its prefix without one).
    let urlMap: URLPrefixMap
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

    /// Where the held bytes are counted, and how many this answer holds.
    private let budget: MirrorHoldBudget
    private var reserved = 0

    init(match: MirrorMatch, entry: MirrorTable.Entry, plan: MirrorPlan, publicBase: [UInt8], budget: MirrorHoldBudget) {
        self.budget = budget
        self.match = match
        self.config = entry.config
        self.plan = plan
        self.publicBase = publicBase
        var entries: [URLPrefixMap.Entry] = []
        for route in entry.routes {
            let upstream = String(decoding: route.prefix, as: UTF8.self)
            let mirror = String(decoding: publicBase + route.subpath, as: UTF8.self)
            entries.append(URLPrefixMap.Entry(upstream: upstream, replacement: mirror))
            if route.upstream.path != "/" {
                entries.append(URLPrefixMap.Entry(upstream: String(upstream.dropLast()), replacement: String(mirror.dropLast())))
            }
        }
        urlMap = URLPrefixMap(entries)
        let route = entry.routes[match.route]
        routeUpstreamPath = Array(route.upstream.path.utf8)
        routeBase = publicBase + route.subpath
    }

    deinit { budget.release(reserved) }

    /// Counts `bytes` more held for this answer; false, counting nothing, when the budget is spent.
    func reserve(_ bytes: Int) -> Bool {
        guard budget.reserve(bytes) else { return false }
        reserved += bytes
        return true
    }

    /// The held answer is gone: its bytes leave the budget.
    func releaseHeld() {
        budget.release(reserved)
        reserved = 0
    }

    var isHolding: Bool {
        if case .passing = answer { return false }
        return true
    }
}
