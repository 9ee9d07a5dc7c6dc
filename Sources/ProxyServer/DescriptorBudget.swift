/// How the process's descriptors are shared out, from the open-files limit (pure). Every client
/// connection Larder forwards for may hold an origin connection too (or a tunnel's), and idle
/// pooled origin connections stay open between requests: unbounded, a few hundred hosts visited
/// by one client left no descriptor for the next client at the default limit of 1,024, and
/// accepting stalled while cache hits waited. So the limits Larder enforces never add up to more
/// than the limit allows.
public struct DescriptorBudget: Sendable, Equatable {
    /// The soft limit of open descriptors in force.
    public let limit: Int
    public let workers: Int

    public init(limit: Int, workers: Int) {
        self.limit = limit
        self.workers = max(1, workers)
    }

    /// Listeners, the event loops' own descriptors, name servers, LMDB, logs, the admin endpoint.
    public var reserved: Int { 64 + 16 * workers }

    public var usable: Int { max(0, limit - reserved) }

    /// Pipes that spliced tunnels may hold (two descriptors each): a sixteenth of what is usable,
    /// at most the 512 that bulk tunnels need.
    public var pipes: Int { min(512, usable / 16) }

    /// What is left for sockets.
    private var sockets: Int { usable - 2 * pipes }

    /// Idle pooled origin connections, all workers together: a quarter of the sockets.
    public var idleOriginConnections: Int { max(workers, sockets / 4) }

    /// Client connections: the rest, two descriptors each (the client's and an origin's).
    public var clientConnections: Int { max(workers, (sockets - idleOriginConnections) / 2) }

    /// `limits.max_connections` as the budget allows it.
    public func maxConnections(configured: Int) -> Int { min(configured, clientConnections) }
}
