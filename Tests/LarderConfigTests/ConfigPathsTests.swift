import Testing
@testable import LarderConfig

struct PathWithinRow: Sendable, CustomTestStringConvertible {
    var path: String
    var directory: String
    var within: Bool
    var testDescription: String { "\(path) in \(directory): \(within)" }
}

/// Whether the interception CA directory lies in the cache directory, read from the paths alone.
@Suite struct ConfigPathsTests {
    static let rows: [PathWithinRow] = [
        PathWithinRow(path: "larder-ca", directory: "larder-cache", within: false),
        PathWithinRow(path: "larder-cache/ca", directory: "larder-cache", within: true),
        PathWithinRow(path: "larder-cache", directory: "larder-cache", within: true),
        PathWithinRow(path: "./larder-cache//ca/", directory: "larder-cache/", within: true),
        PathWithinRow(path: "larder-cache/../larder-ca", directory: "larder-cache", within: false),
        PathWithinRow(path: "/var/lib/larder/ca", directory: "/var/cache/larder", within: false),
        PathWithinRow(path: "/var/cache/larder-ca", directory: "/var/cache/larder", within: false),
        PathWithinRow(path: "/var/cache/larder/x/../ca", directory: "/var/cache/larder", within: true),
        PathWithinRow(path: "/anything", directory: "/", within: true),
        PathWithinRow(path: "ca", directory: ".", within: true),
        PathWithinRow(path: "../ca", directory: ".", within: false),
        PathWithinRow(path: "/var/cache/larder/ca", directory: "larder-cache", within: false),  // not compared
    ]

    @Test(arguments: rows)
    func within(_ row: PathWithinRow) {
        #expect(ConfigPaths.isWithin(row.path, row.directory) == row.within)
    }
}
