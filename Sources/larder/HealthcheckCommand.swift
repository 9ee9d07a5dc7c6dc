import ArgumentParser
import Glibc
import LarderConfig

/// `larder healthcheck`: exit 0 when the admin endpoint answers `GET /healthz` with 200. For
/// container HEALTHCHECKs, so the runtime image needs no curl.
struct HealthcheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Ask a running Larder's admin endpoint whether it is alive (exit 0) or not (exit 1).")

    @Option(name: .long, help: ArgumentHelp("Admin endpoint HOST:PORT. Default: the configuration's admin_listen "
                                            + "(--config or $LARDER_CONFIG, then $LARDER_ADMIN_LISTEN), else "
                                            + "\(Config().adminListen?.description ?? "off")."))
    var admin: String?

    /// Read only without `--admin`: a configuration that does not load then fails the check.
    @OptionGroup var configFile: ConfigFileOption

    @Option(name: .long, help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    func run() throws {
        let target = try adminEndpoint()
        if let problem = Self.check(target, timeout: timeout) {
            printToStandardError("larder healthcheck: \(target): \(problem)")
            throw ExitCode(1)
        }
    }

    /// `--admin`, else where the configuration (file and environment, as `larder run` reads them)
    /// puts the admin endpoint. Every failure exits 1: to a container runtime it is "unhealthy".
    private func adminEndpoint() throws -> Endpoint {
        if let admin {
            do {
                return try ConfigLoader.parseEndpoint(admin).reachedLocally
            } catch {
                printToStandardError("larder healthcheck: --admin: \(error.message)")
                throw ExitCode(1)
            }
        }
        let config: Config
        do {
            config = try configFile.resolve()
        } catch {
            printToStandardError("larder healthcheck: \(error.description)")
            throw ExitCode(1)
        }
        guard let listen = config.adminListen else {
            printToStandardError("larder healthcheck: the admin endpoint is off (admin_listen): give --admin HOST:PORT")
            throw ExitCode(1)
        }
        guard !config.tls.admin else {
            printToStandardError("larder healthcheck: the admin endpoint speaks TLS (tls.admin), which healthcheck "
                                 + "does not: ask https://\(listen)/healthz with a TLS client")
            throw ExitCode(1)
        }
        guard listen.port != 0 else {
            printToStandardError("larder healthcheck: admin_listen \(listen) picks its port at start: "
                                 + "give --admin HOST:PORT")
            throw ExitCode(1)
        }
        return listen.reachedLocally
    }

    /// nil when `GET /healthz` answered 200; otherwise what went wrong.
    static func check(_ target: Endpoint, timeout: Double) -> String? {
        guard let address = SocketAddressBytes(host: target.host, port: target.port) else {
            return "not a numeric IP address"
        }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return "socket: \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard address.connect(fd) == 0 else { return "connect: \(String(cString: strerror(errno)))" }
        let request = Array("GET /healthz HTTP/1.1\r\nHost: \(target)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            return "send: \(String(cString: strerror(errno)))"
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
