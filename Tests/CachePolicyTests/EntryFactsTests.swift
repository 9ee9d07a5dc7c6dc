import Testing
import HTTPWire
import CachePolicy

struct FreshnessRow: Sendable, CustomTestStringConvertible {
    var name: String
    var fields: [String]
    var status: Int = 200
    var responseTime: Int64 = t0
    var settings = PolicySettings()
    var override: FreshnessOverride?
    var lifetime: Int64
    var heuristic: Bool
    var testDescription: String { name }
}

struct AgeRow: Sendable, CustomTestStringConvertible {
    var name: String
    var fields: [String]
    var requestTime: Int64
    var responseTime: Int64
    var correctedInitialAge: Int64
    var dateValue: Int64
    var now: Int64
    var currentAge: Int64
    var testDescription: String { name }
}

struct ClockRow: Sendable, CustomTestStringConvertible {
    var name: String
    var now: Int64
    var fresh: Bool
    var ttl: Int64
    var testDescription: String { name }
}

struct FactsRow: Sendable, CustomTestStringConvertible {
    var name: String
    var fields: [String]
    var bodyLength: Int?
    var check: @Sendable (EntryFacts) -> Bool
    var testDescription: String { name }
}

enum FreshnessTable {
    static func row(_ name: String, _ fields: [String], status: Int = 200, responseTime: Int64 = t0,
                    settings: PolicySettings = PolicySettings(), override: FreshnessOverride? = nil,
                    lifetime: Int64, heuristic: Bool = false) -> FreshnessRow {
        FreshnessRow(name: name, fields: fields, status: status, responseTime: responseTime, settings: settings,
                     override: override, lifetime: lifetime, heuristic: heuristic)
    }

    static let date = "Date: \(Dates.t0)"
    static let halfCap: PolicySettings = {
        var s = PolicySettings()
        s.heuristicFraction = 0.5
        s.heuristicCap = 100
        return s
    }()

    static let rows: [FreshnessRow] = [
        row("RFC9111 4.2.1 max-age", [date, "Cache-Control: max-age=60"], lifetime: 60),
        row("RFC9111 4.2.1 max-age=0 is stale at once", [date, "Cache-Control: max-age=0"], lifetime: 0),
        row("RFC9111 4.2.1 s-maxage wins over max-age", [date, "Cache-Control: max-age=60, s-maxage=30"], lifetime: 30),
        row("RFC9111 4.2.1 s-maxage wins over a larger max-age in another field",
            [date, "Cache-Control: s-maxage=300", "Cache-Control: max-age=60"], lifetime: 300),
        row("RFC9111 4.2.1 max-age wins over Expires", [date, "Expires: \(Dates.plus3600)", "Cache-Control: max-age=60"],
            lifetime: 60),
        row("RFC9111 4.2.1 s-maxage wins over Expires", [date, "Expires: \(Dates.plus3600)", "Cache-Control: s-maxage=10"],
            lifetime: 10),
        row("RFC9111 4.2.1 Expires minus Date", [date, "Expires: \(Dates.plus3600)"], lifetime: 3600),
        row("RFC9111 4.2.1 Expires minus Date, Date in the past",
            ["Date: \(Dates.minus1000)", "Expires: \(Dates.plus1000)"], lifetime: 2000),
        row("RFC9111 4.2.1 Expires without Date uses response_time", ["Expires: \(Dates.plus3600)"], responseTime: t0 + 100,
            lifetime: 3500),
        row("RFC9111 4.2.1 Expires with an invalid Date uses response_time",
            ["Date: yesterday", "Expires: \(Dates.plus3600)"], responseTime: t0 + 100, lifetime: 3500),
        row("RFC9111 4.2.1 Expires in the past is stale", [date, "Expires: \(Dates.minus1000)"], lifetime: 0),
        row("RFC9111 4.2.1 Expires equal to Date is stale", [date, "Expires: \(Dates.t0)"], lifetime: 0),
        row("RFC9111 5.3 Expires: 0 is already expired", [date, "Expires: 0"], lifetime: 0),
        row("RFC9111 5.3 invalid Expires is already expired", [date, "Expires: tomorrow"], lifetime: 0),
        row("RFC9111 5.3 invalid Expires blocks the heuristic",
            [date, "Expires: -1", "Last-Modified: \(Dates.minus10Days)"], lifetime: 0),
        row("RFC9111 4.2.1 Expires in RFC 850 form", [date, "Expires: Tuesday, 14-Nov-23 23:13:20 GMT"], lifetime: 3600),
        row("RFC9111 4.2.1 Expires in asctime form", [date, "Expires: Tue Nov 14 23:13:20 2023"], lifetime: 3600),
        row("RFC9111 4.2.1 two differing Expires are stale",
            [date, "Expires: \(Dates.plus3600)", "Expires: \(Dates.plus1Day)"], lifetime: 0),
        row("RFC9111 4.2.1 two identical Expires count once",
            [date, "Expires: \(Dates.plus3600)", "Expires: \(Dates.plus3600)"], lifetime: 3600),
        row("RFC9111 4.2.1 conflicting max-age is stale", [date, "Cache-Control: max-age=60, max-age=120"], lifetime: 0),
        row("RFC9111 4.2.1 invalid max-age is stale even with Expires",
            [date, "Cache-Control: max-age=soon", "Expires: \(Dates.plus3600)"], lifetime: 0),
        row("RFC9111 4.2.1 invalid s-maxage is stale even with max-age",
            [date, "Cache-Control: s-maxage=x, max-age=60"], lifetime: 0),
        row("RFC9111 4.2.2 heuristic: 10% of Date minus Last-Modified",
            [date, "Last-Modified: \(Dates.minus1000)"], lifetime: 100, heuristic: true),
        row("RFC9111 4.2.2 heuristic capped at one day",
            [date, "Last-Modified: \(Dates.minus30Days)"], lifetime: 86_400, heuristic: true),
        row("RFC9111 4.2.2 heuristic just under the cap",
            [date, "Last-Modified: \(Dates.minus10Days)"], lifetime: 86_400, heuristic: true),
        row("RFC9111 4.2.2 heuristic fraction and cap from settings",
            [date, "Last-Modified: \(Dates.minus60)"], settings: halfCap, lifetime: 30, heuristic: true),
        row("RFC9111 4.2.2 heuristic cap from settings applies",
            [date, "Last-Modified: \(Dates.minus1000)"], settings: halfCap, lifetime: 100, heuristic: true),
        row("RFC9111 4.2.2 heuristic without Date uses response_time",
            ["Last-Modified: \(Dates.minus1000)"], responseTime: t0 + 1000, lifetime: 200, heuristic: true),
        row("RFC9111 4.2.2 Last-Modified after Date gives nothing",
            [date, "Last-Modified: \(Dates.plus1000)"], lifetime: 0, heuristic: true),
        row("RFC9111 4.2.2 heuristic for 404", [date, "Last-Modified: \(Dates.minus1000)"], status: 404,
            lifetime: 100, heuristic: true),
        row("RFC9111 4.2.2 heuristic for 301", [date, "Last-Modified: \(Dates.minus1000)"], status: 301,
            lifetime: 100, heuristic: true),
        row("RFC9111 4.2.2 no heuristic for 302", [date, "Last-Modified: \(Dates.minus1000)"], status: 302, lifetime: 0),
        row("RFC9111 4.2.2 no heuristic for 500", [date, "Last-Modified: \(Dates.minus1000)"], status: 500, lifetime: 0),
        row("RFC9111 4.2.2 public allows the heuristic for 302",
            [date, "Last-Modified: \(Dates.minus1000)", "Cache-Control: public"], status: 302, lifetime: 100, heuristic: true),
        row("RFC9111 4.2.2 invalid Last-Modified: no heuristic", [date, "Last-Modified: last week"], lifetime: 0),
        row("RFC9111 4.2.2 nothing explicit, no Last-Modified: 0", [date], lifetime: 0),
        row("rule defaultLifetime without explicit freshness or Last-Modified",
            [date], override: FreshnessOverride(defaultLifetime: 300), lifetime: 300, heuristic: true),
        row("rule defaultLifetime not used with Last-Modified",
            [date, "Last-Modified: \(Dates.minus1000)"], override: FreshnessOverride(defaultLifetime: 300),
            lifetime: 100, heuristic: true),
        row("rule defaultLifetime not used with explicit max-age",
            [date, "Cache-Control: max-age=10"], override: FreshnessOverride(defaultLifetime: 300), lifetime: 10),
        row("rule defaultLifetime not used with invalid Expires",
            [date, "Expires: 0"], override: FreshnessOverride(defaultLifetime: 300), lifetime: 0),
        row("rule defaultLifetime not for a status without heuristics",
            [date], status: 302, override: FreshnessOverride(defaultLifetime: 300), lifetime: 0),
        row("rule forcedLifetime replaces max-age",
            [date, "Cache-Control: max-age=10"], override: FreshnessOverride(forcedLifetime: 500), lifetime: 500),
        row("rule forcedLifetime replaces the heuristic",
            [date, "Last-Modified: \(Dates.minus1000)"], override: FreshnessOverride(forcedLifetime: 500), lifetime: 500),
        row("rule forcedLifetime replaces conflicting freshness",
            [date, "Cache-Control: max-age=1, max-age=2"], override: FreshnessOverride(forcedLifetime: 500), lifetime: 500),
        row("rule forcedLifetime never for no-cache",
            [date, "Cache-Control: max-age=10, no-cache"], override: FreshnessOverride(forcedLifetime: 500), lifetime: 10),
        row("rule maximumLifetime caps max-age",
            [date, "Cache-Control: max-age=1000"], override: FreshnessOverride(maximumLifetime: 100), lifetime: 100),
        row("rule maximumLifetime leaves shorter lifetimes",
            [date, "Cache-Control: max-age=10"], override: FreshnessOverride(maximumLifetime: 100), lifetime: 10),
        row("rule maximumLifetime caps forcedLifetime",
            [date], override: FreshnessOverride(forcedLifetime: 500, maximumLifetime: 100), lifetime: 100),
        row("rule maximumLifetime caps defaultLifetime",
            [date], override: FreshnessOverride(maximumLifetime: 100, defaultLifetime: 300), lifetime: 100, heuristic: true),
        row("rule maximumLifetime caps the heuristic",
            [date, "Last-Modified: \(Dates.minus30Days)"], override: FreshnessOverride(maximumLifetime: 60),
            lifetime: 60, heuristic: true),
    ]
}

enum AgeTable {
    static func row(_ name: String, _ fields: [String], request: Int64 = t0, response: Int64 = t0,
                    initial: Int64, date: Int64 = t0, now: Int64, age: Int64) -> AgeRow {
        AgeRow(name: name, fields: fields, requestTime: request, responseTime: response, correctedInitialAge: initial,
               dateValue: date, now: now, currentAge: age)
    }

    static let date = "Date: \(Dates.t0)"

    static let rows: [AgeRow] = [
        row("RFC9111 4.2.3 all times equal: age 0", [date], initial: 0, now: t0, age: 0),
        row("RFC9111 4.2.3 resident_time = now - response_time", [date], initial: 0, now: t0 + 10, age: 10),
        row("RFC9111 4.2.3 apparent_age = response_time - date_value", ["Date: \(Dates.minus30)"], initial: 30,
            date: t0 - 30, now: t0, age: 30),
        row("RFC9111 4.2.3 apparent_age never negative (Date in the future)", ["Date: \(Dates.plus30)"], initial: 0,
            date: t0 + 30, now: t0 + 5, age: 5),
        row("RFC9111 4.2.3 response_delay = response_time - request_time", [date], request: t0 - 5, initial: 5,
            now: t0, age: 5),
        row("RFC9111 4.2.3 corrected_age_value = Age + response_delay", [date, "Age: 100"], request: t0 - 5,
            initial: 105, now: t0, age: 105),
        row("RFC9111 4.2.3 Age alone", [date, "Age: 100"], initial: 100, now: t0 + 20, age: 120),
        row("RFC9111 4.2.3 corrected_initial_age: apparent age larger than Age", ["Date: \(Dates.minus30)", "Age: 10"],
            initial: 30, date: t0 - 30, now: t0, age: 30),
        row("RFC9111 4.2.3 corrected_initial_age: Age larger than apparent age", ["Date: \(Dates.minus30)", "Age: 50"],
            initial: 50, date: t0 - 30, now: t0, age: 50),
        row("RFC9111 4.2.3 delay and apparent age: the larger", ["Date: \(Dates.minus30)", "Age: 20"], request: t0 - 15,
            initial: 35, date: t0 - 30, now: t0, age: 35),
        row("RFC9111 4.2.3 every term", ["Date: \(Dates.minus60)", "Age: 70"], request: t0 - 4, response: t0,
            initial: 74, date: t0 - 60, now: t0 + 26, age: 100),
        row("RFC9111 4.2.3 missing Date: date_value = response_time", ["Age: 3"], request: t0 + 7, response: t0 + 7, initial: 3,
            date: t0 + 7, now: t0 + 7, age: 3),
        row("RFC9111 4.2.3 invalid Date: date_value = response_time", ["Date: never"], request: t0 + 7, response: t0 + 7, initial: 0,
            date: t0 + 7, now: t0 + 9, age: 2),
        row("RFC9111 5.1 invalid Age ignored", [date, "Age: abc"], initial: 0, now: t0, age: 0),
        row("RFC9111 5.1 negative Age ignored", [date, "Age: -5"], request: t0 - 2, initial: 2, now: t0, age: 2),
        row("RFC9111 5.1 Age list: the first member", [date, "Age: 7200, 0"], initial: 7200, now: t0, age: 7200),
        row("RFC9111 5.1 Age list: the first member even when smaller", [date, "Age: 0, 7200"], initial: 0, now: t0,
            age: 0),
        row("RFC9111 5.1 Age list without spaces", [date, "Age: 10,20"], initial: 10, now: t0, age: 10),
        row("RFC9111 5.1 Age list with an invalid first member ignored", [date, "Age: abc, 20"], initial: 0, now: t0,
            age: 0),
        row("RFC9111 5.1 Age list with an invalid later member: the first", [date, "Age: 30, abc"], initial: 30,
            now: t0, age: 30),
        row("RFC9110 5.6.1 empty list members skipped", [date, "Age: , 40"], initial: 40, now: t0, age: 40),
        row("RFC9111 5.1 first of two Age lines, each a list", [date, "Age: 5, 6", "Age: 9"], initial: 5, now: t0,
            age: 5),
        row("RFC9111 5.1 invalid first Age line: ignored, not the second", [date, "Age: x", "Age: 9"], initial: 0,
            now: t0, age: 0),
        row("RFC9111 5.1 empty first Age line: the next line's member", [date, "Age: ", "Age: 9"], initial: 9,
            now: t0, age: 9),
        row("RFC9111 5.1 Age with a fraction ignored", [date, "Age: 1.5"], initial: 0, now: t0, age: 0),
        row("RFC9111 1.2.2 huge Age clamped to 2^31", [date, "Age: 99999999999"], initial: 2_147_483_648, now: t0,
            age: 2_147_483_648),
        row("RFC9111 5.1 first of two Age fields", [date, "Age: 7", "Age: 9"], initial: 7, now: t0, age: 7),
        row("RFC9111 4.2.3 clock stepped back: never younger than on arrival", [date, "Age: 10"], initial: 10,
            now: t0 - 100, age: 10),
    ]
}

enum ClockTable {
    /// max-age=60 received at t0 with Age: 10: fresh until t0 + 50.
    static let rows: [ClockRow] = [
        ClockRow(name: "RFC9111 4.2 fresh on arrival", now: t0, fresh: true, ttl: 50),
        ClockRow(name: "RFC9111 4.2 fresh one second before the end", now: t0 + 49, fresh: true, ttl: 1),
        ClockRow(name: "RFC9111 4.2 stale when age equals the lifetime", now: t0 + 50, fresh: false, ttl: 0),
        ClockRow(name: "RFC9111 4.2 stale after", now: t0 + 60, fresh: false, ttl: -10),
        ClockRow(name: "RFC9111 4.2 long stale", now: t0 + 86_400, fresh: false, ttl: -86_350),
    ]
}

enum FactsTable {
    static func row(_ name: String, _ fields: [String], bodyLength: Int? = nil,
                    _ check: @escaping @Sendable (EntryFacts) -> Bool) -> FactsRow {
        FactsRow(name: name, fields: fields, bodyLength: bodyLength, check: check)
    }

    static let rows: [FactsRow] = [
        row("RFC9111 5.2.2.4 no-cache: revalidate every use", ["Cache-Control: no-cache"]) { $0.noCache },
        row("RFC9111 5.2.2.4 qualified no-cache is not revalidate-every-use", ["Cache-Control: no-cache=\"a\""]) {
            !$0.noCache
        },
        row("RFC9111 5.2.2.2 must-revalidate", ["Cache-Control: must-revalidate"]) { $0.mustRevalidate },
        row("RFC9111 5.2.2.8 proxy-revalidate counts as must-revalidate", ["Cache-Control: proxy-revalidate"]) {
            $0.mustRevalidate
        },
        row("RFC9111 5.2.2.10 s-maxage implies proxy-revalidate", ["Cache-Control: s-maxage=5"]) { $0.mustRevalidate },
        row("RFC9111 5.2.2.1 max-age alone does not", ["Cache-Control: max-age=5"]) { !$0.mustRevalidate && !$0.noCache },
        row("RFC5861 windows", ["Cache-Control: stale-while-revalidate=30, stale-if-error=600"]) {
            $0.staleWhileRevalidate == 30 && $0.staleIfError == 600
        },
        row("RFC5861 windows default to 0", []) { $0.staleWhileRevalidate == 0 && $0.staleIfError == 0 },
        row("RFC9110 8.8.3 strong ETag kept as sent", ["ETag: \"abc\""]) { $0.etag == wire("\"abc\"") },
        row("RFC9110 8.8.3 weak ETag kept as sent", ["ETag: W/\"abc\""]) { $0.etag == wire("W/\"abc\"") },
        row("RFC9110 8.8.3 no ETag", []) { $0.etag == nil },
        row("RFC9110 8.8.2 Last-Modified parsed", ["Last-Modified: \(Dates.minus1000)"]) { $0.lastModified == t0 - 1000 },
        row("RFC9110 8.8.2 invalid Last-Modified is none", ["Last-Modified: 0"]) { $0.lastModified == nil },
        row("RFC9110 8.6 Content-Length from the header", ["Content-Length: 42"]) { $0.contentLength == 42 },
        row("RFC9110 8.6 body length wins", ["Content-Length: 42"], bodyLength: 40) { $0.contentLength == 40 },
        row("RFC9110 8.6 body length without Content-Length", [], bodyLength: 7) { $0.contentLength == 7 },
        row("RFC9110 8.6 neither", []) { $0.contentLength == nil },
        row("RFC9110 12.5.5 Vary names lowercased, in order, once",
            ["Vary: Accept-Encoding, Accept-Language", "Vary: accept-encoding, Origin"]) {
            $0.varyFields == [wire("accept-encoding"), wire("accept-language"), wire("origin")] && !$0.varyStar
        },
        row("RFC9110 12.5.5 Vary: *", ["Vary: *"]) { $0.varyStar && $0.varyFields.isEmpty },
        row("RFC9110 12.5.5 Vary with * among names", ["Vary: Accept, *"]) { $0.varyStar && $0.varyFields == [wire("accept")] },
        row("RFC9110 12.5.5 no Vary", []) { !$0.varyStar && $0.varyFields.isEmpty },
        row("RFC9111 4.2.3 times recorded", ["Date: \(Dates.minus30)"]) {
            $0.requestTime == t0 && $0.responseTime == t0 && $0.dateValue == t0 - 30 && $0.status == 200
        },
    ]
}

@Suite("EntryFacts")
struct EntryFactsTests {
    @Test("freshness lifetime", arguments: FreshnessTable.rows)
    func freshness(_ row: FreshnessRow) {
        let facts = entry(row.fields, status: row.status, requestTime: row.responseTime, responseTime: row.responseTime,
                          settings: row.settings, override: row.override)
        #expect(facts.freshnessLifetime == row.lifetime)
        #expect(facts.heuristic == row.heuristic)
    }

    @Test("age", arguments: AgeTable.rows)
    func age(_ row: AgeRow) {
        let facts = entry(row.fields, requestTime: row.requestTime, responseTime: row.responseTime)
        #expect(facts.correctedInitialAge == row.correctedInitialAge)
        #expect(facts.dateValue == row.dateValue)
        #expect(facts.currentAge(now: row.now) == row.currentAge)
    }

    @Test("freshness against the clock", arguments: ClockTable.rows)
    func clock(_ row: ClockRow) {
        let facts = entry(["Date: \(Dates.t0)", "Cache-Control: max-age=60", "Age: 10"])
        #expect(facts.isFresh(now: row.now) == row.fresh)
        #expect(facts.timeToLive(now: row.now) == row.ttl)
    }

    @Test("facts", arguments: FactsTable.rows)
    func facts(_ row: FactsRow) {
        let facts = entry(row.fields, bodyLength: row.bodyLength)
        #expect(row.check(facts), "\(facts)")
    }
}

/// An older copy of an entry may stay on disk only while it can never be served where the
/// freshened head would not be (`MemoryTier.replaceHead`).
@Suite("EntryFacts.neverFresherThan")
struct NeverFresherThanTests {
    static func base() -> EntryFacts {
        EntryFacts(status: 200, requestTime: 1_000, responseTime: 1_001, dateValue: 1_001, correctedInitialAge: 1,
                   freshnessLifetime: 60, heuristic: false, noCache: false, mustRevalidate: false,
                   staleWhileRevalidate: 0, staleIfError: 0, etag: Array("\"v1\"".utf8), lastModified: 900,
                   contentLength: nil, varyFields: [], varyStar: false)
    }

    static let rows: [(String, @Sendable (inout EntryFacts) -> Void, Bool)] = [
        ("a later answer, same lifetime", { $0.responseTime += 30 }, true),
        ("a longer lifetime", { $0.freshnessLifetime = 3_600 }, true),
        ("a shorter lifetime", { $0.freshnessLifetime = 0 }, false),
        ("no-cache now", { $0.noCache = true }, false),
        ("must-revalidate now", { $0.mustRevalidate = true }, false),
        ("a longer stale-if-error", { $0.staleIfError = 60 }, true),
        ("another ETag", { $0.etag = Array("\"v2\"".utf8) }, false),
        ("another Last-Modified", { $0.lastModified = 901 }, false),
        ("a larger initial age (Age from the origin)", { $0.correctedInitialAge = 500 }, false),
        ("Vary changed", { $0.varyFields = [Array("accept".utf8)] }, false),
    ]

    @Test func eachChangeAgainstTheOlderCopy() {
        for (name, change, expected) in Self.rows {
            var newer = Self.base()
            change(&newer)
            #expect(Self.base().neverFresherThan(newer) == expected, "\(name)")
        }
        var stricterOld = Self.base()
        stricterOld.noCache = true
        stricterOld.freshnessLifetime = 0
        #expect(stricterOld.neverFresherThan(Self.base()), "an older copy stricter in every way may stay")
    }
}
