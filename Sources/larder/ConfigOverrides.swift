import ArgumentParser
import Glibc
import LarderConfig

/// The command-line layer of the configuration: file < environment < these flags.
struct ConfigOverrides: ParsableArguments {
    @OptionGroup var file: ConfigFileOption

    @Option(name: .long, help: "Proxy listener HOST:PORT (repeatable; replaces the file's list).")
    var listen: [String] = []

    @Option(name: .customLong("admin-listen"), help: "Admin listener HOST:PORT, or 'off'.")
    var adminListen: String?

    @Option(name: .customLong("cache-dir"), help: "Cache directory.")
    var cacheDir: String?

    @Option(name: .long, help: "Worker threads (0: one per core).")
    var workers: Int?

    @Option(name: .customLong("reverse-origin"), help: "Reverse mode: send origin-form requests to this origin URL.")
    var reverseOrigin: String?

    @Option(name: .customLong("log-level"),
            help: "One of \(Config.LogLevel.allCases.map(\.rawValue).joined(separator: ", ")).")
    var logLevel: String?

    @Option(name: .customLong("access-log"), help: "Access log: 'stdout', a file path, or 'off'.")
    var accessLog: String?

    @Option(name: .customLong("ca-file"), help: "PEM CA bundle that verifies https origins (tls.ca_file).")
    var caFile: String?

    @Flag(name: .long, help: "Memory-only cache (cache.ephemeral): nothing written to disk, no cache directory.")
    var ephemeral = false

    /// Defaults, then the file, then `LARDER_…` variables, then flags; checked as a whole (start-up
    /// and every reload).
    func resolve() throws(ConfigErrors) -> Config {
        try file.resolve(commandLine: settings)
    }

    /// The flags given, as configuration settings.
    private var settings: [ConfigLoader.Setting] {
        var flags: [ConfigLoader.Setting] = []
        if !listen.isEmpty { flags.append(.init(name: "--listen", key: "listen", value: listen.joined(separator: ","))) }
        if let a = adminListen { flags.append(.init(name: "--admin-listen", key: "admin_listen", value: a)) }
        if let d = cacheDir { flags.append(.init(name: "--cache-dir", key: "cache_dir", value: d)) }
        if let w = workers { flags.append(.init(name: "--workers", key: "workers", value: String(w))) }
        if let r = reverseOrigin { flags.append(.init(name: "--reverse-origin", key: "reverse_origin", value: r)) }
        if let l = logLevel { flags.append(.init(name: "--log-level", key: "log_level", value: l)) }
        if let a = accessLog { flags.append(.init(name: "--access-log", key: "access_log", value: a)) }
        if ephemeral { flags.append(.init(name: "--ephemeral", key: "cache.ephemeral", value: "true")) }
        if let f = caFile { flags.append(.init(name: "--ca-file", key: "tls.ca_file", value: f)) }
        return flags
    }
}

/// The process environment as a dictionary, without Foundation.
enum ProcessEnvironment {
    static func variables() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") {
                out[String(s[..<eq])] = String(s[s.index(after: eq)...])
            }
            p += 1
        }
        return out
    }
}
