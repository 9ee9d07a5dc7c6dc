import ArgumentParser
import Glibc
import LarderConfig
import ProxyServer
import Warming

/// `larder warm FILE|-`: fetches a list of URLs through a running Larder (or through one started
/// here on a cache directory no other Larder uses), so later requests for them are hits.
struct WarmCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "warm",
        abstract: "Fetch a list of URLs (one a line) through Larder so they are cached; exit 1 if any failed.")

    @Argument(help: "File of URLs, one a line ('#' starts a comment); '-' reads standard input.")
    var file: String?

    @Option(name: .long, help: ArgumentHelp("Proxy to warm through, http://[USER:PASSWORD@]HOST:PORT. Default: the first "
                                            + "listener of the configuration (--config, $LARDER_CONFIG, the environment)."))
    var proxy: String?

    @Option(name: .long, help: "URLs fetched at once (1 to 64).")
    var concurrency: Int = 8

    @Option(name: .customLong("cache-dir"),
            help: "Warm this cache directory directly (no Larder may be using it): Larder is started here for the run.")
    var cacheDir: String?

    @Option(name: .long, help: "Configuration file (for the default proxy, and the cache settings with --cache-dir).")
    var config: String?

    @Option(name: .long, help: "Seconds of silence from the proxy before a URL fails.")
    var timeout: Double = 120

    @Option(name: .customLong("cache-name"), help: "The proxy's via_name, whose Cache-Status entry is read. Default: the configuration's.")
    var cacheName: String?

    /// Usage errors exit 2 (as a bad configuration does), with the reason. Checked when the
    /// command runs, not in `validate()`, which also runs for `--help` and would print an error
    /// beside the help.
    private func checkUsage() throws {
        var problem: String?
        if file == nil { problem = "give the file of URLs, or - for standard input" }
        if !(1...64).contains(concurrency) { problem = "--concurrency must be 1 to 64" }
        if !(timeout > 0 && timeout <= 86_400) { problem = "--timeout must be above 0 and at most 86400" }
        if cacheDir != nil, proxy != nil { problem = "give --proxy or --cache-dir, not both" }
        if let problem {
            printToStandardError("larder warm: \(problem)\nusage: larder " + WarmCommand.usageString())
            throw ExitCode(2)
        }
    }

    func run() throws {
        try checkUsage()
        keepFreedMemoryForReuse()   // with --cache-dir a whole Larder runs in this process
        signal(SIGPIPE, SIG_IGN)
        let file = self.file ?? "-"
        guard let bytes = Self.read(file) else {
            printToStandardError("larder warm: cannot read \(file): \(String(cString: strerror(errno)))")
            throw ExitCode(2)
        }
        let list = WarmList.parse(bytes)
        let env = ProcessEnvironment.variables()
        let configuration: Config
        do {
            configuration = try ConfigLoader.resolve(file: config ?? env["LARDER_CONFIG"], environment: env, commandLine: [])
        } catch {
            printToStandardError("larder warm: \(error.description)")
            throw ExitCode(2)
        }
        var server: ProxyServer?
        let target: WarmProxy
        if let dir = cacheDir {
            let started = try Self.startLocalLarder(cacheDirectory: dir, config: configuration)
            server = started
            guard let address = started.boundAddresses.first, let endpoint = WarmProxyAddress.parse(address) else {
                started.shutdown(grace: 1)
                printToStandardError("larder warm: the local Larder has no listener")
                throw ExitCode(2)
            }
            target = endpoint
        } else {
            let given = proxy ?? configuration.listen.first.map { "http://\($0.description)" }
            guard let given, let endpoint = WarmProxyAddress.parse(given) else {
                printToStandardError("larder warm: \(proxy ?? "the configured listener") is not a proxy address "
                                     + "http://[USER:PASSWORD@]HOST:PORT (https proxies are not supported)")
                throw ExitCode(2)
            }
            guard endpoint.port != 0 else {
                printToStandardError("larder warm: the configured listener has port 0: give --proxy HOST:PORT")
                throw ExitCode(2)
            }
            target = endpoint
        }
        let job = WarmJob(list: list, proxy: target, concurrency: concurrency, timeout: timeout,
                          cacheName: cacheName ?? configuration.viaName)
        let progress = WarmProgressPrinter(terminal: isatty(2) == 1)
        job.start()
        // Progress until done, redrawn every 0.2 s; bounded by the job, whose reads time out.
        var drawn = 0.0
        while job.isRunning {
            usleep(10_000)
            let elapsed = job.elapsed
            if elapsed - drawn >= 0.2 {
                drawn = elapsed
                progress.update(job.tally, elapsed: elapsed)
            }
        }
        job.wait()
        progress.finish(job.tally, elapsed: job.elapsed)
        if let server {
            server.shutdown(grace: 5)  // commits what was stored before the directory is let go
        }
        let tally = job.tally
        print(tally.summary(seconds: job.elapsed), terminator: "")
        if tally.failed > 0 { throw ExitCode(1) }
    }

    static func read(_ file: String) -> [UInt8]? {
        let fd = file == "-" ? 0 : open(file, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { if fd != 0 { close(fd) } }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1_024)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { return out }
            out.append(contentsOf: buffer[0..<n])
        }
    }

    /// A Larder of this process on the directory, listening on a loopback port of its own, with the
    /// configuration's cache settings and destination rules; exits 2 when the directory is in use or
    /// unusable. Only this process reaches it, so it admits loopback clients without credentials.
    static func startLocalLarder(cacheDirectory: String, config base: Config) throws -> ProxyServer {
        var c = base
        c.cacheDirectory = cacheDirectory
        c.allowClients = AddressRange.loopback
        c.auth.usersFile = nil
        c.cache.ephemeral = false
        c.cache.onUnusableDirectory = .exit
        c.listen = [Endpoint(host: "127.0.0.1", port: 0)]
        c.tls.listen = []
        c.tls.admin = false
        c.adminListen = nil
        c.accessLog = nil
        c.logLevel = .warning
        c.workers = min(c.workers == 0 ? 2 : c.workers, 4)
        let server = ProxyServer(config: c, logger: makeLogger(level: c.logLevel))
        do {
            try server.start()
        } catch {
            printToStandardError("larder warm: \(error.description)")
            throw ExitCode(2)
        }
        return server
    }
}

/// Draws progress on standard error: one line redrawn in place on a terminal, otherwise a plain
/// line every 5 seconds.
final class WarmProgressPrinter {
    let terminal: Bool
    private var lastPlain = 0.0
    private var drawn = false

    init(terminal: Bool) { self.terminal = terminal }

    func update(_ tally: WarmTally, elapsed: Double) {
        if terminal {
            printToStandardError("\r\u{1B}[K" + WarmFormat.progressLine(tally, elapsed: elapsed), newline: false)
            drawn = true
        } else if elapsed - lastPlain >= 5 {
            lastPlain = elapsed
            printToStandardError("progress " + WarmFormat.progressLine(tally, elapsed: elapsed))
        }
    }

    func finish(_ tally: WarmTally, elapsed: Double) {
        if terminal {
            printToStandardError("\r\u{1B}[K" + WarmFormat.progressLine(tally, elapsed: elapsed))
        } else {
            printToStandardError("progress " + WarmFormat.progressLine(tally, elapsed: elapsed))
        }
    }
}
