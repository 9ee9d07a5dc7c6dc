import CacheStore
import EventLoop
import SessionClient

/// What holds one origin read back: any one of them pauses it, and it resumes when none does.
struct OriginReadGate: OptionSet {
    let rawValue: UInt8
    /// The client has more than the output high-water mark queued.
    static let client = OriginReadGate(rawValue: 1)
    /// The cache's disk writer is behind.
    static let store = OriginReadGate(rawValue: 2)
    /// A collapsed follower lags (see `InFlightTable`).
    static let followers = OriginReadGate(rawValue: 4)
}

/// The pacing of one origin read, and the timers that let it go again: the disk writer falling
/// behind, collapsed followers lagging (detached when they stop reading), and the client. The one
/// copy, used by a client's fetch (`OriginRelay`) and by a fetch with no client (`DetachedFetch`).
final class OriginReadControl {
    private(set) var gate: OriginReadGate = []
    /// The read it paces; nil once the exchange is over.
    var task: SessionTask?
    private unowned let loop: EventLoop
    private let clock: any ProxyClock
    /// Made on first need: most reads never wait for the disk or a follower.
    private var pacer: WriterPacer?
    private var stallWatch: Timer?
    /// The collapsed fetch whose followers the read waits for.
    private var followed: InFlightFetch?

    init(loop: EventLoop, clock: any ProxyClock, task: SessionTask? = nil) {
        self.loop = loop
        self.clock = clock
        self.task = task
    }

    func pause(_ source: OriginReadGate) {
        gate.insert(source)
        task?.suspendReading()
    }

    func resume(_ source: OriginReadGate) {
        gate.remove(source)
        if gate.isEmpty { task?.resumeReading() }
    }

    /// The cache's disk writer took body bytes: pause while it is behind.
    func paceStore(_ writer: EntryWriter?) {
        guard let writer else { return }
        let p = pacer ?? WriterPacer(loop: loop) { [unowned self] in self.resume(.store) }
        pacer = p
        if p.shouldPause(after: writer) { pause(.store) }
    }

    /// A follower of `fetch` is far behind: wait for it while it reads (`followersCaughtUp`
    /// resumes), and every `stallTimeout` detach those that read nothing meanwhile.
    func waitForFollowers(of fetch: InFlightFetch) {
        followed = fetch
        pause(.followers)
        let watch = stallWatch ?? Timer(loop: loop) { [unowned self] in self.checkStalledFollowers() }
        stallWatch = watch
        watch.schedule(after: InFlightTable.stallTimeout)
    }

    func followersCaughtUp() {
        guard gate.contains(.followers) else { return }
        stallWatch?.cancel()
        followed = nil
        resume(.followers)
    }

    private func checkStalledFollowers() {
        guard gate.contains(.followers), let fetch = followed else { return }
        if fetch.detachStalled(now: clock.monotonic) {
            stallWatch?.schedule(after: InFlightTable.stallTimeout)
        } else {
            followersCaughtUp()
        }
    }

    /// The read is over, or goes to another driver: no pause and no timer is left behind.
    func stop() {
        stallWatch?.cancel()
        pacer?.cancel()
        followed = nil
        gate = []
        task = nil
    }
}
