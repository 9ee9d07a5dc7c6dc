import CacheStore
import EventLoop

/// Holds an origin read back while the cache's disk writer is behind, so a store keeps pace with
/// the disk instead of being given up. The writer is another thread; its progress is polled every
/// couple of milliseconds, only while paused.
final class WriterPacer {
    private var timer: Timer?
    private let loop: EventLoop
    private let caughtUp: () -> Void
    private var writer: EntryWriter?
    private(set) var paused = false

    static let pollInterval = 0.002

    init(loop: EventLoop, caughtUp: @escaping () -> Void) {
        self.loop = loop
        self.caughtUp = caughtUp
    }

    /// Call after feeding `writer`: true when the read must pause now (`caughtUp` runs later).
    func shouldPause(after writer: EntryWriter?) -> Bool {
        guard !paused, let writer, writer.isBehind else { return false }
        paused = true
        self.writer = writer
        if timer == nil { timer = Timer(loop: loop) { [unowned self] in self.poll() } }
        timer!.schedule(after: WriterPacer.pollInterval)
        return true
    }

    private func poll() {
        if let w = writer, w.isBehind {
            timer!.schedule(after: WriterPacer.pollInterval)
            return
        }
        paused = false
        writer = nil
        caughtUp()
    }

    /// The read is over: forget the pause without calling back.
    func cancel() {
        timer?.cancel()
        paused = false
        writer = nil
    }
}
