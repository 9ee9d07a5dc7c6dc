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
}
