import CacheStore

/// Sends a disk-stored body, a window at a time: each response queues at most `window` bytes of
/// it, however many clients read large objects, and large chunks are queued by reference to the
/// map rather than copied. Each chunk's checksum is checked the first time this response reads it.
final class StoredBodySender {
    unowned(unsafe) let connection: ClientConnection
    /// Dropped at the end of the response; the body's pin goes with it once the bytes queued by
    /// reference have been written too.
    private var cursor: CachedBodyCursor?

    /// Bytes of a disk-stored body queued per response; refilled as the socket drains (the stream
    /// reports a drain at `outputHighWater / 4`, which is this): 256 KiB on a connection of its
    /// own, less on an HTTP/2 stream (`http2.stream_output`).

    init(connection: ClientConnection, cursor: CachedBodyCursor) {
        self.connection = connection
        self.cursor = cursor
    }

    func send() {
        let c = connection
        let window = c.outputHighWater / 4
        while var cursor, c.answerQueued < window {
            let room = window - c.answerQueued
            let index = cursor.chunk
            let verify = index > cursor.checkedThrough
            let reader = c.worker.cacheReader
            // A large chunk of a pinned body is queued by reference to the map: no copy per response.
            // The queued bytes keep the pin, so the chunk stays until the socket has taken them.
            let pin = reader.chunkStaysMapped(of: cursor.entry, index: index) ? cursor.pin : nil
            let read = reader.withChunk(of: cursor.entry, index: index, verify: verify) { bytes in
                let start = min(cursor.skip, bytes.count)
                let take = min(bytes.count - start, cursor.remaining, room)
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<start + take])
                if let pin { c.sendBody(reference: slice, keepingAlive: pin) } else { c.sendBody(slice) }
                cursor.remaining -= take
                if start + take == bytes.count {
                    cursor.skip = 0
                    cursor.chunk += 1
                } else {
                    cursor.skip = start + take
                }
            }
            switch read {
            case .delivered:
                if verify { cursor.checkedThrough = index }
            case .missing, .damaged:
                // The entry was replaced or evicted mid-response, or its bytes are damaged (the cache
                // logged that): the client must see a cut, not an end.
                if read == .missing { c.worker.logger.warning("cached body vanished mid-response for \(c.peer); closing") }
                self.cursor = nil
                return c.cutAnswer()
            }
            if cursor.remaining == 0 {
                self.cursor = nil
                return c.finishAnswer()
            }
            self.cursor = cursor
        }
    }

    /// The response is over (or cut): let go of the body now, not when this object goes.
    func release() {
        cursor = nil
    }
}

/// Where a disk-stored body being sent has got to.
struct CachedBodyCursor {
    var entry: StoredResponse
    /// Keeps the body's chunks readable until the cursor is dropped (the response ends).
    var pin: BodyPin?
    var chunk: Int
    var skip: Int
    var remaining: Int
    /// The last chunk whose checksum was checked for this response.
    var checkedThrough: Int
}
