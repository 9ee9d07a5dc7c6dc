/// One line of an MLSD listing (RFC 3659 §7): `fact=value;fact=value; name`.
public enum MLSDLine {
    /// The entry a line describes; nil for the directory itself and its parent (`cdir`, `pdir`,
    /// `.`, `..`) and for a line without the space before the name. Fact names and the `type`
    /// value are case-insensitive; `size` must be decimal and `modify` a valid `time-val`, or they
    /// are left out. The name is everything after the first space, spaces included.
    public static func parse(_ line: ArraySlice<UInt8>) -> FTPListingEntry? {
        guard let space = line.firstIndex(of: ftpSP) else { return nil }
        let name = Array(line[(space + 1)...])
        guard !name.isEmpty, name != [0x2E], name != [0x2E, 0x2E] else { return nil }
        var entry = FTPListingEntry(name: name, kind: .other)
        for fact in line[line.startIndex..<space].split(separator: 0x3B) {
            guard let equals = fact.firstIndex(of: 0x3D) else { continue }
            let key = fact[fact.startIndex..<equals]
            let value = fact[(equals + 1)...]
            if equalsIgnoringCase(key, "type") {
                guard let kind = kind(value) else { return nil }
                entry.kind = kind
            } else if equalsIgnoringCase(key, "size") {
                entry.size = decimalValue(value, limit: FTPReply.maxFileSize)
            } else if equalsIgnoringCase(key, "modify") {
                entry.modified = CivilTime.timeVal(value)
            }
        }
        return entry
    }

    /// The kind a `type` fact names; nil for `cdir` and `pdir`, which are not entries.
    private static func kind(_ value: ArraySlice<UInt8>) -> FTPListingEntry.Kind? {
        if equalsIgnoringCase(value, "file") { return .file }
        if equalsIgnoringCase(value, "dir") { return .directory }
        if equalsIgnoringCase(value, "cdir") || equalsIgnoringCase(value, "pdir") { return nil }
        // `OS.unix=slink:target` and `OS.unix=symlink`, as several servers write links.
        let lower = value.map(lowercased)
        if lower.starts(with: Array("os.unix=slink".utf8)) || lower.starts(with: Array("os.unix=symlink".utf8)) {
            return .link
        }
        return .other
    }
}
