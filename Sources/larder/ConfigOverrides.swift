import ArgumentParser
import Glibc
import LarderConfig

/// The command-line layer of the configuration: file < environment < these flags.
struct ConfigOverrides: ParsableArguments {
    @Option(name: .long, help: "Configuration file (YAML). Default: built-in defaults, or $LARDER_CONFIG.")
    var config: String?

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

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String?

    /// Defaults, then the file, then `LARDER_…` variables, then flags.
    func resolve() throws(ConfigErrors) -> Config {
        let env = ProcessEnvironment.variables()
        var c: Config
        if let path = config ?? env["LARDER_CONFIG"] {
            c = try ConfigLoader.load(path: path)
        } else {
            c = Config()
        }
        try ConfigLoader.applyEnvironment(env, to: &c)
        var problems: [ConfigProblem] = []
        /// Runs one flag's parser, collecting its error under the flag's name.
        func flag<T>(_ name: String, _ parse: () throws(ValueError) -> T) -> T? {
            do { return try parse() } catch {
                problems.append(ConfigProblem(source: "command line", key: name, line: nil, message: error.message))
                return nil
            }
        }
        if !listen.isEmpty {
            let list = listen.compactMap { l in flag("--listen") { () throws(ValueError) in try ConfigLoader.parseEndpoint(l) } }
            if list.count == listen.count { c.listen = list }
        }
        if let a = adminListen {
            if a == "off" {
                c.adminListen = nil
            } else if let e = flag("--admin-listen", { () throws(ValueError) in try ConfigLoader.parseEndpoint(a) }) {
                c.adminListen = e
            }
        }
        if let d = cacheDir { c.cacheDirectory = d }
        if let w = workers {
            if (0...256).contains(w) { c.workers = w } else {
                problems.append(ConfigProblem(source: "command line", key: "--workers", line: nil,
                                              message: "must be from 0 to 256, got \(w)"))
            }
        }
        if let r = reverseOrigin {
            if r.isEmpty {
                c.reverseOrigin = nil
            } else if let o = flag("--reverse-origin", { () throws(ValueError) in try ConfigLoader.parseOriginURL(r) }) {
                c.reverseOrigin = o
            }
        }
        if let l = logLevel {
            if ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(l) { c.logLevel = l } else {
                problems.append(ConfigProblem(source: "command line", key: "--log-level", line: nil,
                                              message: "expected trace, debug, info, notice, warning, error or critical, got \"\(l)\""))
            }
        }
        guard problems.isEmpty else { throw ConfigErrors(problems) }
        return c
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
