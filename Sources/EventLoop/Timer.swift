@preconcurrency import CLibevent
import Glibc

/// A one-shot or repeating timer on a loop. Callbacks run on the loop's thread.
public final class Timer {
    private var event: OpaquePointer?
    private let handler: () -> Void
    private let repeating: Bool
    /// False once the timer is surely not pending (never armed, cancelled, or fired once): a
    /// cancel is then skipped, where libevent's locked its base and looked the event up (some 90
    /// instructions, for a connection's idle timer on every HTTP/2 request).
    private var mayBePending = false

    public init(loop: EventLoop, repeating: Bool = false, _ handler: @escaping () -> Void) {
        self.handler = handler
        self.repeating = repeating
        let flags: Int16 = repeating ? Int16(EV_PERSIST) : 0
        event = event_new(loop.base, -1, flags, { _, _, arg in
            let timer = Unmanaged<Timer>.fromOpaque(arg!).takeUnretainedValue()
            if !timer.repeating { timer.mayBePending = false }
            timer.handler()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { if let e = event { event_free(e) } }

    /// (Re)arms the timer to fire after `seconds`.
    public func schedule(after seconds: Double) {
        var tv = timeval(seconds: seconds)
        mayBePending = true
        event_add(event, &tv)
    }

    public func cancel() {
        guard mayBePending else { return }
        mayBePending = false
        event_del(event)
    }

    /// Runs the handler at the loop's next turn, once however often this is asked before then.
    /// For a timer used only this way (`isPending` is true once it is asked).
    public func fireAtNextTurn() {
        guard let event, event_pending(event, Int16(EV_TIMEOUT), nil) == 0 else { return }
        mayBePending = true
        event_active(event, Int32(EV_TIMEOUT), 0)
    }

    public var isPending: Bool { event_pending(event, Int16(EV_TIMEOUT), nil) != 0 }
}

extension timeval {
    init(seconds: Double) {
        let s = max(0, seconds)
        let whole = s.rounded(.down)
        self.init(tv_sec: Int(whole), tv_usec: Int((s - whole) * 1_000_000))
    }
}
