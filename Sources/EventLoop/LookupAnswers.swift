/// What one lookup's two queries (A and AAAA) add up to. Pure: the resolver feeds each family's
/// answer in as it comes and does what the verdict says.
public enum LookupAnswers {
    /// One family's answer.
    public enum Family: Sendable {
        /// Addresses (port 0) and the smallest TTL among their records.
        case addresses([SocketAddress], ttl: UInt32)
        /// The name exists without records of this family; the TTL is its SOA's (0 without one).
        case noData(ttl: UInt32)
        /// The name does not exist (NXDOMAIN), whatever the family.
        case nxdomain(ttl: UInt32)
        /// No name server answered within the timeout and attempts (or they failed the server way).
        case timedOut
        /// Any other failure, with the name server's reason.
        case failed(String)
    }

    public enum Verdict: Sendable {
        /// The other family may still bring an answer that decides.
        case waitForOther
        /// Addresses are in: the other family gets a short grace, then what is here is used.
        case waitBrieflyForOther
        /// IPv4 first (loopback origins in tests and most servers listen there), then IPv6.
        case addresses([SocketAddress], ttl: UInt32)
        case notFound(String, soaTTL: UInt32)
        case timedOut
        case failed(String)
    }

    /// - Parameter graceOver: the grace for the missing family has passed.
    public static func verdict(v4: Family?, v6: Family?, graceOver: Bool = false) -> Verdict {
        // NXDOMAIN is about the name, not a family: the other answer cannot change it.
        if case .nxdomain(let ttl)? = v4 { return .notFound("no such name (NXDOMAIN)", soaTTL: ttl) }
        if case .nxdomain(let ttl)? = v6 { return .notFound("no such name (NXDOMAIN)", soaTTL: ttl) }
        var found: [SocketAddress] = []
        var ttl = UInt32.max
        for case .addresses(let list, let t)? in [v4, v6] {
            found += list
            ttl = min(ttl, t)
        }
        guard let v4, let v6 else {
            return !found.isEmpty && graceOver ? .addresses(found, ttl: ttl)
                : !found.isEmpty ? .waitBrieflyForOther : .waitForOther
        }
        if !found.isEmpty { return .addresses(found, ttl: ttl) }
        switch (v4, v6) {
        case (.noData(let a), .noData(let b)):
            return .notFound("the name has no address records", soaTTL: min(a, b))
        case (.timedOut, _), (_, .timedOut):
            return .timedOut
        case (.failed(let reason), _), (_, .failed(let reason)):
            return .failed(reason)
        default:
            return .failed("no address")
        }
    }
}
