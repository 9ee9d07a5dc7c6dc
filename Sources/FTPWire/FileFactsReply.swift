/// What SIZE and MDTM replies (RFC 3659 §3, §4) say about a file, read strictly: a value the
/// gateway cannot trust is no value, never a guess.
extension FTPReply {
    /// Largest size accepted: 2^53, beyond any real file and exact in every number type a client
    /// might read Content-Length into.
    public static let maxFileSize = 1 << 53

    /// The length from `213 n`: decimal digits only (blanks around them allowed), at most
    /// `maxFileSize`. Nil for another code or any other text.
    public var fileSize: Int? {
        guard code == 213, lines.count == 1 else { return nil }
        let text = trimmedBlanks(lines[0][...])
        guard text.count <= 16 else { return nil }
        return decimalValue(text, limit: Self.maxFileSize)
    }

    /// The modification time from `213 YYYYMMDDHHMMSS[.fraction]`, in seconds since the epoch
    /// (the time is UTC, RFC 3659 §2.3). Nil for another code or an impossible date.
    public var modificationTime: Int64? {
        guard code == 213, lines.count == 1 else { return nil }
        return CivilTime.timeVal(trimmedBlanks(lines[0][...]))
    }
}
