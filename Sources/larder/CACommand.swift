import ArgumentParser
import EventLoop
import ProxyServer

/// `larder ca init`: makes the CA that signs the certificates of intercepted destinations, for
/// operators to install in the clients that should accept interception.
struct CACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Manage the interception CA.",
        subcommands: [Init.self])

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Write a new interception CA (certificate and key) where Larder looks for it: "
                + "tls.intercept_ca_dir, or --dir.")

        /// Only the file: the CA's place is all this command reads from the configuration.
        @OptionGroup var configFile: ConfigFileOption

        @Option(name: .long, help: "Directory to write larder-ca.pem and larder-ca-key.pem into (default: tls.intercept_ca_dir).")
        var dir: String?

        @Option(name: .customLong("key-type"), help: "ec-p256 or rsa-2048.")
        var keyType: CertificateKeyType = .ecP256

        @Flag(name: .long, help: "Replace an existing CA.")
        var force = false

        func run() throws {
            // The default place also answers for the one earlier versions used (cache_dir/ca); --dir
            // needs no configuration.
            let config = dir == nil ? try configFile.resolve() : nil
            let directory = dir ?? config?.tls.interceptCADirectory ?? ""
            let made = try InterceptionCAFiles.create(in: directory, legacyDirectory: config.map { $0.cacheDirectory + "/ca" },
                                                      keyType: keyType, replace: force)
            if let removed = made.removed { print("removed the CA earlier versions kept in \(removed)") }
            print("""
                wrote the interception CA: \(made.path) (key beside it, readable by its owner only)
                SHA-256 fingerprint: \(made.sha256)
                Install \(made.path) as a trusted CA in the clients whose https traffic Larder may decrypt
                (tls.intercept); e.g. curl --cacert \(made.path), or the system or browser trust store.
                """)
        }
    }
}

/// `--key-type` takes the key types' own spellings; anything else is refused by the parser.
extension CertificateKeyType: ExpressibleByArgument {}
