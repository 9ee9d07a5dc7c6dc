import CacheStore
import EventLoop

/// Holds an origin read back while the cache's disk writer is behind, so a store keeps pace with
/// the disk instead of being given up. The writer is another thread; it calls back when its queue
/// is down again (`EntryWriter.whenCaughtUp`), and the call is posted to this loop.
final class WriterPacer {
    private let loop: EventLoop
    private let caughtUp: () -> Void
    private(set) var paused = false
    /// Which pause a callback answers: one that arrives after `cancel` (or for an earlier pause)
    /// is ignored.
    private var pause = 0

    init(loop: EventLoop, caughtUp: @escaping () -> Void) {
        self.loop = loop
        self.caughtUp = caughtUp
    }

    /// Call after feeding `writer`: true when the read must pause now (`caughtUp` runs later).
    func shouldPause(after writer: EntryWriter?) -> Bool {
        guard !paused, let writer, writer.isBehind else { return false }
        paused = true
        pause += 1
        let this = pause
        let loop = self.loop
        let me = WeakPacer(self)
        writer.whenCaughtUp { loop.execute { me.pacer?.resume(this) } }
        return true
    }

    private func resume(_ which: Int) {
        guard paused, which == pause else { return }
        paused = false
        caughtUp()
    }

    /// The read is over: forget the pause without calling back.
    func cancel() {
        paused = false
    }
}

/// A pacer for the writer's callback, which must not keep it (or its connection) alive. Read only
/// on the pacer's loop.
private final class WeakPacer: @unchecked Sendable {
    weak var pacer: WriterPacer?
    init(_ pacer: WriterPacer) { self.pacer = pacer }
}
