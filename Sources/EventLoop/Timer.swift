@preconcurrency import CLibevent
import Glibc

/// A one-shot or repeating timer on a loop. Callbacks run on the loop's thread.
public final class Timer {
    private var event: OpaquePointer?
    private let handler: () -> Void

    public init(loop: EventLoop, repeating: Bool = false, _ handler: @escaping () -> Void) {
        self.handler = handler
        let flags: Int16 = repeating ? Int16(EV_PERSIST) : 0
        event = event_new(loop.base, -1, flags, { _, _, arg in
            Unmanaged<Timer>.fromOpaque(arg!).takeUnretainedValue().handler()
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { if let e = event { event_free(e) } }

    /// (Re)arms the timer to fire after `seconds`.
    public func schedule(after seconds: Double) {
        var tv = timeval(seconds: seconds)
        event_add(event, &tv)
    }

    public func cancel() { event_del(event) }

    /// Runs the handler at the loop's next turn, once however often this is asked before then.
    /// For a timer used only this way (`isPending` is true once it is asked).
    public func fireAtNextTurn() {
        guard let event, event_pending(event, Int16(EV_TIMEOUT), nil) == 0 else { return }
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
