import Testing
import FTPWire

/// A command builder that takes an argument, for the tables below.
struct ArgumentCommand: Sendable, CustomTestStringConvertible {
    var verb: String
    var build: @Sendable ([UInt8]) -> [UInt8]?
    var testDescription: String { verb }
}

@Suite("FTPCommand")
struct FTPCommandTests {
    static let withArgument: [ArgumentCommand] = [
        ArgumentCommand(verb: "USER", build: FTPCommand.user),
        ArgumentCommand(verb: "PASS", build: FTPCommand.pass),
        ArgumentCommand(verb: "SIZE", build: FTPCommand.size),
        ArgumentCommand(verb: "MDTM", build: FTPCommand.mdtm),
        ArgumentCommand(verb: "RETR", build: FTPCommand.retr),
        ArgumentCommand(verb: "CWD", build: FTPCommand.cwd),
    ]

    @Test("verb, space, argument, CRLF", arguments: withArgument)
    func builds(_ command: ArgumentCommand) {
        #expect(command.build(wire("pub/file name.txt")) == wire("\(command.verb) pub/file name.txt\r\n"))
        #expect(command.build(wire("caf\u{00E9}")) == wire("\(command.verb) caf\u{00E9}\r\n"))
    }

    @Test("every control byte and DEL is refused, wherever it is", arguments: withArgument)
    func refusesControls(_ command: ArgumentCommand) {
        for byte in controlBytes {
            #expect(command.build([byte]) == nil, "byte \(byte) alone")
            #expect(command.build(wire("a") + [byte] + wire("b")) == nil, "byte \(byte) inside")
            #expect(command.build(wire("file") + [byte]) == nil, "byte \(byte) at the end")
        }
        #expect(command.build(wire("x\r\nDELE important")) == nil)
        #expect(command.build(wire("x\nQUIT")) == nil)
    }

    @Test("Telnet IAC is sent doubled", arguments: withArgument)
    func doublesIAC(_ command: ArgumentCommand) {
        #expect(command.build([0x61, 0xFF, 0x62]) == wire("\(command.verb) a") + [0xFF, 0xFF, 0x62, 0x0D, 0x0A])
    }

    @Test("empty arguments: only a password may be empty")
    func emptyArguments() {
        #expect(FTPCommand.pass([]) == wire("PASS \r\n"))
        #expect(FTPCommand.user([]) == nil)
        #expect(FTPCommand.size([]) == nil)
        #expect(FTPCommand.mdtm([]) == nil)
        #expect(FTPCommand.retr([]) == nil)
        #expect(FTPCommand.cwd([]) == nil)
    }

    @Test("commands without arguments")
    func fixed() {
        #expect(FTPCommand.typeImage == wire("TYPE I\r\n"))
        #expect(FTPCommand.epsv == wire("EPSV\r\n"))
        #expect(FTPCommand.pasv == wire("PASV\r\n"))
        #expect(FTPCommand.mlsd == wire("MLSD\r\n"))
        #expect(FTPCommand.list == wire("LIST\r\n"))
        #expect(FTPCommand.quit == wire("QUIT\r\n"))
    }

    @Test("REST takes a non-negative offset")
    func rest() {
        #expect(FTPCommand.rest(0) == wire("REST 0\r\n"))
        #expect(FTPCommand.rest(1_234_567_890_123) == wire("REST 1234567890123\r\n"))
        #expect(FTPCommand.rest(-1) == nil)
    }
}
