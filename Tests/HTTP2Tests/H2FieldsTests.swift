import CNghttp2
import Testing
@testable import HTTP2

@Suite struct H2FieldsTests {
    @Test(arguments: [(200, "200"), (404, "404"), (0, "0"), (7, "7"), (2000, "2000"), (-5, "0")])
    func theStatusIsWrittenFirstAsItIs(_ status: Int, _ text: String) {
        let f = H2Fields(status: status)
        #expect(f.count == 1)
        #expect(Array(f.name(0)) == Array(":status".utf8) && Array(f.value(0)) == Array(text.utf8))
    }

    @Test func namesAndValuesAreKeptAsGiven() {
        var f = H2Fields(status: 200)
        f.append(name: Array("content-type".utf8), value: Array("Text/Plain".utf8))
        f.append(name: Array("x-a".utf8), value: Array("".utf8))
        #expect(f.pairs.map { String(decoding: $0.name, as: UTF8.self) } == [":status", "content-type", "x-a"])
        #expect(f.pairs.map { String(decoding: $0.value, as: UTF8.self) } == ["200", "Text/Plain", ""])
        #expect(f.nameIs(1, Array("content-type".utf8)) && !f.nameIs(1, Array("content-typ".utf8))
                && !f.nameIs(2, Array("x-b".utf8)))
    }

    @Test func nghttp2SeesEveryNameAndValue() {
        let f = H2Fields([(Array("a".utf8), Array("1".utf8)), (Array("bb".utf8), Array("22".utf8))])
        let seen = f.withNameValues { nva in
            nva.map { (String(decoding: UnsafeBufferPointer(start: $0.name, count: $0.namelen), as: UTF8.self),
                       String(decoding: UnsafeBufferPointer(start: $0.value, count: $0.valuelen), as: UTF8.self)) }
        }
        #expect(seen.map(\.0) == ["a", "bb"] && seen.map(\.1) == ["1", "22"])
        #expect(H2Fields().withNameValues { $0.count } == 0)
    }

    /// Fields appended past the room a list started with, from memory, from arrays and from a
    /// collection with no contiguous storage, emptied and appended to again, one removed: the
    /// list reads as an array of pairs built alongside it would.
    @Test func aListGrowsEmptiesAndShrinksAsAnArrayOfPairs() {
        var f = H2Fields(byteCapacity: 4, fieldCapacity: 1)
        var expected: [(name: [UInt8], value: [UInt8])] = []
        func check(_ when: String) {
            #expect(f.count == expected.count, "\(when)")
            #expect(f.pairs.map(\.name) == expected.map(\.name) && f.pairs.map(\.value) == expected.map(\.value), "\(when)")
            #expect(f.isEmpty == expected.isEmpty)
            #expect(f.spans.count == expected.count)
        }
        for round in 0..<3 {
            for i in 0..<40 {
                let name = Array("x-\(round)-\(i)".utf8)
                let value = [UInt8](repeating: UInt8(ascii: "a") + UInt8(i % 26), count: i * 37 % 300)
                switch i % 3 {
                case 0:
                    name.withUnsafeBufferPointer { n in value.withUnsafeBufferPointer { v in f.append(name: n, value: v) } }
                case 1:
                    f.append(name: name, value: value)
                default:
                    f.append(name: name.lazy.map { $0 }, value: value.lazy.map { $0 })
                }
                expected.append((name, value))
            }
            check("round \(round)")
            f.remove(at: 7)
            expected.remove(at: 7)
            f.remove(at: expected.count - 1)
            expected.removeLast()
            check("round \(round), two removed")
            f.removeAll()
            expected.removeAll()
            check("round \(round), emptied")
        }
        // An emptied list hands nghttp2 nothing, and what it gets next only.
        f.append(name: Array("k".utf8), value: Array("v".utf8))
        #expect(f.withNameValues { nva in nva.count == 1 && nva[0].namelen == 1 && nva[0].valuelen == 1 })
        #expect(f.bytes.count == 2)
    }
}
