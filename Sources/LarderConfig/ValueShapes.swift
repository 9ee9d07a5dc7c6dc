import Glibc
import HTTPWire
import Yams

/// How one key's value is read (from the file's YAML, or from an environment variable or a flag
/// made into YAML) and written back the way the file would say it. The written form documents
/// defaults, and reads back to the same value (a test checks every key).
struct ValueShape<T: Sendable & Equatable>: Sendable {
    let parse: @Sendable (Node) throws(ValueError) -> T
    let render: @Sendable (T) -> String

    /// The same shape with a further check on what it read.
    func checked(_ check: @escaping @Sendable (T) throws(ValueError) -> Void) -> ValueShape<T> {
        let parse = self.parse
        return ValueShape(parse: { n throws(ValueError) in
            let value = try parse(n)
            try check(value)
            return value
        }, render: render)
    }

    /// A list: a YAML sequence, or one comma-separated scalar (the environment's form).
    static func list<Item>(_ item: ValueShape<Item>) -> ValueShape<[Item]> where T == [Item] {
        ValueShape<[Item]>(parse: { n throws(ValueError) in
            var out: [Item] = []
            for element in try ConfigSchema.list(n) { out.append(try item.parse(element)) }
            return out
        }, render: { "[" + $0.map(item.render).joined(separator: ", ") + "]" })
    }

    /// Unset when empty, null, or one of the words in `off`; `unset` is how an unset value is written.
    static func optional<Wrapped>(_ inner: ValueShape<Wrapped>, off: [String] = [],
                                  unset: String = "") -> ValueShape<Wrapped?> where T == Wrapped? {
        ValueShape<Wrapped?>(parse: { n throws(ValueError) in
            guard let s = try ConfigSchema.scalarOrNull(n), !off.contains(s) else { return nil }
            return try inner.parse(n)
        }, render: { $0.map(inner.render) ?? unset })
    }
}

extension ValueShape where T: CaseIterable & RawRepresentable, T.RawValue == String {
    /// One of a closed set, by its raw value; an error lists them all.
    static var choice: ValueShape<T> {
        ValueShape(parse: { n throws(ValueError) in
            let s = try ConfigSchema.scalar(n)
            guard let value = T(rawValue: s) else {
                let names = T.allCases.map(\.rawValue)
                throw ValueError("expected one of \(names.joined(separator: ", ")), got \"\(s)\"")
            }
            return value
        }, render: { ConfigText.scalar($0.rawValue) })
    }
}

extension ValueShape where T == Int {
    static func integer(_ range: ClosedRange<Int>, what: String) -> ValueShape<Int> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.integer(n, in: range, what: what) },
                   render: { String($0) })
    }

    /// Bytes, with or without a unit.
    static func size(_ range: ClosedRange<Int>) -> ValueShape<Int> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.size(n, in: range) }, render: ConfigText.size)
    }
}

extension ValueShape where T == Double {
    static var duration: ValueShape<Double> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.duration(n) }, render: ConfigText.duration)
    }

    static var positiveDuration: ValueShape<Double> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.positiveDuration(n) }, render: ConfigText.duration)
    }

    /// A plain number from 0 to 1.
    static var fraction: ValueShape<Double> {
        ValueShape(parse: { n throws(ValueError) in
            let s = try ConfigSchema.scalar(n)
            guard let v = Double(s), v >= 0, v <= 1 else { throw ValueError("expected a fraction from 0 to 1, got \"\(s)\"") }
            return v
        }, render: { $0.description })
    }
}

extension ValueShape where T == Bool {
    static var boolean: ValueShape<Bool> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.boolean(n) }, render: { $0 ? "true" : "false" })
    }
}

extension ValueShape where T == String {
    /// Any text but empty.
    static var text: ValueShape<String> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.nonEmpty(n) }, render: ConfigText.scalar)
    }
}

extension ValueShape where T == String? {
    /// A path or a token; empty means unset.
    static var optionalText: ValueShape<String?> { .optional(.text) }
}

extension ValueShape where T == Endpoint {
    static var endpoint: ValueShape<Endpoint> {
        ValueShape(parse: { n throws(ValueError) in try ConfigLoader.parseEndpoint(try ConfigSchema.scalar(n)) },
                   render: { ConfigText.scalar($0.description) })
    }

    /// A proxy listener: `host:port`, or `{address: host:port, proxy_protocol: true}`.
    static var listener: ValueShape<Endpoint> {
        ValueShape(parse: { n throws(ValueError) in
            guard case .mapping(let m) = n else { return try ConfigLoader.parseEndpoint(try ConfigSchema.scalar(n)) }
            var endpoint: Endpoint?
            var proxyProtocol = false
            for (k, v) in m {
                switch try ConfigSchema.scalar(k) {
                case "address": endpoint = try ConfigLoader.parseEndpoint(try ConfigSchema.scalar(v))
                case "proxy_protocol": proxyProtocol = try ConfigSchema.boolean(v)
                case let other: throw ValueError("unknown key \"\(other)\" in a listener (known: address, proxy_protocol)")
                }
            }
            guard var endpoint else { throw ValueError("a listener written as a mapping needs address: HOST:PORT") }
            endpoint.proxyProtocol = proxyProtocol
            return endpoint
        }, render: { e in
            let address = ConfigText.scalar(Endpoint(host: e.host, port: e.port).description)
            return e.proxyProtocol ? "{address: \(address), proxy_protocol: true}" : address
        })
    }

    /// A name server: `host:port`, or a bare address or name meaning port 53.
    static var dnsServer: ValueShape<Endpoint> {
        ValueShape(parse: { n throws(ValueError) in
            let text = try ConfigSchema.scalar(n)
            // A bare address (IPv4, IPv6 or name) means the standard DNS port.
            let hasPort = text.hasPrefix("[") || text.filter({ $0 == ":" }).count == 1
            let e = hasPort ? try ConfigLoader.parseEndpoint(text) : Endpoint(host: text, port: 53)
            guard e.port != 0 else { throw ValueError("port 0 is not a valid DNS server port in \"\(text)\"") }
            return e
        }, render: { ConfigText.scalar($0.description) })
    }
}

extension ValueShape where T == OriginURL {
    static var origin: ValueShape<OriginURL> {
        ValueShape(parse: { n throws(ValueError) in try ConfigLoader.parseOriginURL(try ConfigSchema.scalar(n)) },
                   render: { ConfigText.scalar($0.description) })
    }
}

extension ValueShape where T == OriginURL {
    /// `session.proxy`: an http:// origin. Credentials in it are refused without quoting the text,
    /// which would carry them into the error and the log: they go in a file of their own.
    static var parentProxy: ValueShape<OriginURL> {
        ValueShape(parse: { n throws(ValueError) in
            let text = try ConfigSchema.scalar(n)
            // No host or port holds an `@`: wherever it stands, what precedes it may be a password.
            if text.contains("@") {
                throw ValueError("credentials do not belong in the parent proxy's address (it is shown and logged): "
                                 + "put `user:password` in the file session.proxy_credentials_file names")
            }
            let url = try ConfigLoader.parseOriginURL(text)
            guard url.scheme == .http else {
                throw ValueError("a parent proxy is reached over plain http://, got \"\(url)\"")
            }
            return url
        }, render: { ConfigText.scalar($0.description) })
    }
}

extension ValueShape where T == AddressRange {
    static var addressRange: ValueShape<AddressRange> {
        ValueShape(parse: { n throws(ValueError) in try ConfigLoader.parseAddressRange(try ConfigSchema.nonEmpty(n)) },
                   render: { ConfigText.scalar(ConfigText.network($0)) })
    }
}

extension ValueShape where T == DestinationPattern {
    static var destination: ValueShape<DestinationPattern> {
        ValueShape(parse: { n throws(ValueError) in try ConfigLoader.parseDestinationPattern(try ConfigSchema.nonEmpty(n)) },
                   render: { pattern in
                       switch pattern {
                       case .network(let r): return ConfigText.scalar(ConfigText.network(r))
                       case .host(let h): return ConfigText.scalar(h.description)
                       }
                   })
    }
}

extension ValueShape where T == [HeaderPair] {
    static var headers: ValueShape<[HeaderPair]> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.headers(n) }, render: { pairs in
            "{" + pairs.map { ConfigText.scalar($0.name) + ": " + ConfigText.scalar($0.value) }.joined(separator: ", ") + "}"
        })
    }
}

extension ValueShape where T == [Config.TrustException] {
    static var trust: ValueShape<[Config.TrustException]> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.trustExceptions(n) }, render: { list in
            "[" + list.map { "{host: \(ConfigText.scalar($0.host.description)), sha256: \($0.sha256)}" }.joined(separator: ", ") + "]"
        })
    }
}

extension ValueShape where T == [CacheRuleConfig] {
    static var cacheRules: ValueShape<[CacheRuleConfig]> {
        ValueShape(parse: { n throws(ValueError) in try ConfigSchema.cacheRules(n) }, render: { rules in
            "[" + rules.map(ConfigText.rule).joined(separator: ", ") + "]"
        })
    }
}

/// Values written the way the configuration file writes them.
enum ConfigText {
    /// A YAML scalar, quoted when plain YAML would read it as something else (an alias, a list,
    /// a comment, a boolean) or could not read it at all.
    static func scalar(_ s: String) -> String {
        let indicators: Set<Character> = ["-", "?", ":", ",", "[", "]", "{", "}", "#", "&", "*", "!", "|", ">",
                                          "'", "\"", "%", "@", "`"]
        let words: Set<String> = ["null", "~", "true", "false", "yes", "no", "on", "off", "y", "n"]
        let plain = !s.isEmpty && !indicators.contains(s.first!) && s.first != " " && s.last != " " && s.last != ":"
            && !s.contains(": ") && !s.contains(" #") && !words.contains(s.lowercased())
            && !s.contains(where: { $0 == "," || $0 == "[" || $0 == "]" || $0 == "{" || $0 == "}" || $0 == "\t"
                                    || $0.isNewline || !$0.isASCII })
        if plain { return s }
        var quoted = "\""
        for c in s {
            switch c {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            default: quoted.append(c)
            }
        }
        return quoted + "\""
    }

    /// Bytes in the largest binary unit that holds them exactly (`64KiB`, `1GiB`).
    static func size(_ bytes: Int) -> String {
        for (unit, scale) in [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        where bytes >= scale && bytes % scale == 0 {
            return "\(bytes / scale)\(unit)"
        }
        return String(bytes)
    }

    /// Seconds under an hour (`30s`, `60s`, `500ms`); from an hour on, the largest unit that holds
    /// them exactly (`1h`, `1d`, `7d`).
    static func duration(_ seconds: Double) -> String {
        if seconds >= 3_600 {
            for (unit, scale) in [("d", 86_400.0), ("h", 3_600.0), ("m", 60.0)]
            where seconds.truncatingRemainder(dividingBy: scale) == 0 {
                return "\(Int(seconds / scale))\(unit)"
            }
        }
        if seconds == seconds.rounded() { return "\(Int(seconds))s" }
        let milliseconds = seconds * 1_000
        if milliseconds == milliseconds.rounded() { return "\(Int(milliseconds))ms" }
        return "\(seconds)s"
    }

    /// `10.0.0.0/8`, `::1/128`: IPv6 in its short form, as people write it; a single address
    /// keeps its full prefix length.
    static func network(_ range: AddressRange) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = range.bytes.count == 4 ? AF_INET : AF_INET6
        let written = range.bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        guard written != nil else { return range.description }
        let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(address)/\(range.prefixLength)"
    }

    /// One `cache.rules` entry as a flow mapping, keys in the documented order.
    static func rule(_ r: CacheRuleConfig) -> String {
        var parts: [String] = []
        if let s = r.scheme { parts.append("scheme: \(s.name)") }
        if let h = r.host { parts.append("host: \(scalar(h.description))") }
        if let p = r.pathPrefix { parts.append("path_prefix: \(scalar(p))") }
        if let p = r.path { parts.append("path: \(scalar(p.description))") }
        if !r.statuses.isEmpty { parts.append("status: [\(r.statuses.map(String.init).joined(separator: ", "))]") }
        if let t = r.contentType { parts.append("content_type: \(scalar(t))") }
        if let p = r.policy { parts.append("policy: \(p.rawValue)") }
        if let s = r.storage { parts.append("storage: \(s.rawValue)") }
        var freshness: [String] = []
        if let f = r.forcedLifetime { freshness.append("forced: \(duration(f))") }
        if let m = r.maximumLifetime { freshness.append("maximum: \(duration(m))") }
        if let d = r.defaultLifetime { freshness.append("default: \(duration(d))") }
        if !freshness.isEmpty { parts.append("freshness: {\(freshness.joined(separator: ", "))}") }
        if let i = r.ignoreReload { parts.append("ignore_reload: \(i)") }
        return "{" + parts.joined(separator: ", ") + "}"
    }
}
