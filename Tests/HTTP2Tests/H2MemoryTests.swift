import CH2Memory
import CNghttp2
import Foundation
import Testing
@testable import HTTP2

/// nghttp2's allocator: blocks freed on a thread serve that thread's next allocations of their
/// size class, up to a bound; everything else is malloc's.
private var memory: nghttp2_mem { larder_h2_memory()!.pointee }

private func allocate(_ size: Int) -> UnsafeMutableRawPointer { memory.malloc(size, nil)! }
private func release(_ block: UnsafeMutableRawPointer?) { memory.free(block, nil) }
private func kept(_ size: Int) -> Int { Int(larder_h2_memory_kept(larder_h2_memory_class(size))) }
/// Blocks kept for this thread, of every class.
private func allKept() -> Int {
    var total = 0
    var klass: Int32 = 0
    while larder_h2_memory_keep_limit(klass) > 0 {
        total += Int(larder_h2_memory_kept(klass))
        klass += 1
    }
    return total
}

/// What `body` returns, run on a thread of its own, whose pool starts empty whatever other tests
/// left on theirs. (Checked by the caller: an expectation on that thread has no test to belong to.)
private func onFreshThread<T>(_ body: @escaping () -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: T?
    nonisolated(unsafe) let run = body
    Thread {
        result = run()
        done.signal()
    }.start()
    done.wait()
    return result!
}

@Test func aFreedBlockServesTheNextAllocationOfItsSizeClass() {
    let seen = onFreshThread { () -> (keptAfterFree: Int, reused: Bool, keptAfterReuse: Int, otherApart: Bool) in
        let first = allocate(100)
        release(first)
        let keptAfterFree = kept(100)
        let second = allocate(120)  // the same class (up to 128 bytes)
        let keptAfterReuse = kept(100)
        let other = allocate(300)  // another class: a block of its own
        defer { release(second); release(other) }
        return (keptAfterFree, second == first, keptAfterReuse, other != first)
    }
    #expect(seen.keptAfterFree == 1 && seen.reused && seen.keptAfterReuse == 0 && seen.otherApart)
}

@Test func blocksAreAlignedAndZeroedByCalloc() {
    var blocks: [UnsafeMutableRawPointer] = []
    for size in [1, 64, 65, 500, 2048, 5000] {
        let p = allocate(size)
        #expect(Int(bitPattern: p) % 16 == 0, "size \(size)")
        p.initializeMemory(as: UInt8.self, repeating: 0xFF, count: size)
        blocks.append(p)
    }
    blocks.forEach(release)
    let zeroed = memory.calloc(10, 50, nil)!  // a reused 512-byte block, written over above
    #expect(UnsafeRawBufferPointer(start: zeroed, count: 500).allSatisfy { $0 == 0 })
    release(zeroed)
    #expect(memory.calloc(Int.max / 2, 4, nil) == nil, "an overflowing count is refused")
}

@Test func reallocKeepsTheBytesWhereverTheBlockGoes() {
    let p = allocate(50)
    for i in 0..<50 { p.storeBytes(of: UInt8(i), toByteOffset: i, as: UInt8.self) }
    #expect(memory.realloc(p, 60, nil) == p, "60 bytes still fit the 64-byte class")
    let grown = memory.realloc(p, 3000, nil)!  // past every class
    #expect((0..<50).allSatisfy { grown.load(fromByteOffset: $0, as: UInt8.self) == UInt8($0) })
    let again = memory.realloc(grown, 9000, nil)!
    #expect((0..<50).allSatisfy { again.load(fromByteOffset: $0, as: UInt8.self) == UInt8($0) })
    #expect(memory.realloc(again, 0, nil) == nil)
    let fresh = memory.realloc(nil, 10, nil)
    #expect(fresh != nil)
    release(fresh)
}

@Test func sizesPastTheLargestClassAreNeverKept() {
    #expect(larder_h2_memory_class(2048) >= 0 && larder_h2_memory_class(2049) == -1)
    let before = allKept()
    release(allocate(4096))
    #expect(allKept() == before)
}

@Test func aThreadKeepsNoMoreThanItsBoundPerClass() {
    let klass = larder_h2_memory_class(64)
    let limit = Int(larder_h2_memory_keep_limit(klass))
    #expect(limit > 0)
    let blocks = (0..<(limit + 50)).map { _ in allocate(64) }
    blocks.forEach(release)
    #expect(Int(larder_h2_memory_kept(klass)) == limit)
}

@Test func aBlockFreedOnAnotherThreadIsKeptThere() {
    nonisolated(unsafe) let block = allocate(200)
    // That thread gives it back to malloc when it ends.
    #expect(onFreshThread { () -> Int in
        release(block)
        return kept(200)
    } == 1)
}

@Test func sessionsTakeTheirMemoryFromThePool() throws {
    let (before, after) = try onFreshThread { () -> Result<(Int, Int), any Error> in
        let before = allKept()
        do {
            let server = try H2ServerSession(settings: H2Settings())
            let recorder = Recorder()
            server.delegate = recorder  // not held by the session
            defer { withExtendedLifetime(recorder) {} }
            let client = TestClient()
            for _ in 0..<5 {
                let id = client.request(get)
                try exchange(client, server)
                recorder.responseBodies[id] = Array(repeating: 1, count: 10)
                _ = server.respond(id, status: 200, fields: [(Array("content-length".utf8), Array("10".utf8))], hasBody: true)
                try exchange(client, server)
            }
        } catch {
            return .failure(error)
        }
        // Each stream's blocks came back here when it closed, and the session's own when it ended.
        return .success((before, allKept()))
    }.get()
    #expect(before == 0 && after > 0)
}
