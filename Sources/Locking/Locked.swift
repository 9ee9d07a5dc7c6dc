import Glibc

/// A value behind a pthread mutex; the one lock type Larder uses between threads.
///
/// Not the standard library's `Mutex`: on Linux that hands a contended lock over inside the kernel
/// (a priority-inheritance futex), which ThreadSanitizer cannot see, so every contended section
/// looks like a race and real ones drown among them. ThreadSanitizer intercepts pthread mutexes.
/// Uncontended, both cost one atomic instruction each way.
public final class Locked<Value>: @unchecked Sendable {
    // Heap-allocated: a pthread mutex must not move once initialised.
    @usableFromInline let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    @usableFromInline var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock. Inlinable, so that other modules' calls
    /// are specialized and inlined instead of calling the generic code with a closure.
    @inlinable @inline(__always)
    public func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
