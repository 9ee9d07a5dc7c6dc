import Glibc

/// The socket options the stream transports set, and the one kernel query the plain transport's
/// write timeout makes. The setters skip a socket not made yet (-1) and ignore refusals (a Unix
/// socket has no TCP options).
enum SocketOptions {
    /// TCP urgent data read as ordinary bytes (SO_OOBINLINE). Otherwise the kernel takes the urgent
    /// byte out of the stream and `recv` stops short in front of it: bytes an origin sends behind a
    /// complete response could hide from the unread-bytes check that decides whether its connection
    /// is reused, and a tunnel would lose the byte. Inline, the byte is there for the check to see.
    static func keepUrgentDataInline(_ fd: Int32) {
        guard fd >= 0 else { return }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    static func setNoDelay(_ fd: Int32) {
        guard fd >= 0 else { return }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// `Stream.unsentLimit` on a plain stream's socket; 0 puts back the system's default
    /// (`net.ipv4.tcp_notsent_lowat`, no limit unless changed) for a socket handed on to OpenSSL,
    /// whose streams time out writes without `unacknowledgedBytes`.
    static func limitUnsent(_ fd: Int32, to limit: Int32) {
        guard fd >= 0 else { return }
        var value = limit
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NOTSENT_LOWAT, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bytes written to `fd` that the peer has not acknowledged yet, sent or not (SIOCOUTQ); nil
    /// when the kernel does not say.
    static func unacknowledgedBytes(_ fd: Int32) -> Int? {
        var queued: Int32 = 0
        return ioctl(fd, UInt(TIOCOUTQ), &queued) == 0 ? Int(queued) : nil
    }
}
