// swift-tools-version:6.2
import PackageDescription

/// Our own targets build with warnings as errors; dependencies keep their own settings. Release
/// builds also drop the run-time exclusivity checks (about 4 % of a cache hit's instructions);
/// debug builds, which run the unit tests, keep them.
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error),
                              .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "Larder",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "larder", targets: ["larder"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
    ],
    targets: [
        // C libraries from Debian's -dev packages; each is imported by exactly one Swift module.
        .systemLibrary(name: "CLibevent", pkgConfig: "libevent_core",
                       providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCrypt", providers: [.apt(["libcrypt-dev"])]),
        .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),

        // signalfd and the crash-signal handler, in C (see Sources/CSignals/include/CSignals.h).
        .target(name: "CSignals"),
        // nghttp2's allocator: freed blocks kept per thread for the next streams (in C, as nghttp2 calls it).
        .target(name: "CH2Memory", dependencies: ["CNghttp2"]),
        // The lock and semaphore shared between threads (pthread-based, visible to ThreadSanitizer).
        .target(name: "Locking", swiftSettings: strict),
        // Where time comes from (`ProxyClock`): one clock, passed to everything that reads the time.
        .target(name: "Timekeeping", dependencies: ["Locking"], swiftSettings: strict),
        // Pure: HTTP/1.1 framing over bytes, no I/O.
        .target(name: "HTTPWire", swiftSettings: strict),
        // Pure: the documented cache policy and RFC 9111 as decisions; no I/O, no clock.
        .target(name: "CachePolicy", dependencies: ["HTTPWire"], swiftSettings: strict),
        // Thin wrappers over libevent, and OpenSSL: TLS streams, contexts, certificates.
        .target(name: "EventLoop", dependencies: ["CLibevent", "COpenSSL", "HTTPWire", "Locking", "Timekeeping"], swiftSettings: strict),
        // The cache: LMDB on disk, a memory tier in front, one writer thread.
        .target(name: "CacheStore", dependencies: ["CLMDB", "CSignals", "CachePolicy", "HTTPWire", "Locking", "Timekeeping"],
                swiftSettings: strict),
        // HTTP/2 framing over nghttp2: sessions fed and drained as bytes, no I/O.
        .target(name: "HTTP2", dependencies: ["CNghttp2", "CH2Memory"], swiftSettings: strict),
        // The outbound session client, modelled on NSURLSession (its FTP gateway included).
        .target(name: "SessionClient", dependencies: ["EventLoop", "HTTPWire", "HTTP2", "FTPWire", "Timekeeping"],
                swiftSettings: strict),
        // Configuration: YAML file, environment, defaults, validation.
        .target(name: "LarderConfig", dependencies: ["HTTPWire", "CachePolicy", "Yams"], swiftSettings: strict),
        // Counters per worker and the one table of statistics they feed (JSON, Prometheus, docs).
        .target(name: "Statistics", dependencies: ["Locking"], swiftSettings: strict),
        // Warming the cache: URL lists, outcomes and progress (pure), and a blocking client of a proxy.
        .target(name: "Warming", dependencies: ["HTTPWire", "Locking", "EventLoop", "Statistics"], swiftSettings: strict),
        // Pure: registry mirrors' index documents (URL rewriting, minimum release age, apt Release files)
        // and request classification; no I/O, no clock.
        .target(name: "Registries", dependencies: ["CachePolicy", "HTTPWire"], swiftSettings: strict),
        // Pure: FTP control replies, commands, URLs, listings and the gateway's session as a state machine; no I/O.
        .target(name: "FTPWire", dependencies: ["HTTPWire"], swiftSettings: strict),
        // Client connections, routing, forwarding, tunnels, the admin endpoint.
        .target(name: "ProxyServer",
                dependencies: ["EventLoop", "HTTPWire", "SessionClient", "CachePolicy", "CacheStore", "LarderConfig", "CCrypt", "Registries", "HTTP2",
                               "Statistics", "Locking", "Warming", .product(name: "Logging", package: "swift-log")],
                swiftSettings: strict),
        .executableTarget(name: "larder",
                          dependencies: ["ProxyServer", "CacheStore", "LarderConfig", "Statistics", "CSignals", "EventLoop", "Warming",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "Logging", package: "swift-log")],
                          swiftSettings: strict),

        .testTarget(name: "HTTPWireTests", dependencies: ["HTTPWire"], swiftSettings: strict),
        .testTarget(name: "CachePolicyTests", dependencies: ["CachePolicy", "HTTPWire"], swiftSettings: strict),
        .testTarget(name: "LarderConfigTests", dependencies: ["LarderConfig", "CachePolicy"], swiftSettings: strict),
        .testTarget(name: "SessionClientTests", dependencies: ["SessionClient", "EventLoop", "HTTPWire"],
                    swiftSettings: strict),
        .testTarget(name: "CacheStoreTests", dependencies: ["CacheStore", "CachePolicy", "CLMDB", "HTTPWire", "Locking",
                                                       "Timekeeping"],
                    swiftSettings: strict),
        .testTarget(name: "ProxyServerTests", dependencies: ["ProxyServer", "HTTPWire", "SessionClient", "EventLoop", "LarderConfig",
                                                        "CachePolicy", "CacheStore"],
                    swiftSettings: strict),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"], swiftSettings: strict),
        .testTarget(name: "StatisticsTests", dependencies: ["Statistics"], swiftSettings: strict),
        .testTarget(name: "WarmingTests", dependencies: ["Warming"], swiftSettings: strict),
        .testTarget(name: "RegistriesTests", dependencies: ["Registries"], swiftSettings: strict),
        .testTarget(name: "FTPWireTests", dependencies: ["FTPWire", "HTTPWire"], swiftSettings: strict),
        .testTarget(name: "HTTP2Tests", dependencies: ["HTTP2", "CNghttp2", "CH2Memory"], swiftSettings: strict),
    ]
)
