/// What happened on the connections of one FTP session, as the caller reports it.
public enum FTPEvent: Sendable, Equatable {
    /// The control connection is ready: a new one (the greeting is next) or one from the pool.
    case connected
    /// A complete reply arrived on the control connection (see `FTPReplyParser`).
    case reply(FTPReply)
    /// The data connection asked for with `openData` is established.
    case dataConnected
    /// Bytes of a listing, after `collectListing` (or, since the order of two sockets is not
    /// fixed, any time after the MLSD or LIST command went out).
    case listingData([UInt8])
    /// The caller is done with the data connection and has closed it: the server closed it, or
    /// the answer's Content-Length bytes were relayed.
    case dataEnded
    /// The data connection could not be opened, or failed.
    case dataFailed
}

/// What the caller must do next, in the order given.
public enum FTPAction: Sendable, Equatable {
    /// Write this command line on the control connection.
    case send([UInt8])
    /// Open the data connection to the control connection's own peer address at this port. No
    /// host ever comes from the server (see `PassivePort`).
    case openData(port: Int)
    /// Close the data connection, dropping any bytes held from it, and report nothing back.
    case closeData
    /// Relay the data connection's bytes as the answer's body, up to its Content-Length; bytes
    /// that arrived before this action are held, not dropped.
    case streamData
    /// Hand the data connection's bytes to the session as `listingData`.
    case collectListing
    /// Answer the HTTP client. Given at most once per session.
    case answer(FTPAnswer)
    /// The exchange is complete and no data connection is open. With `reusable`, the control
    /// connection is logged in, in binary mode, in its login directory and idle: it may go back to
    /// a pool for the same server and credentials. Otherwise the caller closes it (QUIT first if
    /// it likes).
    case done(reusable: Bool)
    /// Something failed: close the control and data connections. After an answer with a `stream`
    /// body, that body is incomplete and the client's connection must end without completing it.
    case close
}
