import Testing
@testable import ProxyServer

struct OwnCAPlanRow: Sendable, CustomTestStringConvertible {
    var current: CAFilesPresence
    var legacy: CAFilesPresence
    var plan: OwnCAPlan
    var testDescription: String { "\(current) here, \(legacy) in cache_dir/ca: \(plan)" }
}

/// What start-up does with Larder's own CA: a new one only when no part of one exists anywhere.
@Suite struct OwnCAPlanTests {
    static let rows: [OwnCAPlanRow] = [
        OwnCAPlanRow(current: .none, legacy: .none, plan: .generate),
        OwnCAPlanRow(current: .none, legacy: .both, plan: .migrate),
        OwnCAPlanRow(current: .both, legacy: .none, plan: .load(legacyToo: false)),
        OwnCAPlanRow(current: .both, legacy: .both, plan: .load(legacyToo: true)),
        OwnCAPlanRow(current: .both, legacy: .keyOnly, plan: .load(legacyToo: true)),
        OwnCAPlanRow(current: .certificateOnly, legacy: .none,
                     plan: .refuse("ca holds larder-ca.pem without larder-ca-key.pem")),
        OwnCAPlanRow(current: .keyOnly, legacy: .both, plan: .refuse("ca holds larder-ca-key.pem without larder-ca.pem")),
        OwnCAPlanRow(current: .none, legacy: .certificateOnly,
                     plan: .refuse("cache/ca holds larder-ca.pem without larder-ca-key.pem")),
        OwnCAPlanRow(current: .none, legacy: .keyOnly, plan: .refuse("cache/ca holds larder-ca-key.pem without larder-ca.pem")),
    ]

    @Test(arguments: rows)
    func plan(_ row: OwnCAPlanRow) {
        #expect(OwnCAPlan.decide(current: row.current, legacy: row.legacy, directory: "ca", legacyDirectory: "cache/ca")
                == row.plan)
    }
}
