import Testing
import Foundation
@testable import LarderConfig

/// The repository root, found from this file's path, so tests can read `Config/`.
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // Tests/LarderConfigTests/ConfigLoaderTests.swift
    return parts.joined(separator: "/")
}()

struct ValueRow<T: Sendable & Equatable>: Sendable, CustomTestStringConvertible {
    var text: String
    var expected: T?  // nil: must be rejected
    var testDescription: String { "\"\(text)\"" }
}

@Suite struct ValueSyntaxTests {
    static let durations: [ValueRow<Double>] = [
        .init(text: "30", expected: 30), .init(text: "30s", expected: 30), .init(text: "500ms", expected: 0.5),
        .init(text: "1.5m", expected: 90), .init(text: "2h", expected: 7_200), .init(text: "7d", expected: 604_800),
        .init(text: " 10s ", expected: 10), .init(text: "0", expected: 0),
        .init(text: "soon", expected: nil), .init(text: "-1s", expected: nil), .init(text: "10 parsecs", expected: nil),
        .init(text: "", expected: nil), .init(text: "s", expected: nil), .init(text: "inf", expected: nil),
    ]

    @Test(arguments: durations) func duration(_ row: ValueRow<Double>) {
        #expect((try? ConfigLoader.parseDuration(row.text)) == row.expected)
    }

    static let sizes: [ValueRow<Int>] = [
        .init(text: "65536", expected: 65_536), .init(text: "64KiB", expected: 65_536),
        .init(text: "64K", expected: 65_536), .init(text: "1MiB", expected: 1_048_576),
        .init(text: "1MB", expected: 1_000_000), .init(text: "2GiB", expected: 2_147_483_648),
        .init(text: "512B", expected: 512), .init(text: "1.5KiB", expected: 1_536),
        .init(text: "lots", expected: nil), .init(text: "-5", expected: nil), .init(text: "KiB", expected: nil),
        .init(text: "99999999TiB", expected: nil),
    ]

    static let ranges: [ValueRow<String>] = [
        .init(text: "10.0.0.0/8", expected: "10.0.0.0/8"), .init(text: "192.168.1.7", expected: "192.168.1.7/32"),
        .init(text: "::1", expected: "0:0:0:0:0:0:0:1/128"), .init(text: "fd00::/8", expected: "fd00:0:0:0:0:0:0:0/8"),
        .init(text: "0.0.0.0/0", expected: "0.0.0.0/0"),
        .init(text: "10.0.0.0/33", expected: nil), .init(text: "host.example", expected: nil),
        .init(text: "10.0.0/8", expected: nil), .init(text: "::1/129", expected: nil), .init(text: "1.2.3.4/x", expected: nil),
    ]

    @Test(arguments: ranges) func addressRange(_ row: ValueRow<String>) {
        #expect((try? ConfigLoader.parseAddressRange(row.text))?.description == row.expected)
    }

    @Test func addressRangeMembership() throws {
        let net = try ConfigLoader.parseAddressRange("10.1.0.0/16")
        #expect(net.contains([10, 1, 200, 3]) && !net.contains([10, 2, 0, 1]))
        let odd = try ConfigLoader.parseAddressRange("192.168.0.0/23")
        #expect(odd.contains([192, 168, 1, 255]) && !odd.contains([192, 168, 2, 0]))
        #expect(try ConfigLoader.parseAddressRange("0.0.0.0/0").contains([8, 8, 8, 8]))
        let v6 = try ConfigLoader.parseAddressRange("::1")
        #expect(v6.contains(Array(repeating: 0, count: 15) + [1]) && !v6.contains([127, 0, 0, 1]))
    }

    @Test(arguments: sizes) func byteSize(_ row: ValueRow<Int>) {
        #expect((try? ConfigLoader.parseByteSize(row.text)) == row.expected)
    }

    static let endpoints: [ValueRow<Endpoint>] = [
        .init(text: "127.0.0.1:3128", expected: Endpoint(host: "127.0.0.1", port: 3128)),
        .init(text: "0.0.0.0:0", expected: Endpoint(host: "0.0.0.0", port: 0)),
        .init(text: "[::1]:8080", expected: Endpoint(host: "::1", port: 8080)),
        .init(text: "localhost:65535", expected: Endpoint(host: "localhost", port: 65_535)),
        .init(text: "127.0.0.1", expected: nil), .init(text: "::1:80", expected: nil),
        .init(text: "host:65536", expected: nil), .init(text: ":80", expected: nil),
        .init(text: "host:http", expected: nil), .init(text: "[::1]8080", expected: nil),
        .init(text: "a b:80", expected: nil),
    ]

    @Test(arguments: endpoints) func endpoint(_ row: ValueRow<Endpoint>) {
        #expect((try? ConfigLoader.parseEndpoint(row.text)) == row.expected)
    }

    static let origins: [ValueRow<OriginURL>] = [
        .init(text: "http://127.0.0.1:8080", expected: OriginURL(scheme: .http, host: "127.0.0.1", port: 8080)),
        .init(text: "http://Example.COM", expected: OriginURL(scheme: .http, host: "example.com", port: 80)),
        .init(text: "https://example.com/", expected: OriginURL(scheme: .https, host: "example.com", port: 443)),
        .init(text: "http://[::1]:81", expected: OriginURL(scheme: .http, host: "::1", port: 81)),
        .init(text: "http://[::1]", expected: OriginURL(scheme: .http, host: "::1", port: 80)),
        .init(text: "ftp://example.com", expected: nil), .init(text: "example.com:80", expected: nil),
        .init(text: "http://example.com/path", expected: nil), .init(text: "http://user@example.com", expected: nil),
        .init(text: "http://", expected: nil), .init(text: "http://h:0", expected: nil),
    ]

    @Test(arguments: origins) func originURL(_ row: ValueRow<OriginURL>) {
        #expect((try? ConfigLoader.parseOriginURL(row.text)) == row.expected)
    }
}

@Suite struct ConfigFileTests {
    @Test func shippedDefaultFileEqualsBuiltInDefaults() throws {
        let c = try ConfigLoader.load(path: repositoryRoot + "/Config/larder.yaml")
        #expect(c == Config())
    }

    /// Each as its comments tell to use it: ci-cache.yaml with the admin token from the environment.
    @Test func everyExampleLoads() throws {
        let directory = repositoryRoot + "/Config/examples"
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".yaml") }
        #expect(Set(names).isSuperset(of: ["reverse.yaml", "ci-cache.yaml", "offline-mirror.yaml"]))
        for name in names {
            _ = try ConfigLoader.resolve(file: directory + "/" + name, environment: Self.secretToken, commandLine: [])
        }
    }

    static let secretToken = ["LARDER_ADMIN_TOKEN": "0123456789abcdef0123456789abcdef"]

    /// Copied as it is, with its placeholder token, the CI example does not start: the error names
    /// the key and the variable to set.
    @Test func theCIExampleRefusesItsPlaceholderToken() {
        do {
            _ = try ConfigLoader.resolve(file: repositoryRoot + "/Config/examples/ci-cache.yaml", environment: [:], commandLine: [])
            Issue.record("accepted")
        } catch {
            #expect(error.problems.map(\.key) == ["admin_token"])
            #expect(error.description.hasPrefix("ci-cache.yaml: admin_token: \"change-me\" is a placeholder"))
            #expect(error.description.contains("set LARDER_ADMIN_TOKEN"))
        }
    }

    /// A build farm's package files (CUDA wheels of 2-3 GB) are stored, not only forwarded.
    @Test func theCIExampleStoresMultiGigabytePackages() throws {
        let c = try ConfigLoader.resolve(file: repositoryRoot + "/Config/examples/ci-cache.yaml",
                                         environment: Self.secretToken, commandLine: [])
        let storable = min(c.cache.maxObjectSize, c.cache.diskCapacity / 4)  // the cache's own bound
        #expect(storable >= 3 << 30)
        #expect(c.cache.diskCapacity >= 100 << 30)
    }

    /// A per-host cap below the idle default is enough on its own: the idle count follows it.
    @Test func aLowerConnectionCapAloneIsAccepted() throws {
        let c = try ConfigLoader.load(yaml: "session:\n  http_maximum_connections_per_host: 8\n")
        #expect(c.session.httpMaximumConnectionsPerHost == 8)
        #expect(c.session.maxIdleConnectionsPerHost == 64)
    }

    @Test func emptyFileMeansDefaults() throws {
        #expect(try ConfigLoader.load(yaml: "") == Config())
        #expect(try ConfigLoader.load(yaml: "# nothing\n") == Config())
    }

    @Test func fullFileSetsEveryField() throws {
        let yaml = """
        listen: ["0.0.0.0:3128", "[::1]:3129"]
        admin_listen: off
        workers: 4
        cache_dir: /var/cache/larder
        shutdown_grace: 2.5s
        reverse_origin: http://127.0.0.1:8000
        connect_ports: [443, 8443]
        via_name: edge-1
        log_level: debug
        limits:
          max_head_bytes: 32KiB
          max_header_count: 50
          max_uri_bytes: 4096
          client_header_timeout: 5s
          client_idle_timeout: 1m
          max_response_head_bytes: 128KiB
        session:
          http_additional_headers:
            X-Team: build
            X-Second: "2"
          timeout_interval_for_request: 15s
          timeout_interval_for_resource: 1h
          connect_timeout: 500ms
          http_maximum_connections_per_host: 8
          max_idle_connections_per_host: 4
          idle_connection_timeout: 30s
          proxy: http://parent:3128
          tls_minimum_version: "1.3"
          tls_maximum_version: "1.3"
          ca_file: /etc/ssl/ca.pem
          dns_servers: [127.0.0.1:5353, 10.0.0.1, "::1"]
        tls:
          ca_file: /etc/ssl/origins.pem
          trust:
            - {host: intranet.example, sha256: "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"}
            - host: "*.lab.example"
              sha256: 0000000000000000000000000000000000000000000000000000000000000000
          listen: ["0.0.0.0:3129"]
          certificate_file: /etc/larder/proxy.pem
          key_file: /etc/larder/proxy.key
          admin: true
          intercept: ["*.pkg.example", downloads.example]
          intercept_ca_certificate: /etc/larder/ca.pem
          intercept_ca_key: /etc/larder/ca.key
          intercept_key_type: rsa-2048
          intercept_certificate_lifetime: 7d
        """
        let c = try ConfigLoader.load(yaml: yaml)
        #expect(c.listen == [Endpoint(host: "0.0.0.0", port: 3128), Endpoint(host: "::1", port: 3129)])
        #expect(c.adminListen == nil)
        #expect(c.workers == 4)
        #expect(c.cacheDirectory == "/var/cache/larder")
        #expect(c.shutdownGrace == 2.5)
        #expect(c.reverseOrigin == OriginURL(scheme: .http, host: "127.0.0.1", port: 8000))
        #expect(c.connectPorts == [443, 8443])
        #expect(c.viaName == "edge-1")
        #expect(c.logLevel == .debug)
        #expect(c.limits.maxHeadBytes == 32_768)
        #expect(c.limits.maxHeaderCount == 50)
        #expect(c.limits.maxURIBytes == 4_096)
        #expect(c.limits.clientHeaderTimeout == 5)
        #expect(c.limits.clientIdleTimeout == 60)
        #expect(c.limits.maxResponseHeadBytes == 131_072)
        #expect(c.session.httpAdditionalHeaders == [HeaderPair(name: "X-Team", value: "build"),
                                                   HeaderPair(name: "X-Second", value: "2")])
        #expect(c.session.timeoutIntervalForRequest == 15)
        #expect(c.session.timeoutIntervalForResource == 3_600)
        #expect(c.session.connectTimeout == 0.5)
        #expect(c.session.httpMaximumConnectionsPerHost == 8)
        #expect(c.session.maxIdleConnectionsPerHost == 4)
        #expect(c.session.idleConnectionTimeout == 30)
        #expect(c.session.parentProxy == OriginURL(scheme: .http, host: "parent", port: 3128))
        #expect(c.session.tlsMinimumVersion == .tls13)
        #expect(c.session.caFile == "/etc/ssl/origins.pem")   // tls.ca_file, later in the file, wins
        #expect(c.tls.trust == [
            Config.TrustException(host: "intranet.example", sha256: String(repeating: "abcdef0123456789", count: 4)),
            Config.TrustException(host: "*.lab.example", sha256: String(repeating: "0", count: 64)),
        ])
        #expect(c.tls.listen == [Endpoint(host: "0.0.0.0", port: 3129)])
        #expect(c.tls.certificateFile == "/etc/larder/proxy.pem")
        #expect(c.tls.keyFile == "/etc/larder/proxy.key")
        #expect(c.tls.admin)
        #expect(c.tls.intercept == ["*.pkg.example", "downloads.example"])
        #expect(c.tls.interceptCACertificate == "/etc/larder/ca.pem")
        #expect(c.tls.interceptCAKey == "/etc/larder/ca.key")
        #expect(c.tls.interceptKeyType == .rsa2048)
        #expect(c.tls.interceptCertificateLifetime == 7 * 86_400)
        #expect(c.session.dnsServers == [Endpoint(host: "127.0.0.1", port: 5353), Endpoint(host: "10.0.0.1", port: 53),
                                         Endpoint(host: "::1", port: 53)])
    }
}

struct ErrorRow: Sendable, CustomTestStringConvertible {
    var name: String
    var yaml: String
    /// Expected error lines, exactly as printed.
    var lines: [String]
    var testDescription: String { name }
}

@Suite struct ConfigErrorTests {
    static let rows: [ErrorRow] = [
        ErrorRow(name: "unknown key with suggestion", yaml: "workers: 2\nlisen: [a:1]\n",
                 lines: ["t.yaml:2: lisen: unknown key; did you mean listen?"]),
        ErrorRow(name: "unknown nested key", yaml: "session:\n  conect_timeout: 5s\n",
                 lines: ["t.yaml:2: session.conect_timeout: unknown key; did you mean session.connect_timeout?"]),
        ErrorRow(name: "unknown key far from anything", yaml: "colour: blue\n",
                 lines: ["t.yaml:1: colour: unknown key"]),
        ErrorRow(name: "every problem reported at once",
                 yaml: "workers: many\nlog_level: loud\nlimits:\n  client_idle_timeout: soon\n",
                 lines: ["t.yaml:1: workers: expected a thread count (0: one per core), got \"many\"",
                         "t.yaml:2: log_level: expected one of trace, debug, info, notice, warning, error, critical, got \"loud\"",
                         "t.yaml:4: limits.client_idle_timeout: expected a duration such as 30s, 500ms, 5m, 1h or 7d, got \"soon\""]),
        ErrorRow(name: "out of range", yaml: "workers: 1000\n", lines: ["t.yaml:1: workers: must be from 0 to 256, got 1000"]),
        ErrorRow(name: "bad endpoint in list", yaml: "listen:\n  - 127.0.0.1:3128\n  - nowhere\n",
                 lines: ["t.yaml:2: listen: expected HOST:PORT, got \"nowhere\""]),
        ErrorRow(name: "empty listen", yaml: "listen: []\n", lines: ["t.yaml:1: listen: needs at least one HOST:PORT"]),
        ErrorRow(name: "listener mapping with an unknown key", yaml: "listen:\n  - {address: 127.0.0.1:1, proxy: true}\n",
                 lines: ["t.yaml:2: listen: unknown key \"proxy\" in a listener (known: address, proxy_protocol)"]),
        ErrorRow(name: "listener mapping without an address", yaml: "listen:\n  - {proxy_protocol: true}\n",
                 lines: ["t.yaml:2: listen: a listener written as a mapping needs address: HOST:PORT"]),
        ErrorRow(name: "listener mapping with a bad flag", yaml: "listen:\n  - {address: 127.0.0.1:1, proxy_protocol: sure}\n",
                 lines: ["t.yaml:2: listen: expected true or false, got \"sure\""]),
        ErrorRow(name: "listener mapping with a bad address", yaml: "tls:\n  listen:\n    - {address: nowhere, proxy_protocol: true}\n",
                 lines: ["t.yaml:3: tls.listen: expected HOST:PORT, got \"nowhere\""]),
        ErrorRow(name: "PROXY protocol listener nobody may reach",
                 yaml: "listen:\n  - {address: 127.0.0.1:1, proxy_protocol: true}\nproxy_protocol_from: []\n",
                 lines: ["t.yaml: proxy_protocol_from: is empty, so no load balancer may connect to the proxy_protocol listeners"]),
        ErrorRow(name: "mapping where a value belongs", yaml: "workers:\n  a: 1\n",
                 lines: ["t.yaml:2: workers: expected a single value, got a mapping"]),
        ErrorRow(name: "section given a value", yaml: "session: 5\n",
                 lines: ["t.yaml:1: session: expected a section of keys, got \"5\""]),
        ErrorRow(name: "duplicate key", yaml: "workers: 1\nworkers: 2\n", lines: ["t.yaml:2: workers: appears twice"]),
        ErrorRow(name: "zero timeout", yaml: "session:\n  connect_timeout: 0\n",
                 lines: ["t.yaml:2: session.connect_timeout: must be longer than zero"]),
        ErrorRow(name: "bad header name", yaml: "session:\n  http_additional_headers:\n    \"Bad Name\": x\n",
                 lines: ["t.yaml:3: session.http_additional_headers: \"Bad Name\" is not a valid header field name"]),
        ErrorRow(name: "credentials in the parent proxy's address, never quoted",
                 yaml: "session:\n  proxy: http://alice:s3cret@p:3128\n",
                 lines: ["t.yaml:2: session.proxy: credentials do not belong in the parent proxy's address (it is shown "
                         + "and logged): put `user:password` in the file session.proxy_credentials_file names"]),
        ErrorRow(name: "credentials before a parent proxy without a scheme, never quoted",
                 yaml: "session:\n  proxy: alice:s3cret@p:3128\n",
                 lines: ["t.yaml:2: session.proxy: credentials do not belong in the parent proxy's address (it is shown "
                         + "and logged): put `user:password` in the file session.proxy_credentials_file names"]),
        ErrorRow(name: "https parent proxy", yaml: "session:\n  proxy: https://p:3128\n",
                 lines: ["t.yaml:2: session.proxy: a parent proxy is reached over plain http://, got \"https://p:3128\""]),
        ErrorRow(name: "tls versions crossed", yaml: "session:\n  tls_minimum_version: \"1.3\"\n  tls_maximum_version: \"1.2\"\n",
                 lines: ["t.yaml: session.tls_minimum_version: 1.3 is above tls_maximum_version 1.2"]),
        ErrorRow(name: "admin endpoint off loopback without a token", yaml: "admin_listen: 0.0.0.0:9090\n",
                 lines: ["t.yaml: admin_listen: 0.0.0.0:9090 is reachable from other machines: set admin_token, "
                         + "or listen on a loopback address"]),
        ErrorRow(name: "admin endpoint off loopback with the example's placeholder token",
                 yaml: "admin_listen: 0.0.0.0:9090\nadmin_token: change-me\n",
                 lines: ["t.yaml: admin_token: \"change-me\" is a placeholder, and the admin endpoint listens off loopback: "
                         + "set LARDER_ADMIN_TOKEN to a random secret of at least 16 characters (e.g. `openssl rand -hex 24`)"]),
        ErrorRow(name: "admin endpoint off loopback with a short token, not quoted",
                 yaml: "admin_listen: \"[::]:9090\"\nadmin_token: s3cret-15-chars\n",
                 lines: ["t.yaml: admin_token: is 15 characters, too short for an admin endpoint that listens off loopback: "
                         + "set LARDER_ADMIN_TOKEN to a random secret of at least 16 characters (e.g. `openssl rand -hex 24`)"]),
        ErrorRow(name: "admin endpoint on the proxy port", yaml: "listen: [127.0.0.1:3128]\nadmin_listen: 127.0.0.1:3128\n",
                 lines: ["t.yaml: admin_listen: port 3128 is also a proxy port: the admin endpoint needs its own"]),
        ErrorRow(name: "admin token with a space", yaml: "admin_token: \"a b\"\n",
                 lines: ["t.yaml:1: admin_token: must be printable ASCII without spaces"]),
        ErrorRow(name: "top level not a mapping", yaml: "- a\n- b\n",
                 lines: ["t.yaml:1: expected a mapping of keys to values at the top level"]),
        ErrorRow(name: "cache rule with an unknown key", yaml: "cache:\n  rules:\n    - {host: a.com, colour: red}\n",
                 lines: ["t.yaml:3: cache.rules: rule 1: colour: unknown key (known: scheme, host, path_prefix, path, status, content_type, policy, storage, freshness, ignore_reload)"]),
        ErrorRow(name: "cache rule that sets nothing", yaml: "cache:\n  rules:\n    - host: a.com\n",
                 lines: ["t.yaml:3: cache.rules: rule 1: sets nothing (give policy, storage, freshness or ignore_reload)"]),
        ErrorRow(name: "unknown storage policy", yaml: "cache:\n  rules:\n    - {storage: sometimes}\n",
                 lines: ["t.yaml:3: cache.rules: rule 1: storage: expected one of allowed, memory-only, not-allowed, got \"sometimes\""]),
        ErrorRow(name: "offline not a boolean", yaml: "cache:\n  offline: maybe\n",
                 lines: ["t.yaml:2: cache.offline: expected true or false, got \"maybe\""]),
        ErrorRow(name: "https listener without a certificate", yaml: "tls:\n  listen: [127.0.0.1:3129]\n",
                 lines: ["t.yaml: tls.listen: needs tls.certificate_file and tls.key_file (the certificate Larder presents)"]),
        ErrorRow(name: "trust entry with a short fingerprint", yaml: "tls:\n  trust:\n    - {host: a.example, sha256: abcd}\n",
                 lines: ["t.yaml:3: tls.trust: entry 1: sha256 must be 32 bytes of hex, got \"abcd\""]),
        ErrorRow(name: "trust entry without a host",
                 yaml: "tls:\n  trust:\n    - {sha256: " + String(repeating: "0", count: 64) + "}\n",
                 lines: ["t.yaml:3: tls.trust: entry 1: needs both host and sha256"]),
        ErrorRow(name: "interception CA certificate without its key",
                 yaml: "tls:\n  intercept_ca_certificate: /ca.pem\n",
                 lines: ["t.yaml: tls.intercept_ca_certificate: give both tls.intercept_ca_certificate and tls.intercept_ca_key, or neither"]),
        ErrorRow(name: "interception CA directory inside the cache directory",
                 yaml: "cache_dir: /var/cache/larder\ntls:\n  intercept: [pkg.example]\n  intercept_ca_dir: /var/cache/larder/./ca\n",
                 lines: ["t.yaml: tls.intercept_ca_dir: /var/cache/larder/./ca is inside cache_dir: a cache moved aside "
                         + "or wiped would take the CA clients trust with it; give a directory outside it"]),
        ErrorRow(name: "ephemeral not a boolean", yaml: "cache:\n  ephemeral: sometimes\n",
                 lines: ["t.yaml:2: cache.ephemeral: expected true or false, got \"sometimes\""]),
        ErrorRow(name: "minted certificates living too long", yaml: "tls:\n  intercept_certificate_lifetime: 1000d\n",
                 lines: ["t.yaml:2: tls.intercept_certificate_lifetime: must be between 1h and 825d (clients reject longer-lived certificates)"]),
        ErrorRow(name: "cache rule host with a misplaced wildcard",
                 yaml: "cache:\n  rules:\n    - {host: \"*example.com\", storage: not-allowed}\n",
                 lines: ["t.yaml:3: cache.rules: rule 1: host: expected a host name, *.domain or *, got \"*example.com\" "
                         + "(* stands alone or as the whole first label, as in *.example.com)"]),
        ErrorRow(name: "reverse allowed host with a port", yaml: "reverse_allowed_hosts: [site.example:8080]\n",
                 lines: ["t.yaml:1: reverse_allowed_hosts: expected a host name, *.domain or *, got \"site.example:8080\" "
                         + "(not an IPv6 address, and a host pattern has no port)"]),
        ErrorRow(name: "interception pattern with an empty label", yaml: "tls:\n  intercept: [.pkg.example]\n",
                 lines: ["t.yaml:2: tls.intercept: expected a host name, *.domain or *, got \".pkg.example\" "
                         + "(empty label; for a domain's subdomains write *.example.com)"]),
        ErrorRow(name: "cache rule path pattern without a leading slash",
                 yaml: "cache:\n  rules:\n    - {path: \"pool/*.deb\", storage: not-allowed}\n",
                 lines: ["t.yaml:3: cache.rules: rule 1: path: must start with / or *, got \"pool/*.deb\""]),
        ErrorRow(name: "cache rule path pattern with a query",
                 yaml: "cache:\n  rules:\n    - {path: \"/a?b=*\", storage: not-allowed}\n",
                 lines: ["t.yaml:3: cache.rules: rule 1: path: holds ? (paths are matched without their query), got \"/a?b=*\""]),
        ErrorRow(name: "unknown preset", yaml: "cache:\n  presets: [debian, debain]\n",
                 lines: ["t.yaml:2: cache.presets: unknown preset \"debain\" (known: debian, pypi, npm, crates, go, maven, rubygems, docker)"]),
        ErrorRow(name: "preset listed twice", yaml: "cache:\n  presets: [pypi, pypi]\n",
                 lines: ["t.yaml:2: cache.presets: preset \"pypi\" is listed twice"]),
        ErrorRow(name: "via with spaces", yaml: "via_name: my proxy\n",
                 lines: ["t.yaml:1: via_name: must be a single token without spaces or commas, got \"my proxy\""]),
    ]

    @Test(arguments: rows) func reportsProblem(_ row: ErrorRow) {
        do {
            _ = try ConfigLoader.load(yaml: row.yaml, fileName: "t.yaml")
            Issue.record("accepted")
        } catch {
            #expect(error.description.split(separator: "\n").map(String.init) == row.lines)
        }
    }

    @Test func syntaxErrorHasALine() {
        do {
            _ = try ConfigLoader.load(yaml: "workers: 1\nlisten: [a:1\ncache_dir: x\n", fileName: "t.yaml")
            Issue.record("accepted")
        } catch {
            #expect(error.problems.count == 1)
            #expect(error.problems[0].line != nil)
            #expect(error.description.hasPrefix("t.yaml:"))
            #expect(error.description.contains("YAML syntax"))
        }
    }

    @Test func missingFile() {
        do {
            _ = try ConfigLoader.load(path: "/nonexistent/larder.yaml")
            Issue.record("accepted")
        } catch {
            #expect(error.description == "/nonexistent/larder.yaml: cannot read: No such file or directory")
        }
    }
}

@Suite struct HostPatternConfigTests {
    @Test func patternsAreParsedOnceIntoHostPatterns() throws {
        let c = try ConfigLoader.load(yaml: """
        reverse_allowed_hosts: ["Site.Example.", "[FD00::1]"]
        auth:
          destinations: ["*.internal.example"]
        tls:
          trust:
            - {host: "*", sha256: \(String(repeating: "0", count: 64))}
          intercept: ["*.pkg.example"]
        """)
        #expect(c.reverseAllowedHosts.map(\.description) == ["site.example", "fd00::1"])
        #expect(c.reverseAllowedHosts[1].matches("fd00:0::1"))
        #expect(c.auth.destinations == ["*.internal.example"])
        #expect(c.tls.trust.map(\.host) == [.any])
        #expect(c.tls.intercept[0].matches("a.pkg.example") && !c.tls.intercept[0].matches("pkg.example"))
        #expect(Config().auth.destinations == [.any])
    }
}

@Suite struct CacheConfigTests {
    @Test func cacheSectionAndRules() throws {
        let c = try ConfigLoader.load(yaml: """
        cache:
          disk_capacity: 2GiB
          memory_capacity: 128MiB
          durability: safe
          revalidation: conditional-get
          offline: true
          heuristic_max: 12h
          rules:
            - host: "*.example.com"
              path_prefix: /static/
              status: [200, 404]
              storage: memory-only
              freshness: {maximum: 1h, default: 10m}
            - {scheme: https, policy: return-cache-data-else-load}
        """)
        #expect(c.cache.diskCapacity == 2 << 30)
        #expect(c.cache.memoryCapacity == 128 << 20)
        #expect(c.cache.durability == .safe)
        #expect(c.cache.revalidation == .conditionalGet)
        #expect(c.cache.offline)
        #expect(c.cache.heuristicMax == 43_200)
        var first = CacheRuleConfig()
        first.host = "*.example.com"
        first.pathPrefix = "/static/"
        first.statuses = [200, 404]
        first.storage = .allowedInMemoryOnly
        first.maximumLifetime = 3_600
        first.defaultLifetime = 600
        var second = CacheRuleConfig()
        second.scheme = .https
        second.policy = .returnCacheDataElseLoad
        #expect(c.cache.rules == [first, second])
    }
}

@Suite struct CommandLineTests {
    @Test func flagsGoThroughTheSameParsers() throws {
        var c = Config()
        try ConfigLoader.applyCommandLine([
            .init(name: "--listen", key: "listen", value: "127.0.0.1:0,[::1]:8080"),
            .init(name: "--admin-listen", key: "admin_listen", value: "off"),
            .init(name: "--workers", key: "workers", value: "3"),
            .init(name: "--reverse-origin", key: "reverse_origin", value: "http://127.0.0.1:9000"),
            .init(name: "--log-level", key: "log_level", value: "debug"),
        ], to: &c)
        #expect(c.listen == [Endpoint(host: "127.0.0.1", port: 0), Endpoint(host: "::1", port: 8080)])
        #expect(c.adminListen == nil)
        #expect(c.workers == 3)
        #expect(c.reverseOrigin == OriginURL(scheme: .http, host: "127.0.0.1", port: 9000))
        #expect(c.logLevel == .debug)
    }

    @Test func badFlagsAreNamedByTheirFlag() {
        var c = Config()
        do {
            try ConfigLoader.applyCommandLine([
                .init(name: "--workers", key: "workers", value: "999"),
                .init(name: "--log-level", key: "log_level", value: "loud"),
                .init(name: "--listen", key: "listen", value: "nowhere"),
            ], to: &c)
            Issue.record("accepted")
        } catch {
            #expect(error.description.split(separator: "\n").map(String.init) == [
                "command line: --workers: must be from 0 to 256, got 999",
                "command line: --log-level: expected one of trace, debug, info, notice, warning, error, critical, got \"loud\"",
                "command line: --listen: expected HOST:PORT, got \"nowhere\"",
            ])
        }
    }
}

@Suite struct EnvironmentTests {
    @Test func variablesOverrideTheFile() throws {
        var c = try ConfigLoader.load(yaml: "workers: 2\n")
        try ConfigLoader.applyEnvironment([
            "LARDER_WORKERS": "3",
            "LARDER_LISTEN": "0.0.0.0:3128, [::]:3128",
            "LARDER_ADMIN_LISTEN": "off",
            "LARDER_SESSION_CONNECT_TIMEOUT": "250ms",
            "LARDER_SESSION_HTTP_ADDITIONAL_HEADERS": "{X-A: b, X-C: d}",
            "LARDER_CONNECT_PORTS": "[443, 563]",
            "LARDER_REVERSE_ORIGIN": "http://127.0.0.1:9000",
            "LARDER_CONFIG": "/ignored/here",
            "LARDER_TEST_CRASH": "segv:1",  // the crash test hook, read by the larder command
            "HOME": "/root",
        ], to: &c)
        #expect(c.workers == 3)
        #expect(c.listen == [Endpoint(host: "0.0.0.0", port: 3128), Endpoint(host: "::", port: 3128)])
        #expect(c.adminListen == nil)
        #expect(c.session.connectTimeout == 0.25)
        #expect(c.session.httpAdditionalHeaders == [HeaderPair(name: "X-A", value: "b"), HeaderPair(name: "X-C", value: "d")])
        #expect(c.connectPorts == [443, 563])
        #expect(c.reverseOrigin == OriginURL(scheme: .http, host: "127.0.0.1", port: 9000))
    }

    /// A PROXY protocol listener in the environment's flow form (how compose files set it).
    @Test func listenerMappingsInTheEnvironment() throws {
        var c = Config()
        try ConfigLoader.applyEnvironment([
            "LARDER_LISTEN": "[127.0.0.1:3128, {address: \"0.0.0.0:3129\", proxy_protocol: true}]",
            "LARDER_PROXY_PROTOCOL_FROM": "10.0.0.0/8,fc00::/7",
        ], to: &c)
        #expect(c.listen == [Endpoint(host: "127.0.0.1", port: 3128),
                             Endpoint(host: "0.0.0.0", port: 3129, proxyProtocol: true)])
        #expect(c.proxyProtocolFrom.map(\.description) == ["10.0.0.0/8", "fc00:0:0:0:0:0:0:0/7"])
    }

    @Test func emptyVariableClearsAnOptionalSetting() throws {
        var c = try ConfigLoader.load(yaml: "reverse_origin: http://a:1\n")
        try ConfigLoader.applyEnvironment(["LARDER_REVERSE_ORIGIN": ""], to: &c)
        #expect(c.reverseOrigin == nil)
    }

    @Test func badVariablesAreErrorsAndUnknownOnesWarnings() {
        var c = Config()
        let environment = ["LARDER_WORKERS": "x", "LARDER_WORKER": "2"]
        do {
            try ConfigLoader.applyEnvironment(environment, to: &c)
            Issue.record("accepted")
        } catch {
            #expect(error.description.split(separator: "\n").map(String.init) == [
                "environment: LARDER_WORKERS: expected a thread count (0: one per core), got \"x\"",
            ])
        }
        #expect(ConfigLoader.environmentWarnings(environment) == [
            "environment: LARDER_WORKER: unknown setting, ignored; did you mean LARDER_WORKERS?",
        ])
        // The test hooks are read by the larder command, not settings, and not warned about.
        #expect(ConfigLoader.environmentWarnings(["LARDER_TEST_CRASH": "segv:1", "LARDER_TEST_TUNNEL_SPLICE": "off"]).isEmpty)
    }

    @Test func kubernetesServiceLinksAreIgnoredSilently() throws {
        let links = ["LARDER_PORT": "tcp://10.0.0.1:3128", "LARDER_PORT_3128_TCP": "tcp://10.0.0.1:3128",
                     "LARDER_PORT_3128_TCP_ADDR": "10.0.0.1", "LARDER_PORT_3128_TCP_PORT": "3128",
                     "LARDER_PORT_3128_TCP_PROTO": "tcp", "LARDER_SERVICE_HOST": "10.0.0.1",
                     "LARDER_SERVICE_PORT": "3128", "LARDER_SERVICE_PORT_PROXY": "3128"]
        var c = Config()
        try ConfigLoader.applyEnvironment(links, to: &c)
        #expect(c == Config())
        #expect(ConfigLoader.environmentWarnings(links).isEmpty)
        #expect(ConfigLoader.environmentWarnings(["LARDER_PORT_X_TCP": "1"]).count == 1)
    }
}


@Suite struct ConfigDiffTests {
    @Test func differencesAreSplitIntoLiveAndRestart() throws {
        let old = Config()
        var new = old
        #expect(ConfigDiff.between(old, new) == ([], []))
        new.cache.offline = true
        new.viaName = "edge"
        new.listen = [Endpoint(host: "0.0.0.0", port: 8080)]
        new.cache.diskCapacity = 2 << 30
        let d = ConfigDiff.between(old, new)
        #expect(d.live == ["via_name", "cache.offline"])
        #expect(d.restart == ["listen", "cache.disk_capacity"])
    }
}

@Suite struct LoopbackTests {
    static let hosts: [(String, Bool)] = [
        ("127.0.0.1", true), ("127.1.2.3", true), ("127.255.255.255", true), ("::1", true), ("[::1]", true),
        ("0:0:0:0:0:0:0:1", true), ("::ffff:127.0.0.1", true), ("[::ffff:127.9.9.9]", true),
        ("localhost", true), ("LocalHost", true),
        ("127.evil.example", false), ("127.0.0.1.evil.example", false), ("0.0.0.0", false), ("::", false),
        ("[::]", false), ("::2", false), ("::ffff:10.0.0.1", false), ("128.0.0.1", false), ("10.0.0.1", false),
        ("localhost.evil.example", false), ("", false), ("[::1", false), ("127.1", false), ("::1%lo", false),
    ]

    @Test(arguments: hosts) func loopbackIsAnAddressNotAPrefix(_ host: String, _ loopback: Bool) {
        #expect(Endpoint(host: host, port: 9090).isLoopback == loopback)
    }
}

/// Checks between keys hold whichever layer set the keys: no source skips them.
@Suite struct CrossCheckLayerTests {
    @Test func commandLineIsChecked() {
        var c = Config()
        do {
            try ConfigLoader.applyCommandLine([.init(name: "--admin-listen", key: "admin_listen", value: "0.0.0.0:9090")],
                                              to: &c)
            Issue.record("accepted")
        } catch {
            #expect(error.description == "command line: admin_listen: 0.0.0.0:9090 is reachable from other machines: "
                    + "set admin_token, or listen on a loopback address")
        }
    }

    @Test func resolveNamesTheFlagThatBrokeTheCheck() {
        do {
            _ = try ConfigLoader.resolve(file: nil, environment: [:],
                                         commandLine: [.init(name: "--admin-listen", key: "admin_listen", value: "[::]:0")])
            Issue.record("accepted")
        } catch {
            #expect(error.description == "command line: --admin-listen: [::]:0 is reachable from other machines: "
                    + "set admin_token, or listen on a loopback address")
        }
    }

    @Test func resolveNamesTheVariableThatBrokeTheCheck() {
        do {
            _ = try ConfigLoader.resolve(file: nil, environment: ["LARDER_ADMIN_LISTEN": "127.evil.example:9090"],
                                         commandLine: [])
            Issue.record("accepted")
        } catch {
            #expect(error.problems.map(\.key) == ["LARDER_ADMIN_LISTEN"])
        }
    }

    @Test func aTokenFromAnotherLayerSatisfiesTheCheck() throws {
        let c = try ConfigLoader.resolve(file: nil, environment: ["LARDER_ADMIN_TOKEN": "t0ken-of-16-char"],
                                         commandLine: [.init(name: "--admin-listen", key: "admin_listen", value: "0.0.0.0:9090")])
        #expect(c.adminListen == Endpoint(host: "0.0.0.0", port: 9090) && c.adminToken == "t0ken-of-16-char")
    }

    /// The environment's token replaces the file's placeholder; a weak one there is named by its variable.
    @Test func theTokenRuleNamesTheLayerThatSetTheToken() {
        do {
            _ = try ConfigLoader.resolve(file: nil, environment: ["LARDER_ADMIN_TOKEN": "weak1"],
                                         commandLine: [.init(name: "--admin-listen", key: "admin_listen", value: "0.0.0.0:9090")])
            Issue.record("accepted")
        } catch {
            #expect(error.problems.map(\.key) == ["LARDER_ADMIN_TOKEN"])
            #expect(error.description.contains("is 5 characters"))
            #expect(!error.description.contains("weak1"), "a real token, however weak, stays out of the message")
        }
    }

    /// On loopback the token is optional, so a short one or a placeholder is no worse than none.
    @Test func onLoopbackAnyTokenWillDo() throws {
        let c = try ConfigLoader.resolve(file: nil, environment: ["LARDER_ADMIN_TOKEN": "change-me"],
                                         commandLine: [.init(name: "--admin-listen", key: "admin_listen", value: "127.0.0.1:9090")])
        #expect(c.adminToken == "change-me")
    }

    @Test func aLoopbackFlagNeedsNoToken() throws {
        let c = try ConfigLoader.resolve(file: nil, environment: [:],
                                         commandLine: [.init(name: "--admin-listen", key: "admin_listen", value: "[::1]:0")])
        #expect(c.adminListen == Endpoint(host: "::1", port: 0))
    }

    @Test func checkRunsOnAnyConfiguration() {
        var c = Config()
        c.adminListen = Endpoint(host: "0.0.0.0", port: 9090)
        #expect(throws: ConfigErrors.self) { try ConfigLoader.check(c, source: "test") }
        c.adminToken = "x"
        #expect(throws: ConfigErrors.self) { try ConfigLoader.check(c, source: "test") }
        c.adminToken = "a-token-of-16-ch"
        #expect(throws: Never.self) { try ConfigLoader.check(c, source: "test") }
    }
}
