import CacheStore
import Glibc
import Testing

@Suite struct CacheEnvironmentTests {
    private func tempDirectory() -> String {
        var template = Array("/tmp/larder-cache-test-XXXXXX".utf8CString)
        let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        return path
    }

    @Test func storesAndReadsBackAcrossReopen() throws {
        let dir = tempDirectory()
        do {
            let env = try CacheEnvironment(directory: dir)
            try env.put(Array("k".utf8), Array("value".utf8))
            #expect(env.get(Array("k".utf8)) == Array("value".utf8))
            #expect(env.get(Array("missing".utf8)) == nil)
            #expect(env.entryCount == 1)
        }
        let reopened = try CacheEnvironment(directory: dir)
        #expect(reopened.get(Array("k".utf8)) == Array("value".utf8))
    }

    @Test func unusableDirectoryIsAnError() {
        #expect(throws: CacheEnvironment.Failure.self) {
            _ = try CacheEnvironment(directory: "/proc/larder-cannot-be-here")
        }
    }
}
