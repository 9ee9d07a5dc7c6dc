import Testing
import FTPWire

private typealias S = Script

private let file = "ftp://ftp.example.org/pub/file.txt"
private let lastModified = "Last-Modified: Wed, 01 Jan 2020 12:00:00 GMT"
private let whole = "answer 200 {Content-Type: text/plain, Content-Length: 5, \(lastModified)} stream(5)"
private let html = "answer 200 {Content-Type: text/html; charset=utf-8} html"
private let mlsdBytes: [UInt8] = wire("type=cdir; .\r\ntype=file;size=5; file.txt\r\ntype=dir; sub\r\n")

/// SIZE and MDTM of the 5-byte file, then EPSV.
private let sizeAndDate: [ScriptStep] = [
    S.reply(213, "5", ["send MDTM pub/file.txt"]),
    S.reply(213, "20200101120000", ["send EPSV"]),
]

/// EPSV answered and the data connection made, then `command`.
private func passive(then command: String, port: Int = 40_000) -> [ScriptStep] {
    [
        S.reply(229, "Entering Extended Passive Mode (|||\(port)|)", ["openData \(port)"]),
        S.event(.dataConnected, ["send \(command)"]),
    ]
}

private let greetingBytes: [UInt8] = wire("""
    220-Welcome to the archive.\r
    220-Mirrors of everything.\r
    220 Ready.\r
    230-Hello anonymous.\r
     Please be nice.\r
    230 Login successful.\r

    """)

/// Replies parsed from bytes, as the caller would hand them over.
private func parsed(_ bytes: [UInt8]) -> [FTPReply] {
    var parser = FTPReplyParser()
    return (try? parser.feed(bytes)) ?? []
}

@Suite("FTPSession")
struct FTPSessionTests {
    static let scripts: [SessionScript] = [
        SessionScript(name: "anonymous file GET", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(150, "Opening BINARY mode data connection for file.txt (5 bytes).", [whole, "streamData"]),
                S.event(.dataEnded, []),
                S.reply(226, "Transfer complete.", ["done reusable"]),
            ]),
        SessionScript(name: "226 before the data connection ends", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(150, "Opening", [whole, "streamData"]),
                S.reply(226, "Transfer complete.", []),
                S.event(.dataEnded, ["done reusable"]),
            ]),
        SessionScript(name: "the data connection ends before 150 is read", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.event(.dataEnded, []),
                S.reply(150, "Opening", [whole, "streamData"]),
                S.reply(226, "Transfer complete.", ["done reusable"]),
            ]),
        SessionScript(name: "226 without 150", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(226, "Transfer complete.", [whole, "streamData"]),
                S.event(.dataEnded, ["done reusable"]),
            ]),
        SessionScript(name: "HEAD of a file", request: S.head(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
                S.reply(213, "20200101120000",
                        ["answer 200 {Content-Type: text/plain, Content-Length: 5, \(lastModified)} none", "done reusable"]),
            ]),
        SessionScript(name: "credentials", request: S.get(file, login: credentials("alice", "s3cret")), steps: [
            S.event(.connected, []),
            S.reply(220, "ready", ["send USER alice"]),
            S.reply(331, "Password required for alice", ["send PASS s3cret"]),
            S.reply(230, "User alice logged in", ["send TYPE I"]),
            S.reply(200, "Type set to I", ["send SIZE pub/file.txt"]),
        ]),
        SessionScript(name: "USER answered 230 at once", request: S.get(file), steps: [
            S.event(.connected, []),
            S.reply(220, "ready", ["send USER anonymous"]),
            S.reply(230, "Anonymous access granted", ["send TYPE I"]),
            S.reply(200, "ok", ["send SIZE pub/file.txt"]),
        ]),
        SessionScript(name: "530 at login is a 401 with a challenge", request: S.get(file, login: credentials("alice", "wrong")),
                      steps: [
            S.event(.connected, []),
            S.reply(220, "ready", ["send USER alice"]),
            S.reply(331, "Password required", ["send PASS wrong"]),
            S.reply(530, "Login incorrect.",
                    [#"answer 401 {WWW-Authenticate: Basic realm="FTP ftp.example.org"} "530 Login incorrect.\n""#, "close"]),
        ]),
        SessionScript(name: "530 to USER", request: S.get("ftp://h:2121/x"), steps: [
            S.event(.connected, []),
            S.reply(220, "ready", ["send USER anonymous"]),
            S.reply(530, "No anonymous access.",
                    [#"answer 401 {WWW-Authenticate: Basic realm="FTP h:2121"} "530 No anonymous access.\n""#, "close"]),
        ]),
        SessionScript(name: "332 (an account is needed) is not supported", request: S.get(file), steps: [
            S.event(.connected, []),
            S.reply(220, "ready", ["send USER anonymous"]),
            S.reply(331, "Password", ["send PASS larder@"]),
            S.reply(332, "Need account", [#"answer 502 {} "332 Need account\n""#, "close"]),
        ]),
        SessionScript(name: "550 on a file is a 404 with the server's text", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(550, "pub/file.txt: No such file or directory", ["send CWD pub/file.txt"]),
                S.reply(550, "Failed to change directory.",
                        [#"answer 404 {} "550 pub/file.txt: No such file or directory\n""#, "done reusable"]),
            ]),
        SessionScript(name: "550 on a file that is a directory is a 301", request: S.get("ftp://ftp.example.org/pub"), steps:
            S.anonymousLogin(then: "send SIZE pub") + [
                S.reply(550, "pub: not a regular file", ["send CWD pub"]),
                S.reply(250, "Directory successfully changed.", [
                    #"answer 301 {Location: ftp://ftp.example.org/pub/} "This is a directory: ftp://ftp.example.org/pub/\n""#,
                    "done not reusable",
                ]),
            ]),
        SessionScript(name: "no SIZE, RETR 550, and CWD finds a directory", request: S.get("ftp://h/pub"), steps:
            S.anonymousLogin(then: "send SIZE pub") + [
                S.reply(502, "SIZE not implemented", ["send MDTM pub"]),
                S.reply(502, "MDTM not implemented", ["send EPSV"]),
            ] + passive(then: "RETR pub") + [
                S.reply(550, "Not a plain file", ["closeData", "send CWD pub"]),
                S.reply(250, "ok", [#"answer 301 {Location: ftp://h/pub/} "This is a directory: ftp://h/pub/\n""#,
                                    "done not reusable"]),
            ]),
        SessionScript(name: "RETR 550 and CWD 550 is a 404 with the RETR's text", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(550, "Permission denied", ["closeData", "send CWD pub/file.txt"]),
                S.reply(550, "Not a directory", [#"answer 404 {} "550 Permission denied\n""#, "done reusable"]),
            ]),
        SessionScript(name: "a directory with a SIZE: RETR 550 and CWD 250 is a 301", request: S.get("ftp://h/d"), steps:
            S.anonymousLogin(then: "send SIZE d") + [
                S.reply(213, "4096", ["send MDTM d"]),
                S.reply(213, "20200101120000", ["send EPSV"]),
            ] + passive(then: "RETR d") + [
                S.reply(550, "Is a directory", ["closeData", "send CWD d"]),
                S.reply(250, "ok", [#"answer 301 {Location: ftp://h/d/} "This is a directory: ftp://h/d/\n""#,
                                    "done not reusable"]),
            ]),
        SessionScript(name: "no SIZE: a body of unknown length", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(500, "Unknown command", ["send MDTM pub/file.txt"]),
                S.reply(550, "Could not get modification time", ["send EPSV"]),
            ] + passive(then: "RETR pub/file.txt") + [
                S.reply(150, "Opening", ["answer 200 {Content-Type: text/plain} stream(?)", "streamData"]),
                S.event(.dataEnded, []),
                S.reply(226, "done", ["done reusable"]),
            ]),
        SessionScript(name: "directory with MLSD", request: S.get("ftp://ftp.example.org/pub/"), steps:
            S.anonymousLogin(then: "send CWD pub") + [
                S.reply(250, "Directory successfully changed.", ["send EPSV"]),
            ] + passive(then: "MLSD") + [
                S.reply(150, "Here comes the directory listing.", ["collectListing"]),
                S.event(.listingData(mlsdBytes), []),
                S.reply(226, "Directory send OK.", []),
                S.event(.dataEnded, [html, "done not reusable"]),
            ]),
        SessionScript(name: "the login directory: no CWD, reusable", request: S.get("ftp://ftp.example.org/"), steps:
            S.anonymousLogin(then: "send EPSV") + passive(then: "MLSD") + [
                S.reply(150, "Here comes the directory listing.", ["collectListing"]),
                S.event(.listingData(mlsdBytes), []),
                S.event(.dataEnded, []),
                S.reply(226, "Directory send OK.", [html, "done reusable"]),
            ]),
        SessionScript(name: "listing bytes before the 150 is read", request: S.get("ftp://h/"), steps:
            S.anonymousLogin(then: "send EPSV") + passive(then: "MLSD") + [
                S.event(.listingData(mlsdBytes), []),
                S.event(.dataEnded, []),
                S.reply(150, "Here comes the directory listing.", ["collectListing"]),
                S.reply(226, "Directory send OK.", [html, "done reusable"]),
            ]),
        SessionScript(name: "MLSD refused: LIST on a new data connection", request: S.get("ftp://h/pub/"), steps:
            S.anonymousLogin(then: "send CWD pub") + [
                S.reply(250, "ok", ["send EPSV"]),
            ] + passive(then: "MLSD") + [
                S.reply(500, "Unknown command MLSD", ["closeData", "send EPSV"]),
            ] + passive(then: "LIST", port: 40_001) + [
                S.reply(150, "Opening ASCII mode data connection for file list", ["collectListing"]),
                S.event(.listingData(wire("-rw-r--r-- 1 ftp ftp 5 Jan  1  2021 file.txt\r\n")), []),
                S.event(.dataEnded, []),
                S.reply(226, "Transfer complete", [html, "done not reusable"]),
            ]),
        SessionScript(name: "a listing over its bound is answered truncated at once",
                      request: S.get("ftp://h/"), listingLimits: FTPListingLimits(maxEntries: 1), steps:
            S.anonymousLogin(then: "send EPSV") + passive(then: "MLSD") + [
                S.reply(150, "Here comes the directory listing.", ["collectListing"]),
                S.event(.listingData(mlsdBytes), [html, "closeData", "done not reusable"]),
                S.reply(226, "Directory send OK.", []),
            ]),
        SessionScript(name: "HEAD of a directory", request: S.head("ftp://h/pub/"), steps:
            S.anonymousLogin(then: "send CWD pub") + [
                S.reply(250, "ok", ["answer 200 {Content-Type: text/html; charset=utf-8} none", "done not reusable"]),
            ]),
        SessionScript(name: "a directory that is not there", request: S.get("ftp://h/nothere/"), steps:
            S.anonymousLogin(then: "send CWD nothere") + [
                S.reply(550, "Failed to change directory.", [#"answer 404 {} "550 Failed to change directory.\n""#,
                                                             "done reusable"]),
            ]),
        SessionScript(name: "EPSV refused: PASV", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
                S.reply(213, "20200101120000", ["send EPSV"]),
                S.reply(502, "EPSV not implemented", ["send PASV"]),
                S.reply(227, "Entering Passive Mode (192,0,2,10,156,64).", ["openData 40000"]),
                S.event(.dataConnected, ["send RETR pub/file.txt"]),
                S.reply(150, "Opening", [whole, "streamData"]),
            ]),
        SessionScript(name: "PASV naming another host: only its port is used", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
                S.reply(213, "20200101120000", ["send EPSV"]),
                S.reply(500, "EPSV?", ["send PASV"]),
                S.reply(227, "Entering Passive Mode (10,66,6,6,0,25)", ["openData 25"]),
                S.event(.dataConnected, ["send RETR pub/file.txt"]),
            ]),
        SessionScript(name: "REST honoured: 206 to the end, reusable", request: S.get(file, range: FTPByteRange(start: 2)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "REST 2") + [
                S.reply(350, "Restarting at 2.", ["send RETR pub/file.txt"]),
                S.reply(150, "Opening", [
                    "answer 206 {Content-Type: text/plain, Content-Range: bytes 2-4/5, Content-Length: 3, \(lastModified)} stream(3)",
                    "streamData",
                ]),
                S.event(.dataEnded, []),
                S.reply(226, "Transfer complete.", ["done reusable"]),
            ]),
        SessionScript(name: "a range with an end: 206, then not reusable",
                      request: S.get(file, range: FTPByteRange(start: 1, end: 2)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "REST 1") + [
                S.reply(350, "Restarting at 1.", ["send RETR pub/file.txt"]),
                S.reply(150, "Opening", [
                    "answer 206 {Content-Type: text/plain, Content-Range: bytes 1-2/5, Content-Length: 2, \(lastModified)} stream(2)",
                    "streamData",
                ]),
                S.event(.dataEnded, ["done not reusable"]),
                S.reply(426, "Connection closed; transfer aborted.", []),
            ]),
        SessionScript(name: "a range past the end of the file is clamped",
                      request: S.get(file, range: FTPByteRange(start: 3, end: 99)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "REST 3") + [
                S.reply(350, "Restarting at 3.", ["send RETR pub/file.txt"]),
                S.reply(150, "Opening", [
                    "answer 206 {Content-Type: text/plain, Content-Range: bytes 3-4/5, Content-Length: 2, \(lastModified)} stream(2)",
                    "streamData",
                ]),
                S.event(.dataEnded, []),
                S.reply(226, "Transfer complete.", ["done reusable"]),
            ]),
        SessionScript(name: "REST refused: the whole file as a 200", request: S.get(file, range: FTPByteRange(start: 2)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "REST 2") + [
                S.reply(502, "REST not implemented", ["send RETR pub/file.txt"]),
                S.reply(150, "Opening", [whole, "streamData"]),
                S.event(.dataEnded, []),
                S.reply(226, "Transfer complete.", ["done reusable"]),
            ]),
        SessionScript(name: "a range of the whole file is a plain 200 without REST",
                      request: S.get(file, range: FTPByteRange(start: 0, end: 4)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt")),
        SessionScript(name: "a range starting at the end is a 416 without a data connection",
                      request: S.get(file, range: FTPByteRange(start: 5)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", [#"answer 416 {Content-Range: bytes */5} "The file has 5 bytes.\n""#, "done reusable"]),
            ]),
        SessionScript(name: "a range is ignored when the size is unknown", request: S.get(file, range: FTPByteRange(start: 2)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(502, "no SIZE", ["send MDTM pub/file.txt"]),
                S.reply(502, "no MDTM", ["send EPSV"]),
            ] + passive(then: "RETR pub/file.txt") + [
                S.reply(150, "Opening", ["answer 200 {Content-Type: text/plain} stream(?)", "streamData"]),
            ]),
        SessionScript(name: "HEAD ignores a range", request: FTPRequest(method: .head, url: url(file), credentials: .anonymous,
                                                                        range: FTPByteRange(start: 9)),
                      steps: S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
                S.reply(213, "20200101120000",
                        ["answer 200 {Content-Type: text/plain, Content-Length: 5, \(lastModified)} none", "done reusable"]),
            ]),
        SessionScript(name: "421 mid-transfer ends the body", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(150, "Opening", [whole, "streamData"]),
                S.reply(421, "Timeout.", ["close"]),
                S.event(.dataEnded, []),
            ]),
        SessionScript(name: "426 after the answer ends the body", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(150, "Opening", [whole, "streamData"]),
                S.event(.dataEnded, []),
                S.reply(426, "Failure writing network stream.", ["close"]),
            ]),
        SessionScript(name: "If-Modified-Since at the file's MDTM: 304, no transfer",
                      request: S.get(file, ifModifiedSince: 1_577_880_000), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
                S.reply(213, "20200101120000", ["answer 304 {\(lastModified)} none", "done reusable"]),
            ]),
        SessionScript(name: "HEAD with If-Modified-Since: a 200, whose length a revalidating cache compares",
                      request: S.head(file, ifModifiedSince: 1_577_880_000), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
                S.reply(213, "20200101120000",
                        ["answer 200 {Content-Type: text/plain, Content-Length: 5, \(lastModified)} none", "done reusable"]),
            ]),
        SessionScript(name: "If-Modified-Since before the file's MDTM: the file",
                      request: S.get(file, ifModifiedSince: 1_577_879_999), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate),
        SessionScript(name: "If-Modified-Since without an MDTM: the file",
                      request: S.get(file, ifModifiedSince: 1_577_880_000), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
                S.reply(502, "MDTM not implemented", ["send EPSV"]),
            ]),
        SessionScript(name: "a few 1yz before a final reply are waited through", request: S.head(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(150, "wait", []), S.reply(120, "wait", []), S.reply(150, "wait", []), S.reply(110, "wait", []),
                S.reply(213, "5", ["send MDTM pub/file.txt"]),
            ]),
        SessionScript(name: "1yz replies without end are a 502", request: S.head(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(150, "x", []), S.reply(150, "x", []), S.reply(150, "x", []), S.reply(150, "x", []),
                S.reply(150, "x", [#"answer 502 {} none"#, "close"]),
            ]),
        SessionScript(name: "421 as the greeting", request: S.get(file), steps: [
            S.event(.connected, []),
            S.reply(421, "Too many users.", [#"answer 502 {} "421 Too many users.\n""#, "close"]),
        ]),
        SessionScript(name: "421 before the transfer", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(421, "Service not available, closing control connection.",
                        [#"answer 502 {} "421 Service not available, closing control connection.\n""#, "close"]),
            ]),
        SessionScript(name: "425 to RETR", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(425, "Cannot open data connection.",
                        ["closeData", #"answer 502 {} "425 Cannot open data connection.\n""#, "done reusable"]),
            ]),
        SessionScript(name: "451 to RETR is a 503", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(451, "Local error.", ["closeData", #"answer 503 {} "451 Local error.\n""#, "done reusable"]),
            ]),
        SessionScript(name: "reused connection: no greeting, login or TYPE", request: S.get(file, reused: true), steps: [
            S.event(.connected, ["send SIZE pub/file.txt"]),
        ] + sizeAndDate + passive(then: "RETR pub/file.txt") + [
            S.reply(150, "Opening", [whole, "streamData"]),
            S.event(.dataEnded, []),
            S.reply(226, "Transfer complete.", ["done reusable"]),
        ]),
        SessionScript(name: "reused connection, login directory HEAD", request: S.head("ftp://h/", reused: true), steps: [
            S.event(.connected, ["answer 200 {Content-Type: text/html; charset=utf-8} none", "done reusable"]),
        ]),
        SessionScript(name: "the data connection fails: 502, not reusable", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + [
                S.reply(229, "Entering Extended Passive Mode (|||40000|)", ["openData 40000"]),
                S.event(.dataFailed, [#"answer 502 {} "The data connection to the FTP server failed.\n""#, "close"]),
                S.reply(226, "late", []),
            ]),
        SessionScript(name: "the data connection fails during the body", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + passive(then: "RETR pub/file.txt") + [
                S.reply(150, "Opening", [whole, "streamData"]),
                S.event(.dataFailed, ["close"]),
            ]),
        SessionScript(name: "preliminary replies are skipped where a final one is due", request: S.get(file), steps: [
            S.event(.connected, []),
            S.reply(120, "Service ready in 1 minute.", []),
            S.reply(220, "ready", ["send USER anonymous"]),
            S.reply(331, "Password", ["send PASS larder@"]),
            S.reply(230, "ok", ["send TYPE I"]),
            S.reply(200, "ok", ["send SIZE pub/file.txt"]),
            S.reply(150, "odd", []),
            S.reply(213, "5", ["send MDTM pub/file.txt"]),
        ]),
        SessionScript(name: "an unexpected reply is a 502 and the end", request: S.get(file), steps: [
            S.event(.connected, []),
            S.reply(220, "ready", ["send USER anonymous"]),
            S.reply(331, "Password", ["send PASS larder@"]),
            S.reply(230, "ok", ["send TYPE I"]),
            S.reply(226, "what?", [#"answer 502 {} "226 what?\n""#, "close"]),
            S.reply(200, "too late", []),
        ]),
        SessionScript(name: "TYPE I refused", request: S.get(file), steps: [
            S.event(.connected, []),
            S.reply(220, "ready", ["send USER anonymous"]),
            S.reply(230, "ok", ["send TYPE I"]),
            S.reply(504, "Type not implemented", [#"answer 502 {} "504 Type not implemented\n""#, "close"]),
        ]),
        SessionScript(name: "a 229 without a port", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + sizeAndDate + [
                S.reply(229, "Entering Extended Passive Mode (|1|10.0.0.1|21|)",
                        [#"answer 502 {} "229 Entering Extended Passive Mode (|1|10.0.0.1|21|)\n""#, "close"]),
            ]),
        SessionScript(name: "a data connection event out of order", request: S.get(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.event(.dataConnected, [#"answer 502 {} "The FTP session went out of order.\n""#, "close"]),
            ]),
        SessionScript(name: "a greeting before connected is out of order", request: S.get(file), steps: [
            S.reply(220, "ready", [#"answer 502 {} "220 ready\n""#, "close"]),
            S.event(.connected, []),
        ]),
        SessionScript(name: "an error answer to HEAD has no body", request: S.head(file), steps:
            S.anonymousLogin(then: "send SIZE pub/file.txt") + [
                S.reply(550, "No such file", ["send CWD pub/file.txt"]),
                S.reply(550, "No such directory", ["answer 404 {} none", "done reusable"]),
            ]),
    ]

    @Test("scripts", arguments: scripts)
    func script(_ script: SessionScript) {
        var session = FTPSession(request: script.request, controlIPv4: script.controlIPv4, listingLimits: script.listingLimits)
        var all: [[FTPAction]] = []
        for (index, step) in script.steps.enumerated() {
            let actions = session.handle(step.event)
            all.append(actions)
            #expect(actions.map(describe) == step.actions, "step \(index): \(step.event)")
        }
        checkInvariants(all, request: script.request, script: script.name)
    }

    @Test("a multi-line greeting and 230 are one reply each")
    func multiLineGreeting() throws {
        let replies = parsed(greetingBytes)
        try #require(replies.count == 2)
        #expect(replies[1].lines.count == 3)
        var session = FTPSession(request: S.get(file))
        #expect(session.handle(.connected) == [])
        #expect(session.handle(.reply(replies[0])) == [.send(wire("USER anonymous\r\n"))])
        #expect(session.handle(.reply(replies[1])) == [.send(wire("TYPE I\r\n"))])
        #expect(session.handle(.reply(FTPReply(200, "ok"))) == [.send(wire("SIZE pub/file.txt\r\n"))])
    }

    @Test("PASV naming another host: the flag is set, the action holds only the port", arguments: [
        ("Entering Passive Mode (10,66,6,6,0,25)", true),
        ("Entering Passive Mode (192,0,2,10,0,25)", false),
    ])
    func passiveOtherHost(_ text: String, _ otherHost: Bool) {
        var session = FTPSession(request: S.get(file, reused: true), controlIPv4: controlAddress)
        _ = session.handle(.connected)
        _ = session.handle(.reply(FTPReply(213, "5")))
        _ = session.handle(.reply(FTPReply(213, "20200101120000")))
        #expect(session.handle(.reply(FTPReply(502, "no EPSV"))) == [.send(wire("PASV\r\n"))])
        #expect(!session.passiveNamedOtherHost)
        #expect(session.handle(.reply(FTPReply(227, text))) == [.openData(port: 25)])
        #expect(session.passiveNamedOtherHost == otherHost)
    }

    @Test("the listing page names what the server listed, with links through the proxy")
    func listingPage() {
        var session = FTPSession(request: S.get("ftp://user:pw@ftp.example.org/pub/", reused: true))
        var actions: [FTPAction] = []
        let events: [FTPEvent] = [.connected, .reply(FTPReply(250, "ok")), .reply(FTPReply(229, "(|||40000|)")),
                                  .dataConnected, .reply(FTPReply(150, "listing")), .listingData(mlsdBytes),
                                  .reply(FTPReply(226, "done")), .dataEnded]
        for event in events { actions = session.handle(event) }
        guard case .answer(let answer)? = actions.first, case .bytes(let body) = answer.body else {
            Issue.record("no page: \(actions)")
            return
        }
        let page = text(body)
        #expect(page.contains("<title>Index of /pub/</title>"))
        #expect(page.contains("<a href=\"ftp://ftp.example.org/pub/sub/\">sub/</a>"))
        #expect(page.contains("<a href=\"ftp://ftp.example.org/pub/file.txt\">file.txt</a></td><td>5</td>"))
        #expect(!page.contains("pw@"))
        #expect(session.isFinished)
    }
}

@Suite("FTPByteRange")
struct FTPByteRangeTests {
    @Test("valid and invalid ranges")
    func ranges() {
        #expect(FTPByteRange(start: 0) != nil)
        #expect(FTPByteRange(start: 5, end: 5) != nil)
        #expect(FTPByteRange(start: -1) == nil)
        #expect(FTPByteRange(start: 5, end: 4) == nil)
    }
}
