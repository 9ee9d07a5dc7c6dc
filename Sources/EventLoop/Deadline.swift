@preconcurrency import CLibevent

/// A one-shot timer for deadlines that move far more often than they pass: a keep-alive
/// connection's idle deadline is set when one request ends and dropped when the next arrives,
/// thousands of times a second. Setting or dropping it only records the time; libevent is told
/// only when the deadline comes earlier than the time already armed. When the armed time comes,
/// a deadline that has moved later is armed again for what remains, and a dropped one ends there.
/// Callbacks run on the loop's thread.
public final class Deadline {
    /// The loop's clock, held here: read through the loop, it cost a retain and a release of the
    /// loop at every `schedule`. (The event lives in the loop's base, so the loop outlives every
    /// deadline on it.)
    private let clock: any ProxyClock
    private var event: OpaquePointer?
    private let handler: () -> Void
    /// When the handler is due (monotonic seconds); nil: not set.
    private var due: Double?
    /// When libevent will call back; nil: not armed.
    private var armedFor: Double?

    public init(loop: EventLoop, _ handler: @escaping () -> Void) {
        clock = loop.clock
        self.handler = handler
        event = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<Deadline>.fromOpaque(arg!).takeUnretainedValue().armedTimeCame()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { if let e = event { event_free(e) } }

    /// The handler runs `seconds` from now, unless moved or cancelled first.
    public func schedule(after seconds: Double) {
        let at = clock.monotonic + max(0, seconds)
        due = at
        if let armed = armedFor, armed <= at { return }
        arm(for: at, after: seconds)
    }

    /// The handler will not run (until scheduled again).
    public func cancel() { due = nil }

    public var isPending: Bool { due != nil }

    private func arm(for at: Double, after seconds: Double) {
        armedFor = at
        var tv = timeval(seconds: seconds)
        event_add(event, &tv)
    }

    private func armedTimeCame() {
        armedFor = nil
        guard let at = due else { return }
        let now = clock.monotonic
        // libevent's clock may run a hair behind this one: a millisecond early counts as on time.
        if at - now > 0.001 { return arm(for: at, after: at - now) }
        due = nil
        handler()
    }
}
