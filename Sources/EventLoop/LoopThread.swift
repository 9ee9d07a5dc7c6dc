import Glibc

/// A pthread that runs one closure (typically an `EventLoop.run()` and its setup). Plain pthreads keep
/// Foundation out of the server modules.
public final class LoopThread: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: @Sendable () -> Void
    private var started = false

    public init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
    }

    public func start() {
        let ctx = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { arg in
            let me = Unmanaged<LoopThread>.fromOpaque(arg!).takeRetainedValue()
            me.body()
            return nil
        }, ctx)
        precondition(rc == 0, "pthread_create failed")
        started = true
    }

    public func join() {
        if started { pthread_join(thread, nil) }
    }
}
