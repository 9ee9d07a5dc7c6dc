/// The media type of a file by its name's extension: FTP says nothing about content, and clients
/// (browsers above all) want a Content-Type.
///
/// Compressed files are named by their container (`application/gzip`), never as a content coding,
/// so a client stores the bytes it was sent.
public enum ContentTypes {
    /// For names without a known extension: bytes, which a client saves rather than renders.
    public static let fallback = "application/octet-stream"

    /// The type for the extension after the name's last `.`, any case; `fallback` when there is
    /// none or it is not known.
    public static func mediaType(forName name: [UInt8]) -> String {
        guard let dot = name.lastIndex(of: 0x2E), dot + 1 < name.count, name.count - dot <= 9 else { return fallback }
        let ext = String(decoding: name[(dot + 1)...].map(lowercased), as: UTF8.self)
        return byExtension[ext] ?? fallback
    }

    private static let byExtension: [String: String] = [
        "txt": "text/plain", "text": "text/plain", "md": "text/markdown", "c": "text/plain", "h": "text/plain",
        "log": "text/plain", "diff": "text/plain", "patch": "text/plain", "csv": "text/csv",
        "html": "text/html", "htm": "text/html", "css": "text/css", "js": "text/javascript",
        "json": "application/json", "xml": "application/xml",
        "gz": "application/gzip", "tgz": "application/gzip", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "zst": "application/zstd", "lz": "application/x-lzip", "lzma": "application/x-lzma",
        "zip": "application/zip", "tar": "application/x-tar", "7z": "application/x-7z-compressed",
        "iso": "application/x-iso9660-image", "img": "application/octet-stream", "bin": "application/octet-stream",
        "deb": "application/vnd.debian.binary-package", "rpm": "application/x-rpm",
        "pdf": "application/pdf", "ps": "application/postscript",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "svg": "image/svg+xml",
        "webp": "image/webp", "ico": "image/vnd.microsoft.icon",
        "sig": "application/pgp-signature", "asc": "application/pgp-signature", "gpg": "application/pgp-signature",
        "sha256": "text/plain", "sha512": "text/plain", "sha1": "text/plain", "md5": "text/plain",
    ]
}
