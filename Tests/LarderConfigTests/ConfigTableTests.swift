import Testing
import Foundation
@testable import LarderConfig

/// A configuration that sets every key away from its default, with values that are awkward to write
/// back (quoting, IPv6, units, nested rules). Not checked between keys: no valid configuration
/// moves both TLS versions.
private let everyKeyChangedText = """
listen: ["0.0.0.0:3128", {address: "[::1]:3129", proxy_protocol: true}]
proxy_protocol_from: [10.0.0.5, "fd00::/64"]
admin_listen: "[::1]:9091"
admin_token: s3cret#token
admin_hosts: [larder.internal, "fd00::1"]
workers: 4
cache_dir: /var/cache/larder x
shutdown_grace: 2.5s
reverse_origin: https://[::1]:8443
reverse_host: origin
reverse_allowed_hosts: ["*.example.com", www.example.org]
mirrors: [pypi, {name: internal, path: /int/, upstream: "https://[::1]:8443/repo", also: {dl: http://10.0.0.1/files/}}, {name: npm, min_release_age: 7d}]
connect_ports: [443, 8443]
purge_allowed_from: [10.0.0.0/8, "fd00::/8"]
allow_clients: [0.0.0.0/0, "::/0"]
deny_destinations: [192.168.0.0/16, "*.internal", metadata.example]
protect_this_host: "on"
auth:
  users_file: /etc/larder/users
  realm: Build cache
  destinations: ["*.example.com"]
  max_pending_checks: 8
  max_pending_checks_per_client: 2
via_name: edge-1
log_level: debug
access_log: "/var/log/larder: access.log"
access_log_format: json
limits:
  max_head_bytes: 5000B
  max_header_count: 50
  max_uri_bytes: 4096
  client_header_timeout: 1500ms
  client_idle_timeout: 90m
  max_response_head_bytes: 128KiB
  max_request_body: 1MB
  max_connections: 100
  max_connections_per_client: 0
  origin_fetches_per_client: 9
  detached_fetches_per_client: 1
  detached_bytes_per_client: 8MiB
  detached_fetches: 16
  detached_bytes: 256MiB
session:
  http_additional_headers:
    X-Team: "build: nightly"
    X-Second: "2"
  timeout_interval_for_request: 15s
  timeout_interval_for_resource: 1h
  connect_timeout: 500ms
  http_maximum_connections_per_host: 8
  max_idle_connections_per_host: 4
  reuse_after_bodyless_answers: false
  http2: "off"
  idle_connection_timeout: 30s
  proxy: http://parent:3128
  proxy_credentials_file: /etc/larder/parent-credentials
  tls_minimum_version: "1.3"
  tls_maximum_version: "1.2"
  dns_servers: [127.0.0.1:5353, 10.0.0.1, "::1"]
tls:
  ca_file: /etc/ssl/origins.pem
  trust:
    - {host: "*.lab.example", sha256: "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"}
  listen: ["0.0.0.0:3130", {proxy_protocol: yes, address: "127.0.0.1:3131"}]
  certificate_file: /etc/larder/proxy.pem
  key_file: /etc/larder/proxy.key
  admin: true
  intercept: ["*.pkg.example", downloads.example]
  intercept_ca_certificate: /etc/larder/ca.pem
  intercept_ca_key: /etc/larder/ca.key
  intercept_ca_dir: /var/lib/larder/ca
  intercept_key_type: rsa-2048
  intercept_certificate_lifetime: 7d
http2:
  enabled: false
  max_concurrent_streams: 32
  stream_window: 64KiB
  connection_window: 512KiB
  max_header_list: 32KiB
  stream_output: 128KiB
cache:
  disk_capacity: 2GiB
  memory_capacity: 128MiB
  memory_max_object_size: 0
  max_object_size: 1000000
  durability: safe
  sync_interval: 250ms
  revalidation: conditional-get
  default_policy: return-cache-data-else-load
  offline: true
  heuristic_fraction: 0.25
  heuristic_max: 12h
  collapse_requests: false
  on_unusable_dir: pass-through
  ephemeral: true
  rules:
    - host: "*.example.com"
      path_prefix: /static/
      status: [200, 404]
      content_type: image/
      storage: memory-only
      freshness: {maximum: 1h, default: 10m}
    - {scheme: https, policy: reload-revalidating-cache-data, ignore_reload: true}
    - {path_prefix: "/a, b: c", freshness: {forced: 90s}}
    - {path: "**/pool/**.deb", status: [200], freshness: {forced: 365d}}
  presets: [pypi, debian]
  targeted_cache_control: [Larder-Cache-Control, CDN-Cache-Control]
  finish_aborted_fraction: off
  finish_aborted_max_size: 1GiB
  range_misses: pieces
"""

private let everyKeyChanged: Config = try! ConfigLoader.parse(yaml: everyKeyChangedText, fileName: "changed.yaml")

/// The table is the one list of keys: these check that everything else follows it.
@Suite struct ConfigTableTests {
    static let fields = ConfigSchema.fields

    @Test func keysAreUnique() {
        #expect(Set(Self.fields.map(\.key)).count == Self.fields.count)
    }

    /// `Config()` starts every property at its key's default.
    @Test(arguments: fields.map(\.key)) func configStartsAtTheDefault(_ key: String) throws {
        let field = try #require(ConfigSchema.byKey[key])
        #expect(field.holdsDefault(Config()))
    }

    /// Every stored property of `Config` is set by some key (so none has a default of its own).
    @Test func everyPropertyIsAKey() {
        let sections: [Any.Type] = [Config.Auth.self, Config.Limits.self, Config.Session.self, Config.Cache.self,
                                    Config.TLS.self, Config.HTTP2.self]
        func leaves(_ value: Any) -> Int {
            Mirror(reflecting: value).children.reduce(0) { count, child in
                count + (sections.contains { $0 == type(of: child.value) } ? leaves(child.value) : 1)
            }
        }
        let paths = Set(Self.fields.map { $0.path as AnyKeyPath })
        #expect(leaves(Config()) == paths.count)
    }

    /// What the README shows as a key's value is what the file would say, and reads back as the same
    /// value: for the defaults, and for a configuration that changes every key.
    @Test(arguments: fields.map(\.key)) func valuesWrittenOutReadBack(_ key: String) throws {
        let field = try #require(ConfigSchema.byKey[key])
        for config in [Config(), everyKeyChanged] {
            let written = field.text(config)
            let parts = field.key.split(separator: ".")
            let yaml = parts.count == 1 ? "\(key): \(written)\n" : "\(parts[0]):\n  \(parts[1]): \(written)\n"
            let settings = try ConfigLoader.settings(yaml: yaml, fileName: "written.yaml")
            try #require(settings.count == 1, "\(yaml)")
            var read = Config()
            try settings[0].field.apply(&read, settings[0].value)
            #expect(field.same(read, config), "\(yaml)")
        }
    }

    /// The configuration above changes every key; each change is reported as the table says.
    @Test(arguments: fields.map(\.key)) func reloadSortsEachKeyAsTheTableSays(_ key: String) throws {
        let field = try #require(ConfigSchema.byKey[key])
        #expect(!field.holdsDefault(everyKeyChanged), "the test configuration leaves \(key) at its default")
        var new = Config()
        field.copy(everyKeyChanged, &new)
        let diff = ConfigDiff.between(Config(), new)
        // tls.ca_file and session.ca_file set one value: a change is reported under both names.
        let expected = Self.fields.filter { !$0.same(Config(), new) }
        #expect(expected.contains { $0.key == key })
        #expect(diff.live == expected.filter { $0.reload == .live }.map(\.key))
        #expect(diff.restart == expected.filter { $0.reload == .restart }.map(\.key))
        var kept = new
        ConfigDiff.keep(key, from: Config(), in: &kept)
        #expect(kept == Config())
    }

    /// The shipped file sets every key, each to its default.
    @Test func shippedFileSetsEveryKeyToItsDefault() throws {
        let path = repositoryRoot + "/Config/larder.yaml"
        let text = try #require(ConfigLoader.readFile(path))
        let settings = try ConfigLoader.settings(yaml: text, fileName: "larder.yaml")
        let set = Set(settings.map(\.field.key))
        for field in Self.fields {
            #expect(set.contains(field.key), "Config/larder.yaml does not list \(field.key)")
        }
        for (field, value) in settings {
            #expect(try field.isDefault(value),
                    "Config/larder.yaml sets \(field.key) to something other than its default \(field.defaultText)")
        }
    }

    /// The README's key table is `larder config-keys`'s output.
    @Test func readmeTableIsGenerated() throws {
        let text = try #require(ConfigLoader.readFile(repositoryRoot + "/README.md"))
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let header = "| key | default | on reload | meaning |"
        let start = try #require(lines.firstIndex { $0 == header }, "README.md has no configuration key table")
        let end = lines[start...].firstIndex { !$0.hasPrefix("|") } ?? lines.endIndex
        let table = lines[start..<end].joined(separator: "\n") + "\n"
        #expect(table == ConfigSchema.markdown(),
                "README.md's key table is out of date: replace it with the output of `larder config-keys`")
    }
}

@Suite struct ConfigTextTests {
    @Test func durations() {
        #expect(ConfigText.duration(10) == "10s")
        #expect(ConfigText.duration(60) == "60s")
        #expect(ConfigText.duration(0.5) == "500ms")
        #expect(ConfigText.duration(3_600) == "1h")
        #expect(ConfigText.duration(5_400) == "90m")
        #expect(ConfigText.duration(604_800) == "7d")
    }

    @Test func sizes() {
        #expect(ConfigText.size(65_536) == "64KiB")
        #expect(ConfigText.size(1 << 30) == "1GiB")
        #expect(ConfigText.size(1_000_000) == "1000000")
        #expect(ConfigText.size(0) == "0")
    }

    @Test func scalarsAreQuotedWhenPlainYAMLWouldMisreadThem() {
        #expect(ConfigText.scalar("larder-cache") == "larder-cache")
        #expect(ConfigText.scalar("*") == "\"*\"")
        #expect(ConfigText.scalar("::1/128") == "\"::1/128\"")
        #expect(ConfigText.scalar("on") == "\"on\"")
        #expect(ConfigText.scalar("a: b") == "\"a: b\"")
        #expect(ConfigText.scalar("say \"hi\"") == "say \"hi\"")
        #expect(ConfigText.scalar("\"hi\"") == "\"\\\"hi\\\"\"")
    }

    @Test func networksUseTheShortIPv6Form() throws {
        #expect(ConfigText.network(try ConfigLoader.parseAddressRange("::1")) == "::1/128")
        #expect(ConfigText.network(try ConfigLoader.parseAddressRange("fe80::/10")) == "fe80::/10")
        #expect(ConfigText.network(try ConfigLoader.parseAddressRange("10.0.0.0/8")) == "10.0.0.0/8")
    }
}

@Suite struct ClosedSetTests {
    /// A value outside a closed set is refused at load, naming the key and every allowed value.
    static let rows: [(yaml: String, line: String)] = [
        ("cache:\n  durability: sometimes\n", "t.yaml:2: cache.durability: expected one of fast, safe, got \"sometimes\""),
        ("cache:\n  revalidation: GET\n", "t.yaml:2: cache.revalidation: expected one of head, conditional-get, got \"GET\""),
        ("cache:\n  default_policy: reload\n",
         "t.yaml:2: cache.default_policy: expected one of use-protocol-cache-policy, reload-ignoring-local-cache-data, "
            + "reload-revalidating-cache-data, return-cache-data-else-load, return-cache-data-dont-load, got \"reload\""),
        ("access_log_format: xml\n", "t.yaml:1: access_log_format: expected one of combined, json, got \"xml\""),
        ("session:\n  tls_minimum_version: \"1.1\"\n",
         "t.yaml:2: session.tls_minimum_version: expected one of 1.2, 1.3, got \"1.1\""),
        ("tls:\n  intercept_key_type: rsa-1024\n",
         "t.yaml:2: tls.intercept_key_type: expected one of ec-p256, rsa-2048, got \"rsa-1024\""),
        ("reverse_host: server\n", "t.yaml:1: reverse_host: expected one of client, origin, got \"server\""),
        ("protect_this_host: maybe\n", "t.yaml:1: protect_this_host: expected one of auto, on, off, got \"maybe\""),
        ("cache:\n  on_unusable_dir: retry\n",
         "t.yaml:2: cache.on_unusable_dir: expected one of exit, pass-through, got \"retry\""),
        ("cache:\n  targeted_cache_control: [\"CDN Cache Control\"]\n",
         "t.yaml:2: cache.targeted_cache_control: \"CDN Cache Control\" is not a field name"),
        ("cache:\n  rules:\n    - {scheme: ftp, storage: allowed}\n",
         "t.yaml:3: cache.rules: rule 1: scheme: expected one of http, https, got \"ftp\""),
    ]

    @Test(arguments: rows.indices) func refusedWithTheAllowedValues(_ i: Int) {
        do {
            _ = try ConfigLoader.load(yaml: Self.rows[i].yaml, fileName: "t.yaml")
            Issue.record("accepted")
        } catch {
            #expect(error.description == Self.rows[i].line)
        }
    }

    @Test func accessLogDestinations() throws {
        #expect(try ConfigLoader.load(yaml: "access_log: stdout\n").accessLog == .stdout)
        #expect(try ConfigLoader.load(yaml: "access_log: /var/log/a.log\n").accessLog == .file("/var/log/a.log"))
        #expect(try ConfigLoader.load(yaml: "access_log: off\n").accessLog == nil)
        #expect(try ConfigLoader.load(yaml: "access_log:\n").accessLog == nil)
    }
}

/// `GET /config`'s body: every key, its value in force, secrets redacted as the schema says.
@Suite struct ConfigReportTests {
    static func report(_ config: Config) throws -> [String: Any] {
        let text = ConfigReport.json(config)
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        return try #require(object as? [String: Any], "\(text)")
    }

    /// Words that make a key's name sound like a secret.
    static let secretWords = ["token", "password", "passwd", "secret", "key", "credential", "private", "cookie", "hash"]

    /// A new key whose name sounds secret must say what `GET /config` shows of it: redacted, or not
    /// a secret and why. The default (`shown`) is not a decision.
    @Test(arguments: ConfigSchema.fields.map(\.key)) func aKeyThatSoundsSecretDecides(_ key: String) throws {
        let field = try #require(ConfigSchema.byKey[key])
        let words = key.lowercased().split(whereSeparator: { $0 == "." || $0 == "_" })
        let sounds = Self.secretWords.contains { word in words.contains { $0.contains(word) } }
        if sounds {
            #expect(field.disclosure != .shown,
                    "\(key) sounds secret: give it disclosure .redacted, .valuesRedacted or .notSecret(why)")
        }
    }

    /// The keys whose values are kept out, spelled out: dropping one of these fails here.
    @Test func theRedactedKeys() {
        let redacted = ConfigSchema.fields.filter { $0.disclosure == .redacted || $0.disclosure == .valuesRedacted }
        #expect(redacted.map(\.key) == ["admin_token", "session.http_additional_headers"])
    }

    @Test func everyKeyInTheSchemasOrder() throws {
        for config in [Config(), everyKeyChanged] {
            let report = try Self.report(config)
            #expect(Set(report.keys) == Set(ConfigSchema.fields.map(\.key)))
            let text = ConfigReport.json(config)
            let positions = ConfigSchema.fields.map { text.range(of: "\"\($0.key)\":")!.lowerBound }
            #expect(positions == positions.sorted())
        }
    }

    @Test func secretsAreRedactedAndNeverWritten() throws {
        let text = ConfigReport.json(everyKeyChanged)
        #expect(!text.contains("s3cret"))
        #expect(!text.contains("nightly"))
        let report = try Self.report(everyKeyChanged)
        #expect(report["admin_token"] as? String == "REDACTED")
        #expect(report["session.http_additional_headers"] as? [String: String] == ["X-Team": "REDACTED", "X-Second": "REDACTED"])
        // Unset secrets say so: null, as the 401 of a token-less endpoint already tells.
        let defaults = try Self.report(Config())
        #expect(defaults["admin_token"] is NSNull)
        #expect(defaults["session.http_additional_headers"] as? [String: String] == [:])
        // Paths to keys and credentials are shown: the file, not its content.
        #expect(report["tls.key_file"] as? String == "/etc/larder/proxy.key")
        #expect(report["tls.intercept_ca_key"] as? String == "/etc/larder/ca.key")
        #expect(report["session.proxy_credentials_file"] as? String == "/etc/larder/parent-credentials")
    }

    @Test func valuesAreTypedAsJSONWhereTheFileWouldWriteThemSo() throws {
        let r = try Self.report(everyKeyChanged)
        #expect(r["workers"] as? Int == 4)
        #expect(r["cache.offline"] as? Bool == true)
        #expect(r["cache.heuristic_fraction"] as? Double == 0.25)
        #expect(r["listen"] as? [Any] != nil)
        #expect((r["listen"] as? [Any])?.first as? String == "0.0.0.0:3128")
        #expect(((r["listen"] as? [Any])?.last as? [String: Any])?["proxy_protocol"] as? Bool == true)
        #expect(r["session.tls_minimum_version"] as? String == "1.3")
        #expect(r["shutdown_grace"] as? String == "2500ms")
        #expect(r["cache.finish_aborted_fraction"] as? String == "off")
        #expect(r["protect_this_host"] as? String == "on")
        #expect(r["cache.presets"] as? [String] == ["pypi", "debian"])
        #expect(r["access_log"] as? String == "/var/log/larder: access.log")
        let rules = try #require(r["cache.rules"] as? [[String: Any]])
        #expect(rules.count == 4)
        #expect(rules[3]["path"] as? String == "**/pool/**.deb")
        #expect((rules[0]["freshness"] as? [String: Any])?["maximum"] as? String == "1h")
        let d = try Self.report(Config())
        #expect(d["session.proxy"] is NSNull)
        #expect(d["admin_listen"] as? String == "127.0.0.1:9090")
        #expect(d["cache.disk_capacity"] as? String == "1GiB")
    }

    @Test func jsonNumbers() {
        for yes in ["0", "12", "-3", "0.25", "10.5"] { #expect(ConfigReport.isJSONNumber(yes), "\(yes)") }
        for no in ["", "-", "01", "1.", ".5", "1e5", "1.2.3", "0x10", "12s", "1_000"] {
            #expect(!ConfigReport.isJSONNumber(no), "\(no)")
        }
    }
}
