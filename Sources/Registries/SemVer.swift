/// A Semantic Versioning 2.0.0 version, for ordering npm versions (npm requires every version to
/// be valid SemVer).
///
/// Strict §2/§9/§10 syntax: `MAJOR.MINOR.PATCH`, an optional `-prerelease` and `+build`, no
/// leading zeros in numbers, no leading `v`. Build metadata is kept but ignored by the order (§10).
public struct SemVer: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var major: UInt64
    public var minor: UInt64
    public var patch: UInt64
    public var prerelease: [Identifier]
    public var build: [String]

    /// A pre-release identifier (§9): numeric ones compare as numbers, below alphanumeric ones.
    public enum Identifier: Sendable, Hashable, Comparable, CustomStringConvertible {
        /// Kept as its digits: a numeric identifier may exceed any integer type.
        case numeric(String)
        case alphanumeric(String)

        public static func < (a: Identifier, b: Identifier) -> Bool {
            switch (a, b) {
            case (.numeric(let x), .numeric(let y)): x.count != y.count ? x.count < y.count : x < y
            case (.numeric, .alphanumeric): true
            case (.alphanumeric, .numeric): false
            case (.alphanumeric(let x), .alphanumeric(let y)): Array(x.utf8).lexicographicallyPrecedes(Array(y.utf8))
            }
        }

        public var description: String {
            switch self {
            case .numeric(let text), .alphanumeric(let text): text
            }
        }
    }

    public init?(_ text: String) {
        var rest = Substring(text)
        var build: [String] = []
        if let plus = rest.firstIndex(of: "+") {
            let identifiers = rest[rest.index(after: plus)...].split(separator: ".", omittingEmptySubsequences: false)
            guard identifiers.allSatisfy(Self.isIdentifier) else { return nil }
            build = identifiers.map(String.init)
            rest = rest[..<plus]
        }
        var prerelease: [Identifier] = []
        if let dash = rest.firstIndex(of: "-") {
            let identifiers = rest[rest.index(after: dash)...].split(separator: ".", omittingEmptySubsequences: false)
            guard let parsed = Self.prereleaseIdentifiers(identifiers) else { return nil }
            prerelease = parsed
            rest = rest[..<dash]
        }
        let core = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard core.count == 3, let major = Self.number(core[0]), let minor = Self.number(core[1]),
              let patch = Self.number(core[2]) else { return nil }
        self.major = major
        self.minor = minor
        self.patch = patch
        self.prerelease = prerelease
        self.build = build
    }

    public var isPrerelease: Bool { !prerelease.isEmpty }

    /// Precedence (§11): numbers in order, then a pre-release below its release, then identifier
    /// by identifier, a shorter list below a longer one it starts.
    public static func < (a: SemVer, b: SemVer) -> Bool {
        if (a.major, a.minor, a.patch) != (b.major, b.minor, b.patch) {
            return (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch)
        }
        switch (a.prerelease.isEmpty, b.prerelease.isEmpty) {
        case (true, _): return false
        case (false, true): return true
        case (false, false): return a.prerelease.lexicographicallyPrecedes(b.prerelease)
        }
    }

    /// Equal precedence (§11); build metadata is ignored, unlike `==`, which compares everything.
    public func hasSamePrecedence(as other: SemVer) -> Bool { !(self < other) && !(other < self) }

    public var description: String {
        var text = "\(major).\(minor).\(patch)"
        if !prerelease.isEmpty { text += "-" + prerelease.map(\.description).joined(separator: ".") }
        if !build.isEmpty { text += "+" + build.joined(separator: ".") }
        return text
    }

    // MARK: - Syntax

    /// §2: a non-negative integer without leading zeros.
    private static func number(_ text: Substring) -> UInt64? {
        guard !text.isEmpty, text.utf8.allSatisfy(isDecimalDigit), text == "0" || !text.hasPrefix("0") else { return nil }
        return UInt64(text)
    }

    private static func prereleaseIdentifiers(_ identifiers: [Substring]) -> [Identifier]? {
        var parsed: [Identifier] = []
        for identifier in identifiers {
            guard isIdentifier(identifier) else { return nil }
            if identifier.utf8.allSatisfy(isDecimalDigit) {
                guard identifier == "0" || !identifier.hasPrefix("0") else { return nil }  // §9
                parsed.append(.numeric(String(identifier)))
            } else {
                parsed.append(.alphanumeric(String(identifier)))
            }
        }
        return parsed
    }

    /// `[0-9A-Za-z-]+`
    private static func isIdentifier(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            isDecimalDigit(byte) || (byte | 0x20) &- UInt8(ascii: "a") < 26 || byte == UInt8(ascii: "-")
        }
    }
}
