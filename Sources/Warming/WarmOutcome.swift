/// What warming one URL came to, decided from the proxy's answer and its `Cache-Status` field.
public enum WarmOutcome: Sendable, Equatable {
    /// Fetched from the origin and stored.
    case stored
    /// Already in the cache and fresh: answered from it.
    case fresh
    /// In the cache but stale; the origin said it is unchanged, so it is fresh again.
    case revalidated
    /// Answered, but not stored: why, as the proxy says (`no-store`, `too-large`, …).
    case notStored(String)
    /// No usable answer: an error status, a connection failure, an invalid line.
    case failed(String)

    /// Judges a complete answer. `cacheStatus` is the `Cache-Status` field value (RFC 9211), or nil;
    /// `cacheName` the name of the cache whose entry counts (Larder's `via_name`), nil for the last
    /// entry, which the cache nearest the client adds. `errorText` is the start of an error body.
    public static func classify(status: Int, reason: String, cacheStatus: String?, cacheName: String? = nil,
                                errorText: String = "") -> WarmOutcome {
        let entry = cacheStatus.flatMap { CacheStatusEntry.pick(from: $0, name: cacheName) }
        if status >= 400 || status < 200 {
            var why = "HTTP \(status)" + (reason.isEmpty ? "" : " \(reason)")
            if !errorText.isEmpty { why += ": " + errorText }
            return .failed(why)
        }
        guard let entry else { return .notStored("no Cache-Status in the answer") }
        if entry.has("hit") { return .fresh }
        if entry.has("stored") { return .stored }
        let detail = entry.value("detail")
        if entry.value("fwd") == "stale", let d = detail, d.hasPrefix("revalidated"), d != "revalidated-head-changed" {
            return .revalidated
        }
        if let detail { return .notStored(detail) }
        if let fwd = entry.value("fwd") { return .notStored("not cacheable (fwd=\(fwd))") }
        return .notStored("not cacheable")
    }
}

/// One member of a `Cache-Status` list: the cache's name and its parameters, read leniently
/// (a malformed member is kept as far as it could be read; nothing here can fail).
public struct CacheStatusEntry: Sendable, Equatable {
    public let name: String
    /// Parameters in order; a bare key (`hit`) has the value "?1".
    public let parameters: [(key: String, value: String)]

    public static func == (a: CacheStatusEntry, b: CacheStatusEntry) -> Bool {
        a.name == b.name && a.parameters.map(\.key) == b.parameters.map(\.key)
            && a.parameters.map(\.value) == b.parameters.map(\.value)
    }

    public func has(_ key: String) -> Bool { parameters.contains { $0.key == key && $0.value != "?0" } }
    public func value(_ key: String) -> String? { parameters.first { $0.key == key }?.value }

    /// The member named `name`, the last such; without a name, or when none has it, the last member.
    public static func pick(from field: String, name: String?) -> CacheStatusEntry? {
        let all = parse(field)
        guard let name else { return all.last }
        return all.last { $0.name == name } ?? all.last
    }

    /// Every member of the list, split at commas and semicolons outside quoted strings.
    public static func parse(_ field: String) -> [CacheStatusEntry] {
        var members: [[String]] = [[]]
        var current = ""
        var quoted = false
        var escaped = false
        for ch in field {
            if quoted {
                if escaped { current.append(ch); escaped = false } else if ch == "\\" { escaped = true }
                else if ch == "\"" { quoted = false } else { current.append(ch) }
                continue
            }
            switch ch {
            case "\"": quoted = true
            case ";":
                members[members.count - 1].append(current)
                current = ""
            case ",":
                members[members.count - 1].append(current)
                current = ""
                members.append([])
            default: current.append(ch)
            }
        }
        members[members.count - 1].append(current)
        return members.compactMap { parts in
            let trimmed = parts.map { $0.trimmingBlanks }
            guard let first = trimmed.first, !first.isEmpty else { return nil }
            let params = trimmed.dropFirst().filter { !$0.isEmpty }.map { p -> (key: String, value: String) in
                guard let eq = p.firstIndex(of: "=") else { return (p.lowercased(), "?1") }
                return (String(p[..<eq]).trimmingBlanks.lowercased(), String(p[p.index(after: eq)...]).trimmingBlanks)
            }
            return CacheStatusEntry(name: first, parameters: params)
        }
    }
}

extension String {
    var trimmingBlanks: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}
