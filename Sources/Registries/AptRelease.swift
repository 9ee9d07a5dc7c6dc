/// What a Debian `Release` or `InRelease` file says about a suite, as far as a mirror needs it:
/// whether clients fetch indexes by hash, how long the file is valid, and each index file's
/// SHA-256 and size (the Debian repository format, "Release files").
///
/// `InRelease` is the same text clear-signed (RFC 4880 §7): the armor is stripped and the
/// signature not verified (apt verifies it; a mirror only reads the listing). Hostile text gives
/// an error, never a partial reading: lines over `maximumLineLength`, a field given twice, a
/// `SHA256` line that does not read, a path that climbs out of the suite (`..`, a leading `/`), or
/// one path listed twice with different hashes.
public struct AptRelease: Sendable, Equatable {
    public struct FileHash: Sendable, Equatable {
        /// Lowercase hex, 64 digits.
        public var sha256: String
        public var size: Int64

        public init(sha256: String, size: Int64) {
            self.sha256 = sha256
            self.size = size
        }
    }

    /// A Release line is a field or one file's hash line; nothing real comes near this.
    public static let maximumLineLength = 16_384

    public var suite: String?
    public var codename: String?
    /// `Acquire-By-Hash: yes`: clients ask for `<dir>/by-hash/SHA256/<hex>` rather than the name.
    public var acquireByHash = false
    public var date: Int64?
    public var validUntil: Int64?
    /// Paths relative to `dists/<suite>/` → their SHA-256 and size.
    public var sha256: [String: FileHash] = [:]

    public init(text: [UInt8]) throws(AptReleaseError) {
        try read(Self.fields(Self.signedText(text)))
    }

    /// Whether the file has expired (`Valid-Until` passed); a file without one never does.
    public func isExpired(now: Int64) -> Bool {
        validUntil.map { now > $0 } ?? false
    }

    /// The by-hash path clients fetch for `relativePath` (under `dists/<suite>/`), when the suite
    /// serves them and lists the file: `main/binary-amd64/by-hash/SHA256/<hex>`.
    public func byHashPath(for relativePath: String) -> String? {
        guard acquireByHash, let hash = sha256[relativePath] else { return nil }
        return AptDistPath.byHashPath(directoryOf: relativePath, sha256: hash.sha256)
    }

    // MARK: - Fields

    /// One `Name: value` field and the continuation lines under it, trimmed.
    private struct Field {
        var name: String
        var value: String
        var continuation: [String] = []
    }

    private mutating func read(_ fields: [Field]) throws(AptReleaseError) {
        var seen = Set<String>()
        for field in fields {
            let name = field.name.lowercased()
            guard seen.insert(name).inserted else { throw .duplicateField(field.name) }
            switch name {
            case "suite": suite = field.value
            case "codename": codename = field.value
            case "acquire-by-hash": acquireByHash = field.value.lowercased() == "yes"
            case "date": date = try Self.date(field)
            case "valid-until": validUntil = try Self.date(field)
            case "sha256": sha256 = try Self.hashes(field.continuation)
            default: break
            }
        }
    }

    private static func date(_ field: Field) throws(AptReleaseError) -> Int64 {
        guard let seconds = Timestamps.rfc2822(field.value) else { throw .invalidDate(field.name) }
        return seconds
    }

    /// ` <sha256> <size> <path>` lines.
    private static func hashes(_ lines: [String]) throws(AptReleaseError) -> [String: FileHash] {
        var hashes: [String: FileHash] = [:]
        for line in lines {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count == 3, words[0].utf8.count == 64, words[0].utf8.allSatisfy({ hexValue($0) != nil }),
                  words[1].utf8.allSatisfy(isDecimalDigit), let size = Int64(words[1]) else {
                throw .invalidHashLine(line)
            }
            let path = String(words[2])
            guard isInsideSuite(path) else { throw .unsafePath(path) }
            let hash = FileHash(sha256: words[0].lowercased(), size: size)
            if let earlier = hashes[path], earlier != hash { throw .conflictingEntries(path) }
            hashes[path] = hash
        }
        return hashes
    }

    /// A relative path with no `.` or `..` segment and no empty one.
    private static func isInsideSuite(_ path: String) -> Bool {
        path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }

    // MARK: - Text

    /// The signed text of an `InRelease` (armor headers, dash-escaping and signature removed), or
    /// the text itself when it is not clear-signed.
    static func signedText(_ text: [UInt8]) throws(AptReleaseError) -> [Substring] {
        let lines = try lines(text)
        guard let begin = lines.firstIndex(where: { !$0.isEmpty }),
              lines[begin] == "-----BEGIN PGP SIGNED MESSAGE-----" else { return lines }
        // Armor headers (`Hash: SHA512`) end at the first empty line (RFC 4880 §7).
        guard let headersEnd = lines[begin...].firstIndex(where: \.isEmpty),
              let signature = lines[headersEnd...].firstIndex(of: "-----BEGIN PGP SIGNATURE-----") else {
            throw .unterminatedSignedMessage
        }
        // Dash-escaped lines (`- -----…`) start with `- ` (RFC 4880 §7.1).
        return lines[(headersEnd + 1)..<signature].map { $0.hasPrefix("- ") ? $0.dropFirst(2) : $0 }
    }

    /// The lines of `text` (LF or CRLF), each within the length bound.
    private static func lines(_ text: [UInt8]) throws(AptReleaseError) -> [Substring] {
        guard UTF8Validation.firstInvalidOffset(text) == nil else { throw .invalidUTF8 }
        let string = String(decoding: text, as: UTF8.self)
        var lines: [Substring] = []
        // Split as bytes: as Characters, CR LF is one grapheme and no `\n` would be found.
        for line in string.utf8.split(separator: 0x0A, omittingEmptySubsequences: false) {
            guard line.count <= maximumLineLength else { throw .lineTooLong }
            lines.append(Substring(line.last == 0x0D ? line.dropLast() : line))
        }
        return lines
    }

    /// The fields of the (one) paragraph: `Name: value` lines, each followed by its continuation
    /// lines (starting with a space or tab). Blank lines before and after it are ignored; a second
    /// paragraph is an error.
    private static func fields(_ lines: [Substring]) throws(AptReleaseError) -> [Field] {
        var fields: [Field] = []
        var paragraphEnded = false
        for line in lines {
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) {
                paragraphEnded = !fields.isEmpty
                continue
            }
            guard !paragraphEnded else { throw .multipleParagraphs }
            if line.first == " " || line.first == "\t" {
                guard !fields.isEmpty else { throw .invalidLine(String(line)) }
                fields[fields.count - 1].continuation.append(String(line.trimmingASCIIWhitespace()))
                continue
            }
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { throw .invalidLine(String(line)) }
            let value = line[line.index(after: colon)...].trimmingASCIIWhitespace()
            fields.append(Field(name: String(line[..<colon]), value: String(value)))
        }
        return fields
    }
}

public enum AptReleaseError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidUTF8
    case lineTooLong
    /// `-----BEGIN PGP SIGNED MESSAGE-----` without its signature block.
    case unterminatedSignedMessage
    case multipleParagraphs
    case invalidLine(String)
    case duplicateField(String)
    case invalidDate(String)
    case invalidHashLine(String)
    case unsafePath(String)
    case conflictingEntries(String)

    public var description: String {
        switch self {
        case .invalidUTF8: "Release file is not UTF-8"
        case .lineTooLong: "Release file has a line over \(AptRelease.maximumLineLength) bytes"
        case .unterminatedSignedMessage: "InRelease signed message has no signature block"
        case .multipleParagraphs: "Release file has more than one paragraph"
        case .invalidLine(let line): "Release file line does not read: \(line.prefix(80))"
        case .duplicateField(let name): "Release file gives \(name) twice"
        case .invalidDate(let name): "Release file's \(name) is not a date"
        case .invalidHashLine(let line): "Release file SHA256 line does not read: \(line.prefix(80))"
        case .unsafePath(let path): "Release file lists a path outside the suite: \(path.prefix(80))"
        case .conflictingEntries(let path): "Release file lists \(path.prefix(80)) twice with different hashes"
        }
    }
}
