/// A directory listing as the small HTML page the gateway answers with.
///
/// Everything from the server is treated as hostile: every name is HTML-escaped in text and in
/// attributes, and percent-encoded in links, so no name can close a tag, start a script or point a
/// link elsewhere. Links are absolute `ftp://` URLs without credentials, so a client follows them
/// through the proxy again and a password never lands in a page that may be cached.
public enum FTPListingPage {
    /// The page for `entries` of the directory `url` names: directories first, then by name bytes;
    /// a parent link unless at the login directory; a note when the listing was truncated.
    public static func render(url: FTPURL, entries: [FTPListingEntry], truncated: Bool) -> [UInt8] {
        var out: [UInt8] = []
        let title = Array("Index of ".utf8) + escaped(url.displayPath)
        out += Array("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>".utf8)
        out += title
        out += Array("</title>\n</head>\n<body>\n<h1>".utf8)
        out += title
        out += Array("</h1>\n<table>\n<tr><th>Name</th><th>Size</th><th>Modified</th></tr>\n".utf8)
        if !url.segments.isEmpty {
            let parent = url.link(to: Array(url.segments.dropLast()), directory: true)
            out += Array("<tr><td><a href=\"".utf8) + escaped(Array(parent.utf8))
            out += Array("\">Parent directory</a></td><td></td><td></td></tr>\n".utf8)
        }
        for entry in sorted(entries) {
            let isDirectory = entry.kind == .directory
            let href = url.link(to: url.segments + [entry.name], directory: isDirectory)
            out += Array("<tr><td><a href=\"".utf8) + escaped(Array(href.utf8)) + Array("\">".utf8)
            out += escaped(entry.name)
            if isDirectory { out.append(0x2F) }
            out += Array("</a></td><td>".utf8)
            if let size = entry.size { appendDecimal(size, to: &out) }
            out += Array("</td><td>".utf8)
            if let modified = entry.modified { appendDate(modified, to: &out) }
            out += Array("</td></tr>\n".utf8)
        }
        out += Array("</table>\n".utf8)
        if truncated {
            out += Array("<p>The listing was cut short: only its first \(entries.count) entries are shown.</p>\n".utf8)
        }
        out += Array("</body>\n</html>\n".utf8)
        return out
    }

    /// Directories first, then by name bytes.
    static func sorted(_ entries: [FTPListingEntry]) -> [FTPListingEntry] {
        entries.sorted { a, b in
            let aIsDirectory = a.kind == .directory
            let bIsDirectory = b.kind == .directory
            if aIsDirectory != bIsDirectory { return aIsDirectory }
            return a.name.lexicographicallyPrecedes(b.name)
        }
    }

    /// `bytes` read as UTF-8 (invalid sequences and control bytes shown as U+FFFD) with `& < > " '`
    /// escaped: safe in text and in a quoted attribute.
    static func escaped(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for b in String(decoding: bytes, as: UTF8.self).utf8 {
            switch b {
            case 0x26: out += Array("&amp;".utf8)
            case 0x3C: out += Array("&lt;".utf8)
            case 0x3E: out += Array("&gt;".utf8)
            case 0x22: out += Array("&quot;".utf8)
            case 0x27: out += Array("&#39;".utf8)
            case _ where isControlByte(b): out += [0xEF, 0xBF, 0xBD]
            default: out.append(b)
            }
        }
        return out
    }

    /// `YYYY-MM-DD HH:MM` in UTC.
    static func appendDate(_ seconds: Int64, to out: inout [UInt8]) {
        let f = CivilTime.fields(min(max(seconds, -62_167_219_200), 253_402_300_799))
        appendTwoDigits(f.year / 100, to: &out)
        appendTwoDigits(f.year % 100, to: &out)
        out.append(0x2D)
        appendTwoDigits(f.month, to: &out)
        out.append(0x2D)
        appendTwoDigits(f.day, to: &out)
        out.append(ftpSP)
        appendTwoDigits(f.hour, to: &out)
        out.append(0x3A)
        appendTwoDigits(f.minute, to: &out)
    }
}
