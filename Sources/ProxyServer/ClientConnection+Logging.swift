import Statistics

/// What each request did, for the statistics and the access log: noted as it happens, written once
/// when the exchange ends (or the connection does).
extension ClientConnection {
    func beginLogging() {
        worker.stats.add(Count.request(request.method))
        requestStart = worker.loop.now
        logStatus = 0
        logBytes = 0
        logCache = "-"
        logged = false
    }

    func noteResponse(_ status: Int) {
        worker.stats.add(.response(status: status))
        logStatus = status
    }

    func noteBody(_ count: Int, fromCache: Bool) {
        worker.stats.add(fromCache ? .clientBytesFromCache : .clientBytesFromOrigin, count)
        logBytes += count
    }

    func noteLookup(_ result: Count) {
        worker.stats.add(result)
        switch result {
        case .lookupHit: logCache = "hit"
        case .lookupMiss: logCache = "miss"
        case .lookupRevalidatedUnchanged: logCache = "revalidated"
        case .lookupRevalidatedChanged: logCache = "changed"
        case .lookupStaleServed: logCache = "stale"
        case .lookupOnlyIfCachedMiss: logCache = "offline-miss"
        default: logCache = "pass"
        }
    }

    /// Writes the access log line of the current request, once.
    func logRequest() {
        guard !logged else { return }
        logged = true
        guard let buffer = worker.accessLog else { return }
        buffer.append(AccessLogBuffer.Entry(client: clientAddress, request: request, status: logStatus,
                                            bodyBytes: logBytes, cache: logCache,
                                            seconds: worker.loop.now - requestStart, time: currentTime()))
    }
}
