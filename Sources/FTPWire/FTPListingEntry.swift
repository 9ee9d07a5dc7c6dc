/// One name in a directory listing, as far as the listing says.
public struct FTPListingEntry: Sendable, Equatable {
    /// What the name is. A listing does not say what a link points to; the gateway finds out when
    /// the link is requested (a file, or a directory it redirects to).
    public enum Kind: Sendable, Equatable {
        case file, directory, link, other
    }

    /// The name's bytes as the server sent them (not necessarily UTF-8).
    public var name: [UInt8]
    /// What the listing says the name is.
    public var kind: Kind
    /// Bytes, when the listing gives it.
    public var size: Int?
    /// Seconds since the epoch, when the listing gives a date the year of which is known.
    public var modified: Int64?

    /// An entry as a listing line gives it.
    public init(name: [UInt8], kind: Kind, size: Int? = nil, modified: Int64? = nil) {
        self.name = name
        self.kind = kind
        self.size = size
        self.modified = modified
    }
}
