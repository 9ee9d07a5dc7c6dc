/// The command lines the gateway sends on the control connection (RFC 959 §5.3), as bytes ending
/// in CRLF.
///
/// This is the one place arguments reach the wire, and the injection guard: an argument holding
/// CR, LF, NUL, any other byte below 0x20 or DEL is refused (nil), since a line break would end
/// the command and let the rest of the argument run as a command of the client's choosing. Bytes
/// 0x80 and above pass (UTF-8 names, RFC 2640); 0xFF, Telnet's IAC, is sent doubled as RFC 959
/// §4.1.2 (by way of the Telnet protocol) asks, so the server reads it as a byte and not as a
/// Telnet command.
public enum FTPCommand {
    /// `USER name`; nil for an empty or unsafe name.
    public static func user(_ name: [UInt8]) -> [UInt8]? { line("USER", name) }

    /// `PASS password`; an empty password is allowed (some servers ask for one and accept nothing).
    public static func pass(_ password: [UInt8]) -> [UInt8]? { line("PASS", password, allowEmpty: true) }

    /// `TYPE I`: every transfer is binary, so files reach the client byte for byte.
    public static let typeImage: [UInt8] = Array("TYPE I\r\n".utf8)

    /// `SIZE path` (RFC 3659 §4): the file's length in the current type.
    public static func size(_ path: [UInt8]) -> [UInt8]? { line("SIZE", path) }

    /// `MDTM path` (RFC 3659 §3): the file's modification time.
    public static func mdtm(_ path: [UInt8]) -> [UInt8]? { line("MDTM", path) }

    /// `EPSV` (RFC 2428): passive mode naming only a port.
    public static let epsv: [UInt8] = Array("EPSV\r\n".utf8)

    /// `PASV`: passive mode for servers without EPSV.
    public static let pasv: [UInt8] = Array("PASV\r\n".utf8)

    /// `REST offset` (RFC 3659 §5): the next RETR starts at this byte; nil for a negative offset.
    public static func rest(_ offset: Int) -> [UInt8]? {
        guard offset >= 0 else { return nil }
        var digits: [UInt8] = []
        appendDecimal(offset, to: &digits)
        return line("REST", digits)
    }

    /// `RETR path`: send the file over the data connection.
    public static func retr(_ path: [UInt8]) -> [UInt8]? { line("RETR", path) }

    /// `CWD path`: also how the gateway learns that a name is a directory.
    public static func cwd(_ path: [UInt8]) -> [UInt8]? { line("CWD", path) }

    /// `MLSD` (RFC 3659 §7): the current directory in a machine-readable listing.
    public static let mlsd: [UInt8] = Array("MLSD\r\n".utf8)

    /// `LIST`: the current directory as the server's `ls -l`-like text, for servers without MLSD.
    public static let list: [UInt8] = Array("LIST\r\n".utf8)

    /// `QUIT`: a polite end to a control connection that is not going back to the pool.
    public static let quit: [UInt8] = Array("QUIT\r\n".utf8)

    /// Whether `argument` may be sent as a command argument.
    public static func isSafeArgument(_ argument: [UInt8]) -> Bool { !argument.contains(where: isControlByte) }

    /// `verb SP argument CRLF`, or nil when the argument is unsafe (or empty and not allowed to be).
    private static func line(_ verb: String, _ argument: [UInt8], allowEmpty: Bool = false) -> [UInt8]? {
        guard allowEmpty || !argument.isEmpty, isSafeArgument(argument) else { return nil }
        var out = Array(verb.utf8)
        out.reserveCapacity(out.count + argument.count + 3)
        out.append(ftpSP)
        for b in argument {
            out.append(b)
            if b == 0xFF { out.append(0xFF) }
        }
        out.append(ftpCR)
        out.append(ftpLF)
        return out
    }
}
