import Glibc

/// The process's limit on open descriptors (RLIMIT_NOFILE). Service managers start processes at a
/// soft limit of 1,024 (systemd's default) with a far higher hard one; a proxy holds two sockets per
/// client it forwards for, plus pooled origin connections, and runs out long before its
/// connection limits say it should.
public enum OpenFilesLimit {
    /// No more than this is asked for, whatever the hard limit (the kernel's usual `nr_open`).
    static let ceiling = 1 << 20

    /// The soft limit in force.
    public static var current: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1_024 }
        return limit.rlim_cur == rlim_t.max ? ceiling : Int(min(limit.rlim_cur, rlim_t(ceiling)))
    }

    /// Raises the soft limit to the hard limit (at most `ceiling`). What it was, what it is now,
    /// and the hard limit, for the start log.
    public static func raiseToHard() -> (before: Int, now: Int, hard: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (1_024, 1_024, 1_024) }
        let before = current
        let hard = limit.rlim_max == rlim_t.max ? ceiling : Int(min(limit.rlim_max, rlim_t(ceiling)))
        if hard > before {
            limit.rlim_cur = rlim_t(hard)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return (before, current, hard)
    }
}
