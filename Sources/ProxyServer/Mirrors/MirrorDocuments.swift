import CachePolicy
import HTTPWire
import LarderConfig
import Registries

/// What a mirror does to the bytes and fields of an answer it holds: rewriting a document,
/// its validator, a redirect's `Location`, and the head they go out with. Pure.
enum MirrorDocuments {
    struct Rewritten {
        var body: [UInt8]
        /// What the rewrite left out, for the log.
        var note: String?
        /// A new `Content-Type` (PyPI's HTML made from its JSON).
        var contentType: [UInt8]?
    }

    enum Outcome {
        case rewritten(Rewritten)
        case failed(String)
    }

    /// The document as this client gets it: versions younger than `min_release_age` left out
    /// (and PyPI's HTML made from the JSON that dates them), then upstream file URLs pointed at the mirror.
    static func rewrite(_ body: [UInt8], document: IndexDocument, head: ResponseHead, exchange m: MirrorExchange,
                        now: Int64) -> Outcome {
        if let coding = head.headers.value(of: "content-encoding"), coding.lowercased() != "identity" {
            return .failed("it came with Content-Encoding \(coding)")
        }
        guard var format = document.rewriteFormat(contentType: head.headers.value(of: "content-type")) else {
            if m.config.minReleaseAge != nil, document == .pypiSimple {
                return .failed("a simple index that is not PEP 691 JSON carries no upload times for min_release_age")
            }
            return .rewritten(Rewritten(body: body, note: nil, contentType: nil))
        }
        var out = Rewritten(body: body, note: nil, contentType: nil)
        do throws(RegistryDocumentError) {
            if let age = m.config.minReleaseAge {
                let releaseAge = ReleaseAge(minimumAge: Int64(age), now: now)
                switch format {
                case .pypiSimpleJSON:
                    let filtered = try PyPISimpleFilter.filter(out.body, age: releaseAge)
                    out.body = filtered.document
                    out.note = filtered.removed.isEmpty ? nil : filtered.removed.summary
                    if m.clientWantsHTML {
                        out.body = try PyPISimpleHTML.render(fromJSON: out.body)
                        out.contentType = Array("text/html; charset=utf-8".utf8)
                        format = .pypiSimpleHTML
                    }
                case .pypiSimpleHTML:
                    return .failed("a simple index that is not PEP 691 JSON carries no upload times for min_release_age")
                case .npmPackument:
                    let filtered = try NPMReleaseFilter.filter(out.body, age: releaseAge)
                    out.body = filtered.document
                    out.note = filtered.removed.isEmpty ? nil : filtered.removed.summary
                case .pypiJSONAPI, .npmVersion, .cratesConfig:
                    break
                }
            }
            if m.match.rewritesURLs {
                out.body = try IndexRewrite.rewrite(out.body, as: format, with: m.urlMap).document
            }
        } catch {
            return .failed(error.description)
        }
        return .rewritten(out)
    }

    /// A strong validator of the rewritten bytes: `"m-<64-bit FNV-1a hex>"`.
    static func entityTag(_ body: [UInt8]) -> [UInt8] {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return Array("\"m-\(String(repeating: "0", count: 16 - hex.count))\(hex)\"".utf8)
    }

    /// Whether an `If-None-Match` list names `tag` (weakly, RFC 9110 §13.1.2), or is `*`.
    static func matches(_ validators: [UInt8], _ tag: [UInt8]) -> Bool {
        let space = [UInt8(ascii: " "), UInt8(ascii: "\t")]
        for item in validators.split(separator: UInt8(ascii: ",")) {
            var t = item.drop { space.contains($0) }
            while let last = t.last, space.contains(last) { t = t.dropLast() }
            if t.elementsEqual([UInt8(ascii: "*")]) { return true }
            if t.starts(with: [UInt8(ascii: "W"), UInt8(ascii: "/")]) { t = t.dropFirst(2) }
            if t.elementsEqual(tag) { return true }
        }
        return false
    }

    /// A redirect's target, mapped back onto the mirror: an absolute URL under one of its
    /// upstreams, or a path under its upstream's path (`/simple/six/` from `https://pypi.org/`).
    /// Anything else is left as it is.
    static func mapLocation(_ value: [UInt8], exchange m: MirrorExchange) -> [UInt8] {
        if let mapped = m.urlMap.rewrite(bytes: value) { return mapped }
        guard value.first == UInt8(ascii: "/"), value.dropFirst().first != UInt8(ascii: "/"),
              value.starts(with: m.routeUpstreamPath) else { return value }
        return m.routeBase + value.dropFirst(m.routeUpstreamPath.count)
    }

    /// `head` with `status`, without the `dropping` fields, plus `adding`: re-read from its
    /// serialized form, so the writer sees a head like any other.
    static func head(from head: ResponseHead, status: Int, dropping: [StaticString],
                     adding: [(name: StaticString, value: [UInt8])]) -> ResponseHead? {
        var text: [UInt8] = Array("HTTP/1.1 \(status) \(reasonPhrase(for: status))\r\n".utf8)
        let headers = head.headers
        for i in 0..<headers.count where !dropping.contains(where: { headers.nameEquals(at: i, $0) }) {
            headers.withBytes(headers.fields[i].name) { text.append(contentsOf: $0) }
            text.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
            headers.withBytes(headers.fields[i].value) { text.append(contentsOf: $0) }
            text.append(contentsOf: [13, 10])
        }
        for field in adding {
            text.append(contentsOf: UnsafeRawBufferPointer(start: field.name.utf8Start, count: field.name.utf8CodeUnitCount))
            text.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
            text.append(contentsOf: field.value)
            text.append(contentsOf: [13, 10])
        }
        text.append(contentsOf: [13, 10])
        var parsed = ResponseHead()
        let ok = text.withUnsafeBytes { bytes in
            (try? ResponseParser.parse(bytes, into: &parsed, requestMethod: .get, limits: HeadLimits(maxHeadBytes: 1 << 20, maxHeaderCount: 1_000))) != nil
        }
        return ok ? parsed : nil
    }
}

/// `min_release_age` for package files: a file is served once its `Last-Modified` (the time the
/// registry published it, on PyPI's and npm's file hosts) is at least the age ago.
enum MirrorRelease {
    /// Why the file is refused, nil when it may be served. A file without a readable
    /// `Last-Modified` is served: its version was already left out of the index if it was young.
    static func refusal(_ head: ResponseHead, config: MirrorConfig, now: Int64) -> String? {
        guard let age = config.minReleaseAge else { return nil }
        let verdict = ReleaseAge(minimumAge: Int64(age), now: now).verdict(lastModified: head.headers.value(of: "last-modified"))
        if case .refused(let reason) = verdict { return reason }
        return nil
    }
}
