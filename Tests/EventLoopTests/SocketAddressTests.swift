import Testing
import EventLoop

/// Addresses made from a PROXY protocol header's bytes read back as the client they name.
@Suite struct SocketAddressTests {
    @Test func fromIPv4Bytes() throws {
        let a = try #require(SocketAddress(addressBytes: [10, 1, 2, 3], port: 51_234))
        #expect(a.host == "10.1.2.3" && a.port == 51_234 && !a.isIPv6)
        #expect(a.addressBytes == [10, 1, 2, 3])
        #expect(a.description == "10.1.2.3:51234")
    }

    @Test func fromIPv6Bytes() throws {
        let bytes: [UInt8] = [0x20, 0x01, 0x0D, 0xB8] + Array(repeating: 0, count: 11) + [7]
        let a = try #require(SocketAddress(addressBytes: bytes, port: 65_535))
        #expect(a.host == "2001:db8::7" && a.port == 65_535 && a.isIPv6)
        #expect(a.addressBytes == bytes)
        #expect(a.sameHost(as: try #require(SocketAddress(ipLiteral: "2001:db8::7", port: 1))))
    }

    @Test func otherLengthsAreRefused() {
        #expect(SocketAddress(addressBytes: [], port: 1) == nil)
        #expect(SocketAddress(addressBytes: [1, 2, 3], port: 1) == nil)
        #expect(SocketAddress(addressBytes: Array(repeating: 1, count: 5), port: 1) == nil)
    }
}
