/// A cache rule's `path` pattern, matched against a request's whole path (the query left out).
///
/// - `*` matches any run of bytes without `/` (within one segment), the empty run too;
/// - `**` matches any run of bytes, `/` included (across segments), the empty run too;
/// - every other byte matches itself exactly (no case folding, no percent-decoding).
///
/// So `**/pool/**.deb` matches `/debian/pool/main/h/hello/hello_2.10_amd64.deb` and
/// `/pool/x.deb`, and `/-/*.tgz` matches `/-/a.tgz` but not `/-/a/b.tgz`. A pattern starts with
/// `/` or `*`; `?` (it would only ever meet the query) and three `*` in a row are refused, as
/// are spaces and control bytes. Matching runs the pattern as a set of states over the path,
/// one pass, no backtracking: its cost is at most (pattern length × path length), whatever the
/// path holds.
public struct PathGlob: Sendable, Hashable, CustomStringConvertible {
    enum Token: Sendable, Hashable {
        case byte(UInt8)
        /// `*`
        case segment
        /// `**`
        case any
    }

    let tokens: [Token]
    /// The literal bytes before the first `*` and after the last: every match starts and ends with
    /// them, so most paths are turned away by a comparison or two before the states run.
    let literalPrefix: [UInt8]
    let literalSuffix: [UInt8]
    /// The pattern as written.
    public let description: String

    /// The longest pattern accepted: patterns are written by hand, and matching cost grows with them.
    public static let maximumLength = 512

    /// Parses `text`; the error says what is wrong with it.
    public init(parsing text: String) throws(PathGlobError) {
        let bytes = Array(text.utf8)
        guard let first = bytes.first else { throw PathGlobError(text, "is empty") }
        guard first == UInt8(ascii: "/") || first == UInt8(ascii: "*") else {
            throw PathGlobError(text, "must start with / or *")
        }
        guard bytes.count <= Self.maximumLength else {
            throw PathGlobError(text, "is longer than \(Self.maximumLength) bytes")
        }
        var tokens: [Token] = []
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b <= 0x20 || b == 0x7F { throw PathGlobError(text, "holds a space or control character") }
            if b == UInt8(ascii: "?") { throw PathGlobError(text, "holds ? (paths are matched without their query)") }
            if b == UInt8(ascii: "#") { throw PathGlobError(text, "holds # (a fragment is never part of a path)") }
            guard b == UInt8(ascii: "*") else {
                tokens.append(.byte(b))
                i += 1
                continue
            }
            var stars = 0
            while i < bytes.count, bytes[i] == UInt8(ascii: "*") { stars += 1; i += 1 }
            guard stars <= 2 else { throw PathGlobError(text, "holds *** (use * within a segment, ** across)") }
            tokens.append(stars == 2 ? .any : .segment)
        }
        self.tokens = tokens
        func literal(_ run: some Sequence<Token>) -> [UInt8] {
            var bytes: [UInt8] = []
            for token in run {
                guard case .byte(let b) = token else { break }
                bytes.append(b)
            }
            return bytes
        }
        literalPrefix = literal(tokens)
        literalSuffix = literal(tokens.reversed()).reversed()
        description = text
    }

    /// Whether `path` (path and query, as the request target carries them) matches; the query,
    /// from the first `?`, takes no part.
    public func matches(_ path: UnsafeRawBufferPointer) -> Bool {
        let end = path.firstIndex(of: UInt8(ascii: "?")) ?? path.count
        guard literalPrefix.count <= end, literalSuffix.count <= end,
              literalPrefix.indices.allSatisfy({ path[$0] == literalPrefix[$0] }),
              literalSuffix.indices.allSatisfy({ path[end - literalSuffix.count + $0] == literalSuffix[$0] })
        else { return false }
        // Two rows of states, current and next: state i holds when the pattern's first i tokens
        // match the bytes read so far; the path matches when the last state holds at its end.
        let count = tokens.count
        return withUnsafeTemporaryAllocation(of: Bool.self, capacity: 2 * (count + 1)) { states in
            states.initialize(repeating: false)
            var current = 0
            var next = count + 1
            states[current] = true
            close(states, from: current)
            for position in 0..<end {
                let b = path[position]
                var anyActive = false
                for i in 0...count { states[next + i] = false }
                for i in 0..<count where states[current + i] {
                    switch tokens[i] {
                    case .byte(let want):
                        if want == b { states[next + i + 1] = true; anyActive = true }
                    case .segment:
                        if b != UInt8(ascii: "/") { states[next + i] = true; anyActive = true }
                    case .any:
                        states[next + i] = true; anyActive = true
                    }
                }
                if !anyActive { return false }
                swap(&current, &next)
                close(states, from: current)
            }
            return states[current + count]
        }
    }

    /// A `*` or `**` may also match nothing: a state before one lets the state after it hold too.
    private func close(_ states: UnsafeMutableBufferPointer<Bool>, from base: Int) {
        for i in 0..<tokens.count where states[base + i] {
            switch tokens[i] {
            case .segment, .any: states[base + i + 1] = true
            case .byte: break
            }
        }
    }

    /// `matches` over bytes held in an array (tests, configuration checks).
    public func matches(_ path: String) -> Bool {
        Array(path.utf8).withUnsafeBytes { matches($0) }
    }
}

public struct PathGlobError: Error, Sendable, Equatable, CustomStringConvertible {
    public let pattern: String
    public let reason: String
    init(_ pattern: String, _ reason: String) { self.pattern = pattern; self.reason = reason }
    public var description: String { "path pattern \"\(pattern)\" \(reason)" }
}
