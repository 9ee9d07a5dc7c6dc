@preconcurrency import CLibevent
import Glibc

/// A listening socket on a loop (`SO_REUSEPORT`, so every worker can bind the same address;
/// `checkUnused` first, so no other process can).
public final class Listener {
    private var listener: OpaquePointer?
    private let onAccept: (Int32, SocketAddress) -> Void
    /// The address actually bound (useful with port 0).
    public let address: SocketAddress

    public enum Failure: Error, CustomStringConvertible {
        case bind(String, errno: Int32)
        case inUse(String)
        public var description: String {
            switch self {
            case .bind(let a, let e): return "cannot listen on \(a): \(String(cString: strerror(e)))"
            case .inUse(let a):
                return "cannot listen on \(a): another process is listening there (address already in use); "
                    + "stop it, or give this Larder another port"
            }
        }
    }

    /// Fails with `.inUse` when any other socket holds `address`. Listeners share an address among
    /// one process's workers through SO_REUSEPORT, and the kernel lets any process of the same
    /// user join such a group: a second Larder on the same ports would take a share of the
    /// connections, `/stats` would alternate between the two and a purge land on either. A socket
    /// bound without SO_REUSEPORT joins no group, so its bind fails exactly when something holds
    /// the address; it is closed at once, before the workers bind. Other bind errors are left for
    /// the real bind to report.
    public static func checkUnused(_ address: SocketAddress) throws(Failure) {
        let inUse: Bool = address.withSockaddr { sa, len in
            let fd = socket(Int32(sa.pointee.sa_family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return false }
            defer { Glibc.close(fd) }
            // As the listeners do: a connection of an earlier Larder in TIME_WAIT is no holder.
            var one: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            return bind(fd, sa, len) != 0 && errno == EADDRINUSE
        }
        if inUse { throw .inUse(address.description) }
    }

    /// Binds and listens; `onAccept` gets each accepted socket (non-blocking, close-on-exec).
    public init(loop: EventLoop, address: SocketAddress, backlog: Int32 = 1024,
                onAccept: @escaping (Int32, SocketAddress) -> Void) throws(Failure) {
        self.onAccept = onAccept
        let flags = LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC
        var bound: OpaquePointer?
        self.address = address
        let placeholder = Unmanaged<ListenerBox>.passRetained(ListenerBox())
        bound = address.withSockaddr { sa, len in
            evconnlistener_new_bind(loop.base, { _, fd, sa, len, arg in
                let box = Unmanaged<ListenerBox>.fromOpaque(arg!).takeUnretainedValue()
                guard let owner = box.owner, let sa else { Glibc.close(fd); return }
                owner.accepted(fd, SocketAddress(sa, length: socklen_t(len)))
            }, placeholder.toOpaque(), flags, backlog, sa, Int32(len))
        }
        guard let bound else {
            let e = errno
            placeholder.release()
            throw .bind(address.description, errno: e)
        }
        listener = bound
        box = placeholder
        boundAddress = SocketAddress.local(of: evconnlistener_get_fd(bound)) ?? address
        placeholder.takeUnretainedValue().owner = self
        evconnlistener_set_error_cb(bound) { _, arg in
            // Accept failures (EMFILE and friends) must not spin the loop: pause accepting briefly.
            let box = Unmanaged<ListenerBox>.fromOpaque(arg!).takeUnretainedValue()
            box.owner?.acceptFailed()
        }
    }

    private var box: Unmanaged<ListenerBox>?
    /// The address the kernel bound (the real port when 0 was asked for).
    public private(set) var boundAddress: SocketAddress
    private var pauseTimer: OpaquePointer?

    private func accepted(_ fd: Int32, _ peer: SocketAddress) { onAccept(fd, peer) }

    /// Called when accepting fails for want of descriptors (EMFILE, ENFILE); true when it freed
    /// some, so accepting goes on at once instead of pausing.
    public var onDescriptorsExhausted: (() -> Bool)?

    private func acceptFailed() {
        guard let l = listener else { return }
        let e = errno
        if e == EMFILE || e == ENFILE, onDescriptorsExhausted?() == true { return }
        evconnlistener_disable(l)
        let base = evconnlistener_get_base(l)
        if pauseTimer == nil {
            pauseTimer = event_new(base, -1, 0, { _, _, arg in
                let box = Unmanaged<ListenerBox>.fromOpaque(arg!).takeUnretainedValue()
                if let l = box.owner?.listener { evconnlistener_enable(l) }
            }, box!.toOpaque())
        }
        var tv = timeval(seconds: 0.1)
        event_add(pauseTimer, &tv)
    }

    /// Stops accepting and closes the socket; new connections are refused from now on.
    public func close() {
        if let t = pauseTimer { event_free(t); pauseTimer = nil }
        if let l = listener { evconnlistener_free(l); listener = nil }
        box?.takeUnretainedValue().owner = nil
        box?.release()
        box = nil
    }

    deinit { close() }
}

/// Indirection so the C callback never sees a half-initialised `Listener`.
private final class ListenerBox {
    weak var owner: Listener?
}
