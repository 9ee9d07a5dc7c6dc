@preconcurrency import CLibevent
import Glibc

/// A view of a libevent buffer (a stream's input or output). Cheap to copy; valid while its stream lives.
///
/// What every request calls is inlinable: from other modules, each was a call of its own around a
/// call into libevent, and the generic ones ran unspecialized.
public struct Buffer {
    @usableFromInline let raw: OpaquePointer

    init(_ raw: OpaquePointer) { self.raw = raw }

    /// Bytes currently held.
    @inlinable public var count: Int { evbuffer_get_length(raw) }

    /// Calls `body` with the first `min(count, maxBytes)` bytes made contiguous (may copy inside libevent).
    @inlinable
    public func withContiguousPrefix<R, E: Error>(maxBytes: Int,
                                                  _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let n = min(count, maxBytes)
        if n == 0 { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        let p = evbuffer_pullup(raw, n)
        return try body(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// Calls `body` with the first contiguous segment (no copy); it may be shorter than `count`.
    @inlinable
    public func withFirstSegment<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var vec = iovec()
        let got = evbuffer_peek(raw, -1, nil, &vec, 1)
        if got < 1 { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeRawBufferPointer(start: vec.iov_base, count: vec.iov_len))
    }

    /// Calls `body` with each contiguous segment of the first `n` bytes, in order, without copying
    /// (a tee of a body into the cache while it is forwarded).
    public func forEachSegment(upTo n: Int, _ body: (UnsafeRawBufferPointer) -> Void) {
        var remaining = min(n, count)
        guard remaining > 0 else { return }
        // On the stack: an array here cost an unspecialized allocation for every piece of a body.
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 16) { vecs in
            let v = vecs.baseAddress!
            var ptr = evbuffer_ptr()
            var first = true
            while remaining > 0 {
                let got = first ? evbuffer_peek(raw, remaining, nil, v, 16) : evbuffer_peek(raw, remaining, &ptr, v, 16)
                guard got > 0 else { return }
                var advanced = 0
                for i in 0..<min(Int(got), 16) where remaining > 0 {
                    let take = min(v[i].iov_len, remaining)
                    body(UnsafeRawBufferPointer(start: v[i].iov_base, count: take))
                    remaining -= take
                    advanced += take
                }
                if remaining > 0 {
                    // More than 16 segments: continue from where these ended.
                    let consumedBefore = first ? 0 : ptr.pos
                    first = false
                    guard evbuffer_ptr_set(raw, &ptr, consumedBefore + advanced, EVBUFFER_PTR_SET) == 0 else { return }
                }
            }
        }
    }

    /// Makes the first `n` bytes one segment (copying them if they are not), so that whatever
    /// writes segment by segment writes them at once.
    @inlinable public func makeContiguous(_ n: Int) { _ = evbuffer_pullup(raw, n) }

    /// Drops the first `n` bytes.
    @inlinable public func drain(_ n: Int) { evbuffer_drain(raw, n) }

    /// Moves up to `into.count` bytes from the front into `into`; how many.
    @inlinable public func remove(into destination: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = destination.baseAddress, destination.count > 0 else { return 0 }
        return max(0, Int(evbuffer_remove(raw, base, destination.count)))
    }

    @inlinable
    public func append(_ bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress, bytes.count > 0 { evbuffer_add(raw, base, bytes.count) }
    }

    @inlinable
    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Appends `bytes` without copying them. `owner`, which keeps the bytes where they are, is
    /// retained until libevent has written them or freed the buffer.
    public func appendReference(_ bytes: UnsafeRawBufferPointer, keepingAlive owner: AnyObject) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let context = Unmanaged.passRetained(owner).toOpaque()
        if evbuffer_add_reference(raw, base, bytes.count, Buffer.releaseOwner, context) != 0 {
            Unmanaged<AnyObject>.fromOpaque(context).release()
            append(bytes)
        }
    }

    /// `appendReference` in pieces of at most `piece` bytes (all of it in one when `piece` is 0),
    /// each a segment of its own: at most `maxPieces` of them, the rest in one (a segment costs a
    /// small allocation, which must not grow without bound with what a cache may hold).
    public func appendReference(_ bytes: UnsafeRawBufferPointer, keepingAlive owner: AnyObject, inPiecesOf piece: Int) {
        guard piece > 0, bytes.count > piece else { return appendReference(bytes, keepingAlive: owner) }
        var start = 0
        var pieces = 0
        while start < bytes.count {
            pieces += 1
            let end = pieces < Buffer.maxPieces ? min(start + piece, bytes.count) : bytes.count
            appendReference(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), keepingAlive: owner)
            start = end
        }
    }

    /// 4 MiB in the 16 KiB pieces of HTTP/2 frames.
    public static let maxPieces = 256

    /// How many of the first `n` bytes lie in whole segments (looking at 16 at most), in how many,
    /// and how long the segment after them is (`Int.max` if unknown): moving `length` bytes to
    /// another buffer moves segments and copies none.
    public func wholeSegments(upTo n: Int) -> (length: Int, count: Int, next: Int) {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 17) { vecs in
            // One segment past `n`, to see how long the next one is.
            let got = min(Int(evbuffer_peek(raw, n + 1, nil, vecs.baseAddress, 17)), 17)
            var whole = 0
            var count = 0
            for i in 0..<got {
                guard whole + vecs[i].iov_len <= n else { return (whole, count, vecs[i].iov_len) }
                whole += vecs[i].iov_len
                count += 1
            }
            return (whole, count, Int.max)
        }
    }

    private static let releaseOwner: evbuffer_ref_cleanup_cb = { _, _, context in
        Unmanaged<AnyObject>.fromOpaque(context!).release()
    }

    @inlinable
    public func append(_ text: StaticString) {
        evbuffer_add(raw, text.utf8Start, text.utf8CodeUnitCount)
    }

    /// Named apart from `append(_: StaticString)` so that literals keep the cheap overload.
    public func appendString(_ text: String) {
        var t = text
        t.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Moves the first `n` bytes of `source` to the end of this buffer without copying payload.
    @inlinable
    public func move(_ n: Int, from source: Buffer) {
        evbuffer_remove_buffer(source.raw, raw, n)
    }


    /// Moves everything from `source` to the end of this buffer.
    @inlinable
    public func moveAll(from source: Buffer) {
        evbuffer_add_buffer(raw, source.raw)
    }

    /// Offset of the first occurrence of `needle`, if any.
    public func firstIndex(of needle: StaticString) -> Int? {
        let pos = evbuffer_search(raw, needle.utf8Start, needle.utf8CodeUnitCount, nil)
        return pos.pos < 0 ? nil : pos.pos
    }

    /// Copies the whole buffer out (tests and small messages only).
    public func copyBytes() -> [UInt8] {
        let n = count
        var out = [UInt8](repeating: 0, count: n)
        out.withUnsafeMutableBytes { _ = evbuffer_copyout(raw, $0.baseAddress, n) }
        return out
    }
}
