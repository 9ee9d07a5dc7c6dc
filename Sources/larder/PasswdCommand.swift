import ArgumentParser
import Glibc
import ProxyServer

/// `larder passwd USER`: prints a `user:hash` line for `auth.users_file`, the password read from
/// standard input (so it stays out of the shell history and the process list).
struct PasswdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd",
        abstract: "Print a users-file line (user:hash) for proxy authentication; the password is read from standard input.")

    @Argument(help: "The user name.")
    var user: String

    @Option(name: .long, help: "bcrypt or sha512.")
    var scheme: String = "bcrypt"

    @Option(name: .long, help: "Work factor: log2 rounds for bcrypt (default 10), rounds for sha512 (default 5000).")
    var cost: Int?

    func validate() throws {
        guard !user.isEmpty, !user.contains(":"), !user.contains(where: \.isNewline) else {
            throw ValidationError("the user name must be non-empty and contain no colon or line break")
        }
        guard scheme == "bcrypt" || scheme == "sha512" else { throw ValidationError("--scheme is bcrypt or sha512") }
    }

    func run() throws {
        guard var password = readLine(strippingNewline: true), !password.isEmpty else {
            printToStandardError("larder passwd: no password on standard input")
            throw ExitCode(1)
        }
        defer { password = "" }
        let bcrypt = scheme == "bcrypt"
        guard let hash = PasswordHash.make(password, bcrypt: bcrypt, cost: cost ?? (bcrypt ? 10 : 0)) else {
            printToStandardError("larder passwd: cannot hash with \(scheme) at cost \(cost ?? 0)")
            throw ExitCode(1)
        }
        print("\(user):\(hash)")
    }
}
