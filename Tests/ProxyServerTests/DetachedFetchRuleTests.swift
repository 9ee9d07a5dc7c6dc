import Testing
@testable import ProxyServer

/// When a download nobody reads goes on for the store alone, and what it claims in the detached
/// budget first: every case of `DetachedFetchRule`, the one decision behind downloads left running
/// for followers, aborted downloads finished, range fills and background refreshes.
@Suite struct DetachedFetchRuleTests {
    typealias Facts = DetachedFetchRule.Facts
    static let step = DetachedFetchRule.claimStep

    static func facts(storing: Bool = true, body: Int = 0, announced: Int? = nil, claimed: Bool = false,
                      upTo: Int? = nil, abort: Bool = false, worth: Bool = false) -> Facts {
        Facts(storing: storing, bodyLength: body, announcedLength: announced, claimed: claimed, claimedUpTo: upTo,
              judgedAsAbort: abort, worthFinishing: worth)
    }

    static let cases: [(String, Facts, DetachedFetchRule.Decision)] = [
        ("a store given up has nothing to go on for", facts(storing: false, announced: 100), .stop),
        ("a store given up stops even with a claim", facts(storing: false, claimed: true), .stop),
        ("a known length claims what is still to come", facts(body: 30, announced: 100), .claim(bytes: 70, coversUpTo: nil)),
        ("a body already complete claims nothing", facts(body: 100, announced: 100), .claim(bytes: 0, coversUpTo: nil)),
        ("an unknown length claims a step ahead", facts(body: 10), .claim(bytes: step, coversUpTo: 10 + step)),
        ("a claim for the whole body needs nothing more", facts(body: 50, announced: 100, claimed: true), .goOn),
        ("within the step claimed, it goes on", facts(body: step - 1, claimed: true, upTo: step), .goOn),
        ("past the step claimed, it grows", facts(body: step, claimed: true, upTo: step), .grow(bytes: step)),
        ("followers gone from a download not worth finishing: an abort",
         facts(body: 10, announced: 100, abort: true), .stop),
        ("followers gone from a download mostly in: finished like an abort would be",
         facts(body: 95, announced: 100, abort: true, worth: true), .claim(bytes: 5, coversUpTo: nil)),
        ("a judged abort is stopped even with a claim (a hand-over's)",
         facts(body: 10, announced: 100, claimed: true, abort: true), .stop),
        ("a judged abort worth finishing goes on with its claim",
         facts(body: 95, announced: 100, claimed: true, abort: true, worth: true), .goOn),
    ]

    @Test(arguments: cases.indices)
    func decides(_ i: Int) {
        let (what, facts, expected) = Self.cases[i]
        #expect(DetachedFetchRule.decide(facts) == expected, "\(what)")
    }
}
