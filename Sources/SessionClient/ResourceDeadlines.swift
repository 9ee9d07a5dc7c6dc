import EventLoop

/// `timeoutIntervalForResource` for every task of a session with one timer. The interval is the
/// same for all, so tasks listed in the order they were resumed are also in the order of their
/// deadlines, and only the first one needs a timer. A task that ends leaves the list without
/// touching the timer; when the timer fires it fails the tasks past their deadline and re-arms for
/// the next one (if the first task had already left, it simply re-arms). A request costs two
/// pointer updates instead of a timer of its own (three allocations, an add and a delete).
final class ResourceDeadlines {
    private let loop: EventLoop
    private let interval: Double
    private var timer: Timer?
    private var armed = false
    /// Tasks with a deadline, oldest first. Not retained: a task leaves the list when it ends, and
    /// at the latest when it is freed.
    private unowned(unsafe) var first: SessionTask?
    private unowned(unsafe) var last: SessionTask?

    init(loop: EventLoop, interval: Double) {
        self.loop = loop
        self.interval = interval
    }

    /// Starts `task`'s deadline now.
    func add(_ task: SessionTask) {
        guard !task.hasDeadline else { return }
        task.hasDeadline = true
        task.deadline = loop.monotonicNow + interval
        task.newerByDeadline = nil
        task.olderByDeadline = last
        if let l = last { l.newerByDeadline = task } else { first = task }
        last = task
        if !armed { arm(after: interval) }
    }

    /// `task` ended (or is freed): it no longer has a deadline.
    func remove(_ task: SessionTask) {
        guard task.hasDeadline else { return }
        task.hasDeadline = false
        if let o = task.olderByDeadline { o.newerByDeadline = task.newerByDeadline } else { first = task.newerByDeadline }
        if let n = task.newerByDeadline { n.olderByDeadline = task.olderByDeadline } else { last = task.olderByDeadline }
        task.olderByDeadline = nil
        task.newerByDeadline = nil
    }

    private func arm(after seconds: Double) {
        if timer == nil {
            timer = Timer(loop: loop) { [unowned self] in self.fire() }
        }
        armed = true
        timer?.schedule(after: seconds)
    }

    private func fire() {
        // Held for the pass: a failed task's delegate may free the last task holding this list.
        withExtendedLifetime(self) { fireExpired() }
    }

    private func fireExpired() {
        armed = false
        let now = loop.monotonicNow
        while let oldest = first, oldest.deadline <= now {
            remove(oldest)
            oldest.resourceDeadlinePassed()
        }
        if let oldest = first { arm(after: max(0, oldest.deadline - now)) }
    }

    /// Tasks waiting for their deadline (tests).
    var count: Int {
        var n = 0
        var t = first
        while let task = t { n += 1; t = task.newerByDeadline }
        return n
    }
}
