import Testing
@testable import ProxyServer

/// `DetachedFetchMachine` driven without sockets, a worker or a budget: each scenario lists the
/// events of one fetch with no client attached (the budget's answers among them) and the action the
/// machine answers to each, written out. Every purpose is here: a download left to its followers
/// (or handed over to them), an aborted download finished, a range fill and a background refresh.
/// Each scenario also checks that every claim the fetch held is released, once, by the time it ends.
@Suite struct DetachedFetchMachineTests {
    typealias Machine = DetachedFetchMachine
    typealias Download = DetachedFetchMachine.Download
    static let step = DetachedFetchRule.claimStep

    enum Event: Sendable, CustomStringConvertible {
        case refreshStarted(canAsk: Bool)
        case takenOver(Download)
        case granted(Int)
        case refused(DetachedFetchLedger.Refusal)
        case grew
        case notGrown(DetachedFetchLedger.Refusal)
        case refreshAnswered(newDownload: Bool)
        case led(Download)
        case body(Download)
        case originEnded(refetch: Bool)
        case clientLeft(worthFinishing: Bool)
        case cancelled

        var description: String {
            switch self {
            case .refreshStarted(let canAsk): return "refresh started\(canAsk ? "" : " unable to ask")"
            case .takenOver: return "taken over"
            case .granted(let id): return "granted #\(id)"
            case .refused(let limit): return "refused by \(limit.description)"
            case .grew: return "grew"
            case .notGrown(let limit): return "not grown: \(limit.description)"
            case .refreshAnswered(let new): return "refresh answered\(new ? ", new download" : "")"
            case .led: return "led"
            case .body: return "body"
            case .originEnded(let refetch): return "origin ended\(refetch ? ", refetch" : "")"
            case .clientLeft(let worth): return "client left\(worth ? ", worth finishing" : "")"
            case .cancelled: return "cancelled"
            }
        }
    }

    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var purpose: Machine.Purpose
        /// A hand-over's claim, taken before the fetch was made.
        var claim: Int? = nil
        var steps: [(Event, String)]
        var testDescription: String { name }
    }

    /// A download as the shell reads it: no followers, stored, `body` of `announced` bytes in.
    static func d(followers: Bool = false, storing: Bool = true, body: Int = 0, of announced: Int? = 100,
                  worth: Bool = false) -> Download {
        Download(hasFollowers: followers, storing: storing, bodyLength: body, announcedLength: announced,
                 worthFinishing: worth)
    }

    static let followed = d(followers: true, body: 10)

    static func describe(_ action: Machine.Action) -> String {
        func ending(_ e: Machine.Ending) -> String {
            (e.releasing.map { " releasing #\($0)" } ?? "") + (e.refusedBy.map { " (\($0.description))" } ?? "")
        }
        switch action {
        case .none: return "nothing"
        case .resumeRead: return "resume read"
        case .passBody: return "pass body"
        case .dropBody: return "drop body"
        case .claim(let bytes): return "claim \(bytes)"
        case .grow(let id, let bytes): return "grow #\(id) by \(bytes)"
        case .ask(.revalidation): return "ask revalidation"
        case .ask(.wholeResponse): return "ask whole response"
        case .lead(let releasing): return "lead" + (releasing.map { " releasing #\($0)" } ?? "")
        case .cut(let e): return "cut" + ending(e)
        case .endRefresh(let e): return "end refresh" + ending(e)
        case .finish(let releasing): return "finish" + (releasing.map { " releasing #\($0)" } ?? "")
        }
    }

    static func apply(_ event: Event, to m: inout Machine) -> Machine.Action {
        switch event {
        case .refreshStarted(let canAsk): return m.refreshStarted(canAsk: canAsk)
        case .takenOver(let d): return m.takenOver(d)
        case .granted(let id): return m.claimAnswered(.success(id))
        case .refused(let limit): return m.claimAnswered(.failure(limit))
        case .grew: return m.grewClaim(refusedBy: nil)
        case .notGrown(let limit): return m.grewClaim(refusedBy: limit)
        case .refreshAnswered(let new): return m.refreshAnswered(newDownload: new)
        case .led(let d): return m.led(d)
        case .body(let d): return m.bodyArrived(d)
        case .originEnded(let refetch): return m.originEnded(refetch: refetch)
        case .clientLeft(let worth): return m.clientLeft(worthFinishing: worth)
        case .cancelled: return m.cancelled()
        }
    }

    static let scenarios: [Scenario] = [
        // Followers: a download whose client left while others read it.
        Scenario(name: "followers read on: the read resumes and every body passes, with no claim",
                 purpose: .followers,
                 steps: [(.takenOver(followed), "resume read"), (.body(followed), "pass body"),
                         (.originEnded(refetch: false), "finish")]),
        Scenario(name: "the last follower leaves a download not worth finishing: cut as its client's abort",
                 purpose: .followers,
                 steps: [(.takenOver(followed), "resume read"), (.body(d(body: 10)), "cut"),
                         (.body(d(body: 10)), "drop body"), (.originEnded(refetch: false), "nothing")]),
        Scenario(name: "the last follower leaves a download mostly in: it claims the rest and is finished",
                 purpose: .followers,
                 steps: [(.takenOver(followed), "resume read"), (.body(d(body: 95, worth: true)), "claim 5"),
                         (.granted(7), "pass body"), (.body(d(body: 98, worth: true)), "pass body"),
                         (.originEnded(refetch: false), "finish releasing #7")]),
        Scenario(name: "no room for the rest once the followers left: cut, and the limit said",
                 purpose: .followers,
                 steps: [(.takenOver(followed), "resume read"), (.body(d(body: 95, worth: true)), "claim 5"),
                         (.refused(.bytesPerClient), "cut (limits.detached_bytes_per_client)")]),
        Scenario(name: "a hand-over's claim is kept while followers read and released at the end",
                 purpose: .followers, claim: 3,
                 steps: [(.takenOver(followed), "resume read"), (.body(followed), "pass body"),
                         (.originEnded(refetch: false), "finish releasing #3")]),
        Scenario(name: "a hand-over whose followers all leave early is cut, claim or not",
                 purpose: .followers, claim: 3,
                 steps: [(.takenOver(followed), "resume read"), (.body(d(body: 10)), "cut releasing #3")]),
        Scenario(name: "taken over with nobody left to read it: judged at once",
                 purpose: .followers,
                 steps: [(.takenOver(d(body: 10)), "cut")]),

        // Finishing: an aborted download mostly in.
        Scenario(name: "an aborted download mostly in claims the rest at once, then reads on",
                 purpose: .finishing,
                 steps: [(.takenOver(d(body: 90, worth: true)), "claim 10"), (.granted(1), "resume read"),
                         (.body(d(body: 95, worth: true)), "pass body"), (.originEnded(refetch: false), "finish releasing #1")]),
        Scenario(name: "an aborted download refused room is cut before it reads on",
                 purpose: .finishing,
                 steps: [(.takenOver(d(body: 90, worth: true)), "claim 10"),
                         (.refused(.fetchesPerClient), "cut (limits.detached_fetches_per_client)"),
                         (.cancelled, "nothing")]),
        Scenario(name: "followers joining an aborted download: it reads on for them, its claim kept",
                 purpose: .finishing,
                 steps: [(.takenOver(d(body: 90, worth: true)), "claim 10"), (.granted(1), "resume read"),
                         (.body(d(followers: true, body: 95, worth: true)), "pass body"),
                         (.originEnded(refetch: false), "finish releasing #1")]),
        Scenario(name: "a store given up leaves nothing to finish",
                 purpose: .finishing,
                 steps: [(.takenOver(d(body: 90, worth: true)), "claim 10"), (.granted(1), "resume read"),
                         (.body(d(storing: false, body: 95)), "cut releasing #1")]),
        Scenario(name: "a finishing download ignores a connection closing",
                 purpose: .finishing,
                 steps: [(.takenOver(d(body: 90, worth: true)), "claim 10"), (.granted(1), "resume read"),
                         (.clientLeft(worthFinishing: false), "nothing"), (.originEnded(refetch: false), "finish releasing #1")]),

        // Range fill: the whole response past a ranged miss's range.
        Scenario(name: "a range fill claims the rest and goes on while its client's connection is open",
                 purpose: .rangeFill,
                 steps: [(.takenOver(d(body: 1_000, of: 10_000)), "claim 9000"), (.granted(4), "resume read"),
                         (.body(d(body: 2_000, of: 10_000)), "pass body"), (.originEnded(refetch: false), "finish releasing #4")]),
        Scenario(name: "a range fill whose client leaves before most is in is cut as an abort",
                 purpose: .rangeFill,
                 steps: [(.takenOver(d(body: 1_000, of: 10_000)), "claim 9000"), (.granted(4), "resume read"),
                         (.clientLeft(worthFinishing: false), "cut releasing #4"),
                         (.clientLeft(worthFinishing: false), "nothing")]),
        Scenario(name: "a range fill whose client leaves once most is in goes on",
                 purpose: .rangeFill,
                 steps: [(.takenOver(d(body: 1_000, of: 10_000)), "claim 9000"), (.granted(4), "resume read"),
                         (.clientLeft(worthFinishing: true), "nothing"), (.body(d(body: 9_500, of: 10_000)), "pass body"),
                         (.originEnded(refetch: false), "finish releasing #4")]),
        Scenario(name: "a range fill of unknown length claims a step ahead and grows as it passes it",
                 purpose: .rangeFill,
                 steps: [(.takenOver(d(body: 10, of: nil)), "claim \(step)"), (.granted(2), "resume read"),
                         (.body(d(body: step - 1, of: nil)), "pass body"),
                         (.body(d(body: step + 10, of: nil)), "grow #2 by \(step)"), (.grew, "pass body"),
                         (.body(d(body: 2 * step - 1, of: nil)), "pass body"),
                         (.body(d(body: 2 * step + 10, of: nil)), "grow #2 by \(step)"),
                         (.notGrown(.bytes), "cut releasing #2 (limits.detached_bytes)")]),

        // Refresh: stale-while-revalidate.
        Scenario(name: "a refresh that finds the entry unchanged: a place held while it asks, the answer dropped",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"), (.granted(5), "ask revalidation"),
                         (.refreshAnswered(newDownload: false), "nothing"), (.body(d()), "drop body"),
                         (.originEnded(refetch: false), "end refresh releasing #5")]),
        Scenario(name: "a refresh that cannot ask (offline, nothing to revalidate with) ends at once",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: false), "end refresh"), (.cancelled, "nothing")]),
        Scenario(name: "a refresh refused a place sends nothing",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"),
                         (.refused(.fetches), "end refresh (limits.detached_fetches)")]),
        Scenario(name: "a HEAD that finds a change asks for the whole response, which is then led as a download",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"), (.granted(5), "ask revalidation"),
                         (.refreshAnswered(newDownload: false), "nothing"), (.originEnded(refetch: true), "ask whole response"),
                         (.refreshAnswered(newDownload: true), "lead releasing #5"), (.led(d()), "claim 100"),
                         (.granted(6), "nothing"), (.body(d(body: 50)), "pass body"),
                         (.originEnded(refetch: false), "finish releasing #6")]),
        Scenario(name: "a changed response that requests now follow reads on for them without a claim",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"), (.granted(5), "ask revalidation"),
                         (.refreshAnswered(newDownload: true), "lead releasing #5"), (.led(followed), "nothing"),
                         (.body(followed), "pass body"), (.originEnded(refetch: false), "finish")]),
        Scenario(name: "a changed response refused room is cut",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"), (.granted(5), "ask revalidation"),
                         (.refreshAnswered(newDownload: true), "lead releasing #5"), (.led(d()), "claim 100"),
                         (.refused(.bytes), "cut (limits.detached_bytes)")]),
        Scenario(name: "a changed response nobody stores or follows is cut",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"), (.granted(5), "ask revalidation"),
                         (.refreshAnswered(newDownload: true), "lead releasing #5"), (.led(d(storing: false)), "cut")]),
        Scenario(name: "a refresh that fails leaves the entry as it was",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"), (.granted(5), "ask revalidation"),
                         (.originEnded(refetch: false), "end refresh releasing #5"), (.originEnded(refetch: false), "nothing")]),
        Scenario(name: "a refresh cancelled while it asks is cut with its place released; later news does nothing",
                 purpose: .refresh,
                 steps: [(.refreshStarted(canAsk: true), "claim 0"), (.granted(5), "ask revalidation"),
                         (.cancelled, "cut releasing #5"), (.body(d()), "drop body"),
                         (.refreshAnswered(newDownload: true), "nothing"), (.originEnded(refetch: false), "nothing")]),

        // Any purpose.
        Scenario(name: "cancelled by its worker: cut with its claim, once",
                 purpose: .followers, claim: 9,
                 steps: [(.takenOver(followed), "resume read"), (.cancelled, "cut releasing #9"), (.cancelled, "nothing")]),
    ]

    @Test(arguments: scenarios) func fetch(_ scenario: Scenario) {
        var machine = Machine(purpose: scenario.purpose, claim: scenario.claim)
        // Claims held, as the budget would count them: every one granted is released once.
        var held = Set(scenario.claim.map { [$0] } ?? [])
        for (i, (event, expected)) in scenario.steps.enumerated() {
            if case .granted(let id) = event { held.insert(id) }
            let action = Self.apply(event, to: &machine)
            let answer = Self.describe(action)
            #expect(answer == expected, "step \(i): \(event) answered \"\(answer)\", expected \"\(expected)\"")
            let released: Int?
            switch action {
            case .lead(let id), .finish(let id): released = id
            case .cut(let e), .endRefresh(let e): released = e.releasing
            default: released = nil
            }
            if let id = released { #expect(held.remove(id) != nil, "step \(i): #\(id) released twice or never held") }
        }
        if machine.phase == .finished {
            #expect(held.isEmpty, "claims left held at the end: \(held.sorted())")
            #expect(machine.claim == nil)
        } else {
            #expect(held == Set(machine.claim.map { [$0] } ?? []), "the claims held are the machine's")
        }
    }
}
