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
                + "cache_dir/ca, or --dir.")

        @OptionGroup var overrides: ConfigOverrides

        @Option(name: .long, help: "Directory to write larder-ca.pem and larder-ca-key.pem into (default: cache_dir/ca).")
        var dir: String?

        @Option(name: .customLong("key-type"), help: "ec-p256 or rsa-2048.")
        var keyType: CertificateKeyType = .ecP256

        @Flag(name: .long, help: "Replace an existing CA.")
        var force = false

        func run() throws {
            let directory = try dir ?? (overrides.resolve().cacheDirectory + "/ca")
            let made = try InterceptionCAFiles.create(in: directory, keyType: keyType, replace: force)
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
