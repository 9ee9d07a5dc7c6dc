import HTTPWire

/// One URL of a warm list, as it will be asked of the proxy.
public struct WarmURL: Sendable, Equatable {
    /// The absolute URL, sent as the request target.
    public let text: String
    /// Its `Host` field value (the URL's authority).
    public let host: String
    /// Its line in the list (1-based), for reports.
    public let line: Int
}

/// A line that is not a URL Larder can warm, and why.
public struct WarmRejectedLine: Sendable, Equatable {
    public let line: Int
    /// The line as given, cut to 200 bytes, non-printable bytes replaced, for reports.
    public let text: String
    public let reason: String
}

/// A list of URLs to warm, one a line (`larder warm FILE` and `POST /warm` read the same format).
/// Empty lines and lines starting with `#` are skipped; surrounding blanks and a CR before the LF
/// are ignored. Pure: bytes in, URLs and rejected lines out.
public struct WarmList: Sendable, Equatable {
    public var urls: [WarmURL] = []
    public var rejected: [WarmRejectedLine] = []

    /// URLs (and lines) longer than this are refused, as the proxy refuses such request targets.
    public static let maxLineBytes = 8_192

    /// Lines to warm, valid or not: what a progress report counts as the total.
    public var count: Int { urls.count + rejected.count }

    public init(urls: [WarmURL] = [], rejected: [WarmRejectedLine] = []) {
        self.urls = urls
        self.rejected = rejected
    }

    public static func parse(_ bytes: [UInt8]) -> WarmList {
        var list = WarmList()
        var lineNumber = 0
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != 0x0A { end += 1 }
            lineNumber += 1
            list.take(bytes[start..<end], line: lineNumber)
            start = end + 1
        }
        return list
    }

    public static func parse(_ text: String) -> WarmList { parse(Array(text.utf8)) }

    private mutating func take(_ raw: ArraySlice<UInt8>, line: Int) {
        var lo = raw.startIndex
        var hi = raw.endIndex
        while lo < hi, raw[lo] == 0x20 || raw[lo] == 0x09 { lo += 1 }
        while hi > lo, raw[hi - 1] == 0x20 || raw[hi - 1] == 0x09 || raw[hi - 1] == 0x0D { hi -= 1 }
        let trimmed = raw[lo..<hi]
        if trimmed.isEmpty || trimmed.first == 0x23 { return }  // "#"
        switch Self.check(trimmed) {
        case .success(let host):
            urls.append(WarmURL(text: String(decoding: trimmed, as: UTF8.self), host: host, line: line))
        case .failure(let problem):
            rejected.append(WarmRejectedLine(line: line, text: Self.printable(trimmed), reason: problem.reason))
        }
    }

    private struct Problem: Error {
        let reason: String
    }

    /// The URL's `Host` value, or why the line is not a URL to warm.
    private static func check(_ line: ArraySlice<UInt8>) -> Result<String, Problem> {
        guard line.count <= maxLineBytes else { return .failure(Problem(reason: "longer than \(maxLineBytes) bytes")) }
        guard line.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            return .failure(Problem(reason: "spaces, control characters or non-ASCII bytes (percent-encode them)"))
        }
        let bytes = Array(line)
        let lower = String(decoding: bytes.prefix(8), as: UTF8.self).lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            return .failure(Problem(reason: "not an http:// or https:// URL"))
        }
        let parsed = bytes.withUnsafeBytes { raw -> Result<RequestTarget, HTTPWireError> in
            do throws(HTTPWireError) {
                return .success(try RequestTarget.parse(raw, method: .get))
            } catch {
                return .failure(error)
            }
        }
        let target: RequestTarget
        switch parsed {
        case .success(let t): target = t
        case .failure(let error): return .failure(Problem(reason: "not a valid URL (\(error.reason))"))
        }
        guard target.form == .absolute, !target.host.isEmpty else {
            return .failure(Problem(reason: "not an absolute URL with a host"))
        }
        let authorityStart = target.scheme == .https ? 8 : 7
        let authorityEnd = target.pathOffset ?? bytes.count
        return .success(String(decoding: bytes[authorityStart..<authorityEnd], as: UTF8.self))
    }

    private static func printable(_ line: ArraySlice<UInt8>) -> String {
        String(decoding: line.prefix(200).map { $0 >= 0x20 && $0 < 0x7F ? $0 : 0x3F }, as: UTF8.self)
            + (line.count > 200 ? "…" : "")
    }
}
