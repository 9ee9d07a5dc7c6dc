import ArgumentParser
import EventLoop
import Glibc
import LarderConfig
import Logging
import ProxyServer

/// Starts the proxy and serves until SIGTERM or SIGINT.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run the proxy (the default).")

    @OptionGroup var overrides: ConfigOverrides

    /// The process's steps, in order. A bad configuration, crash hook or test clock is printed and
    /// exits 2, and so is a server that does not start (`ProxyServer.start` names the step that failed).
    func run() throws {
        let config = try orExit { () throws(ConfigErrors) in try overrides.resolve() }
        let logger = makeLogger(level: config.logLevel)
        for warning in ConfigLoader.environmentWarnings(ProcessEnvironment.variables()) { logger.warning("\(warning)") }
        let signals = prepareProcess(logger: logger)
        let crashHook = try orExit { () throws(CrashTestHook.Invalid) in try CrashTestHook.fromEnvironment() }
        let clock = try makeClock(logger: logger)
        let server = try startServer(config, logger: logger, clock: clock)
        crashHook?.arm(on: server, logger: logger)
        serve(server, signals: signals, logger: logger)
    }

    /// Before any thread starts: workers inherit the blocked signal mask, and this thread reads
    /// the control signals.
    private func prepareProcess(logger: Logger) -> ControlSignals {
        keepFreedMemoryForReuse()
        signal(SIGPIPE, SIG_IGN)
        let signals = ControlSignals()
        makeCrashSignalsFatal(logger: logger)
        return signals
    }

    /// The one clock of the process. LARDER_TEST_CLOCK_FILE (tests only) is read here, once.
    private func makeClock(logger: Logger) throws -> any ProxyClock {
        let clock = try orExit { () throws(OffsetClock.Failure) in try OffsetClock.fromEnvironment(ProcessEnvironment.variables()) }
        if let test = clock as? OffsetClock {
            logger.critical("TEST CLOCK ENABLED (\(OffsetClock.environmentVariable)=\(test.path)): this process's time is the system's plus an offset any local user who can write that file sets. For tests only: unset it in production.")
        }
        return clock
    }

    private func startServer(_ config: Config, logger: Logger, clock: any ProxyClock) throws -> ProxyServer {
        let overrides = self.overrides
        let server = ProxyServer(config: config, logger: logger, clock: clock) { () throws(ConfigErrors) -> Config in
            try overrides.resolve()
        }
        do {
            try server.start()
        } catch {
            logger.critical("\(error.description)")
            throw ExitCode(2)
        }
        return server
    }

    /// Serves until SIGTERM or SIGINT: SIGUSR1 reopens the access log, SIGHUP reloads.
    private func serve(_ server: ProxyServer, signals: ControlSignals, logger: Logger) {
        while true {
            let received = signals.next()
            if received == SIGTERM || received == SIGINT {
                let grace = server.shutdownGrace
                server.announceShutdown()
                logger.info("signal \(received): shutting down, grace \(grace)s")
                server.shutdown(grace: grace)
                logger.info("stopped")
                return
            }
            if received == SIGUSR1 {
                server.reopenLogs()
            } else if received == SIGHUP {
                _ = server.reload()  // logs what it did
            }
        }
    }

    /// A step whose failure is printed as `larder: …` on standard error, and exits 2.
    private func orExit<T, Failure: Error & CustomStringConvertible>(_ step: () throws(Failure) -> T) throws -> T {
        do {
            return try step()
        } catch {
            printToStandardError("larder: \(error.description)")
            throw ExitCode(2)
        }
    }
}

func makeLogger(level: Config.LogLevel) -> Logger {
    LoggingSystem.bootstrap { label in
        var h = StreamLogHandler.standardError(label: label)
        h.logLevel = Logger.Level(level)
        return h
    }
    return Logger(label: "larder")
}

extension Logger.Level {
    init(_ level: Config.LogLevel) {
        switch level {
        case .trace: self = .trace
        case .debug: self = .debug
        case .info: self = .info
        case .notice: self = .notice
        case .warning: self = .warning
        case .error: self = .error
        case .critical: self = .critical
        }
    }
}

/// Writes a line to fd 2 (the C `stderr` global is not concurrency-safe to touch from Swift 6).
func printToStandardError(_ line: String, newline: Bool = true) {
    var bytes = Array((newline ? line + "\n" : line).utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
        if n <= 0 { return }
        offset += n
    }
}
