/// A host pattern as configuration writes it, for every rule that names destinations: access
/// rules, authentication scopes, interception, TLS trust pins, cache rules and reverse mode's
/// allowed hosts. Parsed once, at load; matched against host bytes without allocating, since
/// cache rules and access checks run for every request.
///
/// - `*` matches any host.
/// - `*.example.com` matches every name below `example.com` (`a.example.com`, `a.b.example.com`),
///   but not `example.com` itself: list both for the domain and its subdomains.
/// - `example.com` matches that name only; so does `10.0.0.1` (an IPv4 address is compared as
///   written, like a name).
/// - `fd00::1` or `[fd00::1]` matches that IPv6 address however the host spells it
///   (`[FD00:0::1]` too): IPv6 literals are compared by value.
///
/// Names are ASCII letters, digits, `-` and `_` in dot-separated labels, compared without regard
/// to case; one trailing dot is dropped on both sides (`example.com.` is `example.com`), as
/// `RequestTarget` does for hosts.
public struct HostPattern: Sendable, Hashable, CustomStringConvertible {
    enum Form: Sendable, Hashable {
        case anyHost
        /// Lowercase, without a trailing dot.
        case name([UInt8])
        /// The suffix with its leading dot (`.example.com`), lowercase.
        case subdomains([UInt8])
        case ipv6(UInt128)
    }

    let form: Form
    /// The pattern as parsed (lowercase, without brackets or trailing dot), for logs and messages.
    public let description: String

    /// Matches every host.
    public static let any = HostPattern(form: .anyHost, description: "*")

    private init(form: Form, description: String) {
        self.form = form
        self.description = description
    }

    /// Parses `text` (no surrounding spaces); the error says what is wrong with it.
    public init(parsing text: String) throws(HostPatternError) {
        let t = text.lowercased()
        if t == "*" {
            self = .any
            return
        }
        var literal = Substring(t)
        if literal.hasPrefix("[") {
            guard literal.hasSuffix("]"), literal.count > 2 else { throw HostPatternError(text, "unclosed or empty [ ]") }
            literal = literal.dropFirst().dropLast()
            guard let value = HostPattern.ipv6Value(literal) else { throw HostPatternError(text, "not an IPv6 address") }
            self.init(form: .ipv6(value), description: String(literal))
            return
        }
        if t.contains(":") {
            guard let value = HostPattern.ipv6Value(literal) else {
                throw HostPatternError(text, "not an IPv6 address, and a host pattern has no port")
            }
            self.init(form: .ipv6(value), description: t)
            return
        }
        let subdomains = t.hasPrefix("*.")
        var name = subdomains ? t.dropFirst(2) : Substring(t)
        if name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty else { throw HostPatternError(text, "no name") }
        if name.contains("*") {
            throw HostPatternError(text, "* stands alone or as the whole first label, as in *.example.com")
        }
        for c in name.unicodeScalars {
            guard ("a"..."z").contains(c) || ("0"..."9").contains(c) || c == "-" || c == "_" || c == "." else {
                throw HostPatternError(text, "\"\(c)\" is not allowed in a host name: letters, digits, -, _ and .")
            }
        }
        guard !name.hasPrefix("."), !name.hasSuffix("."), !name.contains("..") else {
            throw HostPatternError(text, "empty label; for a domain's subdomains write *.example.com")
        }
        if subdomains {
            self.init(form: .subdomains(Array(("." + name).utf8)), description: "*." + name)
        } else {
            self.init(form: .name(Array(name.utf8)), description: String(name))
        }
    }

    /// Whether `host` (as `RequestTarget` keeps it: IPv6 without brackets) matches.
    public func matches(_ host: UnsafeRawBufferPointer) -> Bool {
        var count = host.count
        switch form {
        case .anyHost:
            return true
        case .name(let name):
            if count > 0, host[count - 1] == 0x2E { count -= 1 }
            return count == name.count && HostPattern.tailEquals(host, count, name)
        case .subdomains(let suffix):
            if count > 0, host[count - 1] == 0x2E { count -= 1 }
            return count > suffix.count && HostPattern.tailEquals(host, count, suffix)
        case .ipv6(let value):
            return HostPattern.ipv6Value(host) == value
        }
    }

    public func matches(_ host: [UInt8]) -> Bool {
        host.withUnsafeBytes { matches($0) }
    }

    public func matches(_ host: String) -> Bool {
        var host = host
        return host.withUTF8 { matches(UnsafeRawBufferPointer($0)) }
    }

    /// Whether `host[..<end]` ends with `lowercase`, ignoring the host's case.
    private static func tailEquals(_ host: UnsafeRawBufferPointer, _ end: Int, _ lowercase: [UInt8]) -> Bool {
        var i = end - lowercase.count
        for b in lowercase {
            guard asciiLower(host[i]) == b else { return false }
            i += 1
        }
        return true
    }

    /// Two patterns are equal when they match the same hosts (two spellings of one IPv6 address are).
    public static func == (a: HostPattern, b: HostPattern) -> Bool { a.form == b.form }
    public func hash(into hasher: inout Hasher) { hasher.combine(form) }
}

extension HostPattern: ExpressibleByStringLiteral {
    /// For defaults and tests written in source; a malformed literal is a programming error.
    public init(stringLiteral value: String) {
        do {
            try self.init(parsing: value)
        } catch {
            preconditionFailure("host pattern literal: \(error)")
        }
    }
}

/// Why a host pattern was refused; the message names the text and the problem.
public struct HostPatternError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String

    init(_ text: String, _ problem: String) {
        description = "expected a host name, *.domain or *, got \"\(text)\" (\(problem))"
    }
}

extension HostPattern {
    /// The value of an IPv6 address in text (RFC 4291 §2.2: hex groups, one `::`, an IPv4 tail),
    /// without brackets or zone; nil for anything else.
    static func ipv6Value(_ text: Substring) -> UInt128? {
        var text = text
        return text.withUTF8 { ipv6Value(UnsafeRawBufferPointer($0)) }
    }

    static func ipv6Value(_ b: UnsafeRawBufferPointer) -> UInt128? {
        let n = b.count
        guard n >= 2 else { return nil }
        var head: UInt128 = 0
        var headGroups = 0
        var tail: UInt128 = 0
        var tailGroups = 0
        var compressed = false
        var i = 0
        if b[0] == asciiColon {
            guard b[1] == asciiColon else { return nil }
            compressed = true
            i = 2
            if i == n { return 0 }
        }
        while true {
            let start = i
            var group: UInt128 = 0
            while i < n, i - start < 4, let h = hexValue(b[i]) {
                group = group << 4 | UInt128(h)
                i += 1
            }
            var bits = 16
            if i < n, b[i] == 0x2E {
                guard let v4 = ipv4Value(b, start) else { return nil }
                group = v4
                bits = 32
                i = n
            } else {
                guard i > start else { return nil }
            }
            if compressed {
                tail = tail << bits | group
                tailGroups += bits / 16
            } else {
                head = head << bits | group
                headGroups += bits / 16
            }
            guard headGroups + tailGroups <= 8 else { return nil }
            if i == n { break }
            guard b[i] == asciiColon else { return nil }
            i += 1
            if i < n, b[i] == asciiColon {
                guard !compressed else { return nil }
                compressed = true
                i += 1
                if i == n { break }
            } else if i == n {
                return nil  // a trailing single ":"
            }
        }
        if compressed {
            guard headGroups + tailGroups <= 7 else { return nil }
            return headGroups == 0 ? tail : head << (16 * (8 - headGroups)) | tail
        }
        return headGroups == 8 ? head : nil
    }

    /// A dotted IPv4 address filling `b[start...]`, as the last 32 bits of an IPv6 address.
    private static func ipv4Value(_ b: UnsafeRawBufferPointer, _ start: Int) -> UInt128? {
        var value: UInt128 = 0
        var i = start
        for part in 0..<4 {
            let partStart = i
            var octet = 0
            while i < b.count, i - partStart < 3, isDigit(b[i]) {
                octet = octet * 10 + Int(b[i] &- 0x30)
                i += 1
            }
            guard i > partStart, octet <= 255 else { return nil }
            value = value << 8 | UInt128(octet)
            if part < 3 {
                guard i < b.count, b[i] == 0x2E else { return nil }
                i += 1
            }
        }
        return i == b.count ? value : nil
    }
}
