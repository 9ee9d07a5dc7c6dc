@preconcurrency import CLibevent
import Glibc

/// The other end of an in-memory stream: what an HTTP/2 stream's carrier (its connection) hears
/// from the stream's owner. Called on the loop, outside the owner's callbacks.
public protocol MemoryStreamPeer: AnyObject {
    /// The owner queued bytes in `stream.output`.
    func memoryStreamHasOutput(_ stream: Stream)
    /// The owner took `count` bytes of its input (room for more: flow control).
    func memoryStreamConsumed(_ stream: Stream, count: Int)
    /// The owner is done writing: closed the stream (`reset`: cut, the answer is incomplete), or
    /// shut its writing side down once everything was taken.
    func memoryStreamFinished(_ stream: Stream, reset: Bool)
}

/// A stream with no socket under it: its input is filled and its output taken by a peer in the
/// same process (`MemoryStreamPeer`), so an exchange written for a client connection runs
/// unchanged for one stream of a multiplexed connection. Callbacks to either side are deferred to
/// the loop, never made from inside the other side's calls. A write timeout works as on a socket:
/// output the peer takes nothing of for that long reports `.timeout` (a stream whose client opens
/// no window).
final class MemoryTransport {
    var owner: Unmanaged<Stream>?
    /// The peer, held weakly or (`heldPeer`) strongly: see `Stream.inMemory`.
    var peer: (any MemoryStreamPeer)? { heldPeer ?? weakPeer }
    weak var weakPeer: (any MemoryStreamPeer)?
    var heldPeer: (any MemoryStreamPeer)?
    let input: Buffer
    let output: Buffer
    private var event: OpaquePointer?
    /// Deadlines rather than libevent timers: they move at every request and every piece of an
    /// answer taken, and re-adding a timer each time cost a removal and an insertion in libevent's
    /// heap (about a thousand instructions per HTTP/2 hit); a deadline only records the time.
    private var writeDeadline: Deadline?
    private var writeTimeout: Double?
    /// As on a socket: the owner waiting to read and the peer silent for this long hears `.timeout`.
    private var readDeadline: Deadline?
    private var readTimeout: Double?
    private var readWanted = false
    private var writeLowWatermark = 0
    /// Owner-side reports due at the next turn of the loop.
    private var readableDue = false
    private var drainedDue = false
    private var abortedDue = false
    /// Peer-side reports due.
    private var outputDue = false
    private var consumedDue = 0
    private var finishDue: Bool?
    private var aborted = false
    /// The peer will send nothing more (a tunnel's half-close): once the owner has read what
    /// came before, it hears the end of the stream.
    private var peerEnded = false
    private var endDue = false
    /// The peer took nothing of the output for the write timeout.
    private var stalled = false
    private var shutdownWhenFlushed = false
    private var finished = false
    private var closed = false

    init(loop: EventLoop) {
        input = Buffer(evbuffer_new()!)
        output = Buffer(evbuffer_new()!)
        let me = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<MemoryTransport>.fromOpaque(arg!).takeUnretainedValue().deliver()
        }, me)
        // Owned here, so they never call back after this object is gone.
        writeDeadline = Deadline(loop: loop) { [unowned self] in self.writeTimedOut() }
        readDeadline = Deadline(loop: loop) { [unowned self] in self.readTimedOut() }
        evbuffer_add_cb(output.raw, { _, info, arg in
            guard let info, info.pointee.n_added > 0 else { return }
            Unmanaged<MemoryTransport>.fromOpaque(arg!).takeUnretainedValue().ownerWrote()
        }, me)
        evbuffer_add_cb(input.raw, { _, info, arg in
            guard let info, info.pointee.n_deleted > 0 else { return }
            Unmanaged<MemoryTransport>.fromOpaque(arg!).takeUnretainedValue().ownerRead(info.pointee.n_deleted)
        }, me)
    }

    deinit {
        freeEvents()
        evbuffer_free(input.raw)
        evbuffer_free(output.raw)
    }

    private func freeEvents() {
        if let e = event { event_free(e) }
        event = nil
        writeDeadline = nil
        readDeadline = nil
    }

    private func due() {
        guard let event, event_pending(event, Int16(EV_TIMEOUT), nil) == 0 else { return }
        event_active(event, Int32(EV_TIMEOUT), 0)
    }

    // MARK: The owner's side (through `Stream`)

    func enableReading() {
        readWanted = true
        if input.count > 0 || aborted {
            readableDue = true
            due()
        }
        armReadTimer(restart: false)
    }

    func disableReading() {
        readWanted = false
        readDeadline?.cancel()
    }
    var isReading: Bool { readWanted }

    /// In seconds, as its deadlines take them (nil: none).
    func setTimeouts(read: Double?, write: Double?) {
        writeTimeout = write
        readTimeout = read
        armWriteTimer()
        armReadTimer(restart: true)
    }

    func setWriteLowWatermark(_ bytes: Int) {
        writeLowWatermark = bytes
        if output.count <= bytes, !closed {
            drainedDue = true
            due()
        }
    }

    func shutdownWriteOnceFlushed() {
        shutdownWhenFlushed = true
        if output.count == 0 { finish(reset: false) }
    }

    /// Closed by the owner: whatever it queued is still the peer's to take (an answer's last
    /// bytes), and the peer hears that the answer is complete.
    func close(reset: Bool) {
        guard !closed else { return }
        let reset = reset || stalled
        closed = true
        readWanted = false
        writeDeadline?.cancel()
        readDeadline?.cancel()
        if reset { evbuffer_drain(output.raw, evbuffer_get_length(output.raw)) }
        finish(reset: reset)
    }

    private func ownerWrote() {
        guard !closed else { return }
        outputDue = true
        armWriteTimer()
        due()
    }

    private func ownerRead(_ count: Int) {
        guard !closed else { return }
        consumedDue += count
        due()  // also delivers a pending end once the input is read
    }

    private func finish(reset: Bool) {
        guard !finished else { return }
        finished = true
        finishDue = reset
        due()
    }

    var unread: Stream.UnreadInput {
        if input.count > 0 { return .bytes }
        return aborted || closed || peerEnded ? .endOfStream : .nothing
    }

    // MARK: The peer's side

    /// Bytes for the owner to read.
    func peerAppend(_ bytes: UnsafeRawBufferPointer) {
        guard !closed, !aborted else { return }
        input.append(bytes)
        armReadTimer(restart: true)
        if readWanted {
            readableDue = true
            due()
        }
    }

    /// The peer sends nothing more: the owner hears `.endOfStream` after the bytes before it.
    func peerEnd() {
        guard !closed, !aborted, !peerEnded else { return }
        peerEnded = true
        endDue = true
        due()
    }

    /// The peer took `count` bytes of `output` (after draining them itself).
    func peerTook(_ count: Int) {
        guard count > 0 else { return }
        armWriteTimer(restart: true)
        if !closed, output.count <= writeLowWatermark {
            drainedDue = true
            due()
        }
        if shutdownWhenFlushed, output.count == 0 { finish(reset: false) }
    }

    /// The peer is gone (the client reset the stream, the connection ended): the owner hears an
    /// error, as from a reset socket.
    func peerAborted() {
        guard !aborted, !closed else { return }
        aborted = true
        abortedDue = true
        due()
    }

    // MARK: Timers and delivery

    private func armWriteTimer(restart: Bool = false) {
        guard let writeDeadline else { return }
        guard let timeout = writeTimeout, output.count > 0, !closed else { return writeDeadline.cancel() }
        if restart || !writeDeadline.isPending { writeDeadline.schedule(after: timeout) }
    }

    private func armReadTimer(restart: Bool) {
        guard let readDeadline else { return }
        guard let timeout = readTimeout, readWanted, !closed, !aborted else { return readDeadline.cancel() }
        if restart || !readDeadline.isPending { readDeadline.schedule(after: timeout) }
    }

    private func readTimedOut() {
        guard !closed, readWanted else { return }
        owner?._withUnsafeGuaranteedRef { $0.report(.timeout) }
    }

    private func writeTimedOut() {
        guard !closed, output.count > 0 else { return }
        // The answer is cut: whatever the owner does next, the peer resets its stream.
        stalled = true
        owner?._withUnsafeGuaranteedRef { $0.report(.timeout) }
    }

    /// Runs the reports that fell due, peer's first (so an answer's bytes move before the owner
    /// is told there is room), each only while its side is still there.
    private func deliver() {
        if outputDue {
            outputDue = false
            if let peer, let owner { peer.memoryStreamHasOutput(owner.takeUnretainedValue()) }
        }
        if consumedDue > 0 {
            let n = consumedDue
            consumedDue = 0
            if let peer, let owner { peer.memoryStreamConsumed(owner.takeUnretainedValue(), count: n) }
        }
        if let reset = finishDue {
            finishDue = nil
            if let peer, let owner { peer.memoryStreamFinished(owner.takeUnretainedValue(), reset: reset) }
        }
        guard !closed else { return }
        // What arrived before an abort is read first, as from a socket reset after its data.
        if readableDue {
            readableDue = false
            if readWanted, input.count > 0 { owner?._withUnsafeGuaranteedRef { $0.reportReadable() } }
        }
        guard !closed else { return }
        if abortedDue {
            abortedDue = false
            owner?._withUnsafeGuaranteedRef { $0.report(.error(ECONNRESET)) }
            return
        }
        if endDue, input.count == 0 {
            endDue = false
            owner?._withUnsafeGuaranteedRef { $0.report(.endOfStream) }
        }
        guard !closed else { return }
        if drainedDue {
            drainedDue = false
            if output.count <= writeLowWatermark { owner?._withUnsafeGuaranteedRef { $0.reportDrained() } }
        }
    }
}
