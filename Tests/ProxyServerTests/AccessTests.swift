import EventLoop
import LarderConfig
import Testing
@testable import ProxyServer

@Suite struct AccessTests {
    static let sha512 = "$6$saltsalt$TVLlQcbpFVof5W3Yz4DTP6gRstiNuHwwTt6GLc1E5n0U0aDehy0S5knV8wiOQSpT0Y77vwPZN.Pq.H91p5hVO1"
    static let sha256 = "$5$saltsalt$0IyaXrmV7.sGNS6tirgqHLqX/G.FBvgkYA.lpPdS5sA"
    /// The bcrypt suite's vector for the password `U*U`.
    static let bcrypt = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"

    @Test("users file lines", arguments: [
        ("alice:\(sha512)\n", ["alice"]),
        ("# comment\n\nalice:\(sha512)\r\nbob:\(bcrypt):extra field\n", ["alice", "bob"]),
        ("carol:\(sha256)", ["carol"]),
    ])
    func parsesUsersFiles(_ text: String, _ users: [String]) throws {
        let file = try UsersFile.parse(text)
        #expect(file.hashes.keys.sorted() == users)
    }

    @Test("users files refused", arguments: [
        ("alice", 1, "expected user:hash"),
        ("\nalice:$apr1$abc$def", 2, "Apache MD5"),
        ("alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", 1, "unsalted SHA-1"),
        ("alice:secret", 1, "plain-text"),
        ("alice:", 1, "empty"),
        ("alice:$1$salt$hash", 1, "MD5-crypt"),
        (":\(sha512)", 1, "empty user name"),
        ("a:\(sha512)\na:\(sha256)", 2, "appears twice"),
    ])
    func refusesWeakOrBrokenLines(_ text: String, _ line: Int, _ message: String) {
        #expect {
            _ = try UsersFile.parse(text)
        } throws: { error in
            guard let p = error as? UsersFile.Problem else { return false }
            return p.line == line && p.message.contains(message)
        }
    }

    @Test func verifiesSHACryptAndBcrypt() {
        #expect(PasswordHash.verify("secret", against: Self.sha512))
        #expect(!PasswordHash.verify("Secret", against: Self.sha512))
        #expect(PasswordHash.verify("secret", against: Self.sha256))
        #expect(PasswordHash.verify("U*U", against: Self.bcrypt))
        #expect(!PasswordHash.verify("U*V", against: Self.bcrypt))
        #expect(!PasswordHash.verify("secret", against: "garbage"))
    }

    @Test("Basic credentials", arguments: [
        ("Basic YWxpY2U6c2VjcmV0", "alice", "secret"),
        ("basic   YWxpY2U6c2VjcmV0  ", "alice", "secret"),
        ("BASIC YWxpY2U6czpl", "alice", "s:e"),          // a colon in the password
        ("Basic OnB3", "", "pw"),
        ("Basic dTo=", "u", ""),
    ])
    func decodesBasic(_ value: String, _ user: String, _ password: String) {
        #expect(BasicCredentials.parse(Array(value.utf8)) == BasicCredentials(user: user, password: password))
    }

    @Test("not Basic credentials", arguments: [
        "", "Basic", "Basic ", "Bearer YWxpY2U6c2VjcmV0", "Basic YWxpY2U", "Basic YWxpY2U6c2VjcmV0=",
        "Basic YW=xpY2U6", "Basic bm9jb2xvbg==", "BasicYWxpY2U6c2VjcmV0", "Basic YWxp!2U6c2VjcmV0",
    ])
    func rejectsMalformedBasic(_ value: String) {
        #expect(BasicCredentials.parse(Array(value.utf8)) == nil)
    }

    @Test func authenticatorRemembersVerdictsAndMatchesDestinations() async throws {
        let users = try UsersFile.parse("alice:\(Self.sha256)\n")
        let auth = ProxyAuthenticator(users: users, realm: "R", destinations: ["*.internal.example"])
        #expect(auth.required(forHost: Array("db.internal.example".utf8)))
        #expect(!auth.required(forHost: Array("internal.example".utf8)))
        #expect(!auth.required(forHost: Array("example.org".utf8)))
        let good = Array("Basic YWxpY2U6c2VjcmV0".utf8)   // alice:secret
        let bad = Array("Basic YWxpY2U6d3Jvbmc=".utf8)    // alice:wrong
        let nobody = Array("Basic Ym9iOnNlY3JldA==".utf8) // bob:secret
        #expect(auth.rememberedVerdict(good, now: SystemClock.shared.monotonic) == nil)
        for (value, expected) in [(good, ProxyAuthenticator.Verdict.valid), (bad, .invalid), (nobody, .invalid)] {
            let verdict = await withCheckedContinuation { c in
                _ = auth.check(value, client: [127, 0, 0, 1], now: SystemClock.shared.monotonic) { c.resume(returning: $0) }
            }
            #expect(verdict == expected)
            #expect(auth.rememberedVerdict(value, now: SystemClock.shared.monotonic) == expected)
        }
        // Remembered for a while, not for ever.
        #expect(auth.rememberedVerdict(good, now: SystemClock.shared.monotonic + ProxyAuthenticator.validFor + 1) == nil)
        #expect(auth.rememberedVerdict(bad, now: SystemClock.shared.monotonic + ProxyAuthenticator.invalidFor + 1) == nil)
    }

    @Test func destinationRulesRefuseDeniedNetworksHostsAndTheProxyItself() throws {
        let own = OwnListeners()
        own.add(SocketAddress(ipLiteral: "127.0.0.1", port: 3128)!)
        own.add(SocketAddress(ipLiteral: "0.0.0.0", port: 9090)!)
        let patterns = try ["169.254.0.0/16", "fe80::/10", "metadata.google.internal", "*.corp"]
            .map { try ConfigLoader.parseDestinationPattern($0) }
        let rules = DestinationRules(patterns, ownListeners: own)
        func refused(_ host: String, _ port: Int) -> Bool {
            rules.refusal(address: SocketAddress(ipLiteral: host, port: port)!) != nil
        }
        #expect(refused("169.254.169.254", 80))
        #expect(refused("::ffff:169.254.169.254", 80))    // IPv4-mapped
        #expect(refused("fe80::1", 80))
        #expect(!refused("10.1.2.3", 80))
        #expect(refused("127.0.0.1", 3128))
        #expect(!refused("127.0.0.2", 3128))             // nothing listens there
        #expect(!refused("127.0.0.1", 3129))
        #expect(refused("127.0.0.9", 9090))              // a wildcard listener is on every local address
        #expect(refused("0.0.0.0", 3128))
        #expect(refused("::", 3128))
        #expect(refused("::ffff:127.0.0.1", 3128))
        #expect(rules.refusal(host: Array("metadata.google.internal".utf8)) != nil)
        #expect(rules.refusal(host: Array("METADATA.google.internal".utf8)) != nil)
        #expect(rules.refusal(host: Array("wiki.corp".utf8)) != nil)
        #expect(rules.refusal(host: Array("corp".utf8)) == nil)
        #expect(rules.refusal(host: Array("example.com".utf8)) == nil)
        // Requests ask the flag before the patterns: it must say so whenever a host pattern is denied.
        #expect(rules.refusesHostNames)
        let networksOnly = DestinationRules(try ["169.254.0.0/16"].map { try ConfigLoader.parseDestinationPattern($0) },
                                            ownListeners: own)
        #expect(!networksOnly.refusesHostNames)
        let oneHost = DestinationRules([try ConfigLoader.parseDestinationPattern("a.test")], ownListeners: own)
        #expect(oneHost.refusesHostNames && oneHost.refusal(host: Array("a.test".utf8)) != nil)
    }

    @Test func addressRangesMatchIPv4MappedClients() throws {
        let range = try ConfigLoader.parseAddressRange("10.0.0.0/8")
        let mapped = SocketAddress(ipLiteral: "::ffff:10.9.8.7", port: 1)!.addressBytes
        #expect(range.contains(mapped))
        #expect(!range.contains(SocketAddress(ipLiteral: "::ffff:11.9.8.7", port: 1)!.addressBytes))
        #expect(!range.contains(SocketAddress(ipLiteral: "::10.9.8.7", port: 1)!.addressBytes))
    }
}
