import Testing
@testable import CacheStore

/// The checksum of stored bytes: known answers, and both implementations agreeing.
@Suite struct CRC32CTests {
    static let vectors: [(String, [UInt8], UInt32)] = [
        ("empty", [], 0),
        ("123456789", Array("123456789".utf8), 0xE306_9283),
        // RFC 3720 (iSCSI) appendix B.4.
        ("32 zeros", [UInt8](repeating: 0, count: 32), 0x8A91_36AA),
        ("32 0xFF", [UInt8](repeating: 0xFF, count: 32), 0x62A8_AB43),
        ("0 to 31", (0..<32).map { UInt8($0) }, 0x46DD_794E),
        ("31 to 0", (0..<32).reversed().map { UInt8($0) }, 0x113F_DB5C),
    ]

    @Test func knownVectors() {
        for (name, bytes, crc) in Self.vectors {
            #expect(CRC32C.checksum(bytes) == crc, "\(name)")
            #expect(bytes.withUnsafeBytes { CRC32C.portable($0) } == crc, "\(name), portable")
        }
    }

    @Test func hardwareAndPortableAgreeOnEveryLengthAndAlignment() {
        let data = (0..<4_200).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 5) }
        data.withUnsafeBytes { all in
            for start in 0..<9 {
                for count in [0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 255, 1_000, 4_000] {
                    let slice = UnsafeRawBufferPointer(rebasing: all[start..<start + count])
                    #expect(CRC32C.checksum(slice) == CRC32C.portable(slice), "start \(start), count \(count)")
                }
            }
        }
    }

    @Test func theThreeWayLoopAgreesWithPortableOnLongInputs() {
        // Around each multiple of the three-block round, with every alignment of the start.
        let round = 3 * 1_024
        let data = (0..<(5 * round + 64)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        data.withUnsafeBytes { all in
            for start in [0, 1, 3, 8] {
                for count in [round - 1, round, round + 1, round + 7, 2 * round, 3 * round + 100, 5 * round] {
                    let slice = UnsafeRawBufferPointer(rebasing: all[start..<start + count])
                    #expect(CRC32C.checksum(slice) == CRC32C.portable(slice), "start \(start), count \(count)")
                    let crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: all[0..<start]))
                    #expect(CRC32C.checksum(slice, continuing: crc)
                            == CRC32C.portable(UnsafeRawBufferPointer(rebasing: all[0..<start + count])),
                            "continuing, start \(start), count \(count)")
                }
            }
        }
        // A flipped bit anywhere in a long input changes the checksum.
        var flipped = data
        let whole = CRC32C.checksum(data)
        for position in stride(from: 0, to: data.count, by: 997) {
            flipped[position] ^= 0x10
            #expect(CRC32C.checksum(flipped) != whole, "bit flipped at \(position)")
            flipped[position] ^= 0x10
        }
    }

    @Test func continuingEqualsOneChecksumOfTheWhole() {
        let data = Array("The quick brown fox jumps over the lazy dog, twice over.".utf8)
        for split in 0...data.count {
            let first = CRC32C.checksum(Array(data[..<split]))
            #expect(CRC32C.checksum(Array(data[split...]), continuing: first) == CRC32C.checksum(data))
            let firstPortable = data[..<split].withUnsafeBytes { CRC32C.portable($0) }
            #expect(data[split...].withUnsafeBytes { CRC32C.portable($0, continuing: firstPortable) } == CRC32C.checksum(data))
        }
    }
}
