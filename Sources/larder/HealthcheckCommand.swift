import ArgumentParser
import Glibc
import LarderConfig

/// `larder healthcheck`: exit 0 when the admin endpoint answers `GET /healthz` with 200. For
/// container HEALTHCHECKs, so the runtime image needs no curl.
struct HealthcheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Ask a running Larder's admin endpoint whether it is alive (exit 0) or not (exit 1).")

    @Option(name: .long, help: ArgumentHelp("Admin endpoint HOST:PORT. Default: $LARDER_ADMIN_LISTEN, else admin_listen's "
                                            + "default, \(Config().adminListen?.description ?? "off")."))
    var admin: String?

    @Option(name: .long, help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    func run() throws {
        let env = ProcessEnvironment.variables()
        guard var target = admin ?? env["LARDER_ADMIN_LISTEN"] ?? Config().adminListen?.description else {
            printToStandardError("larder healthcheck: no admin endpoint to ask: give --admin HOST:PORT")
            throw ExitCode(1)
        }
        // A wildcard listener is reached on loopback.
        if target.hasPrefix("0.0.0.0:") { target = "127.0.0.1:" + target.dropFirst(8) }
        guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]) else {
            printToStandardError("larder healthcheck: \(target) is not HOST:PORT")
            throw ExitCode(1)
        }
        let host = String(target[..<colon])
        if let problem = Self.check(host: host, port: port, timeout: timeout) {
            printToStandardError("larder healthcheck: \(target): \(problem)")
            throw ExitCode(1)
        }
    }

    /// nil when `GET /healthz` answered 200; otherwise what went wrong.
    static func check(host: String, port: UInt16, timeout: Double) -> String? {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &addr.sin_addr) == 1 else {
            return "not a numeric IPv4 address"
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return "socket: \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { return "connect: \(String(cString: strerror(errno)))" }
        let request = Array("GET /healthz HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            return "send failed"
        }
        var reply = [UInt8](repeating: 0, count: 64)
        var got = 0
        while got < 12 {
            let n = reply.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, $0.count - got, 0) }
            if n <= 0 { return got == 0 ? "no answer" : "short answer" }
            got += n
        }
        let status = String(decoding: reply[0..<12], as: UTF8.self)
        return status == "HTTP/1.1 200" ? nil : "answered \(status)"
    }
}
