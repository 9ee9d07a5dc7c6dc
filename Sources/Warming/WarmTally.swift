import Statistics

/// What a warm run has done so far: counts by outcome, body bytes, and the reasons of what was
/// not stored or failed (bounded, so a list of a million bad lines costs little).
public struct WarmTally: Sendable, Equatable {
    public var total = 0
    public var stored = 0
    public var fresh = 0
    public var revalidated = 0
    public var notStored = 0
    public var failed = 0
    /// Response body bytes read.
    public var bytes: Int64 = 0
    /// Reasons with how often each came up, in order of first appearance.
    public private(set) var failureReasons: [ReasonCount] = []
    public private(set) var notStoredReasons: [ReasonCount] = []
    /// The first failed URLs with their reasons.
    public private(set) var failedExamples: [Example] = []

    /// Distinct reasons kept per kind; later ones are counted as "other reasons".
    public static let maxReasons = 20
    /// Failed URLs listed by name.
    public static let maxExamples = 20

    public struct ReasonCount: Sendable, Equatable {
        public let reason: String
        public var count: Int
    }

    public struct Example: Sendable, Equatable {
        public let url: String
        public let reason: String
    }

    public init(total: Int = 0) { self.total = total }

    /// URLs answered or failed so far.
    public var done: Int { stored + fresh + revalidated + notStored + failed }
    public var isComplete: Bool { done >= total }

    public mutating func record(_ outcome: WarmOutcome, url: String, bytes: Int = 0) {
        self.bytes += Int64(bytes)
        switch outcome {
        case .stored: stored += 1
        case .fresh: fresh += 1
        case .revalidated: revalidated += 1
        case .notStored(let why):
            notStored += 1
            Self.count(why, in: &notStoredReasons)
        case .failed(let why):
            failed += 1
            Self.count(why, in: &failureReasons)
            if failedExamples.count < Self.maxExamples { failedExamples.append(Example(url: url, reason: why)) }
        }
    }

    private static func count(_ reason: String, in list: inout [ReasonCount]) {
        if let i = list.firstIndex(where: { $0.reason == reason }) {
            list[i].count += 1
        } else if list.count < maxReasons {
            list.append(ReasonCount(reason: reason, count: 1))
        } else if let i = list.firstIndex(where: { $0.reason == "other reasons" }) {
            list[i].count += 1
        } else {
            list[list.count - 1] = ReasonCount(reason: "other reasons", count: list[list.count - 1].count + 1)
        }
    }

    /// The closing report: one line of counts, then reasons and failed URLs, indented.
    public func summary(seconds: Double) -> String {
        var out = "warmed \(done) of \(total) URLs in \(WarmFormat.duration(seconds)): \(stored) stored, "
            + "\(fresh) already fresh, \(revalidated) revalidated, \(notStored) not stored, \(failed) failed; "
            + "\(WarmFormat.bytes(bytes)) (\(WarmFormat.bytes(Int64(Double(bytes) / max(seconds, 0.001))))/s)\n"
        if !notStoredReasons.isEmpty {
            out += "not stored:\n"
            for r in notStoredReasons { out += "  \(r.count) × \(r.reason)\n" }
        }
        if !failureReasons.isEmpty {
            out += "failed:\n"
            for r in failureReasons { out += "  \(r.count) × \(r.reason)\n" }
            out += "failed URLs\(failed > failedExamples.count ? " (the first \(failedExamples.count))" : ""):\n"
            for e in failedExamples { out += "  \(e.url): \(e.reason)\n" }
        }
        return out
    }

    /// The counts as JSON object members (no braces), for `/stats`.
    public func jsonMembers() -> String {
        func reasons(_ list: [ReasonCount]) -> String {
            "[" + list.map { "{\"reason\":\(jsonString($0.reason)),\"count\":\($0.count)}" }
                .joined(separator: ",") + "]"
        }
        return "\"total\":\(total),\"done\":\(done),\"stored\":\(stored),\"fresh\":\(fresh),"
            + "\"revalidated\":\(revalidated),\"not_stored\":\(notStored),\"failed\":\(failed),\"bytes\":\(bytes),"
            + "\"not_stored_reasons\":\(reasons(notStoredReasons)),\"failure_reasons\":\(reasons(failureReasons)),"
            + "\"failed_urls\":[" + failedExamples.map {
                "{\"url\":\(jsonString($0.url)),\"reason\":\(jsonString($0.reason))}"
            }.joined(separator: ",") + "]"
    }
}
