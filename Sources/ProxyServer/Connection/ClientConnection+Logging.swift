import Statistics

/// What each request did, for the statistics and the access log: noted as it happens, written once
/// when the exchange ends (or the connection does).
extension ClientConnection {
    func noteResponse(_ status: Int) {
        worker.stats.add(.response(status: status))
        context.log.status = status
    }

    func noteBody(_ count: Int, fromCache: Bool) {
        worker.stats.add(fromCache ? .clientBytesFromCache : .clientBytesFromOrigin, count)
        context.log.bytes += count
    }

    func noteLookup(_ result: Count) {
        worker.stats.add(result)
        context.log.cache = RequestLog.cacheWord(for: result)
    }

    /// Writes the access log line of the current request, once. The duration comes from the
    /// worker's monotonic clock, to the microsecond.
    func logRequest() {
        guard !context.log.written else { return }
        context.log.written = true
        guard let buffer = worker.accessLog else { return }
        let clock = worker.clock
        buffer.append(AccessLogBuffer.Entry(client: clientAddress, request: request, status: context.log.status,
                                            bodyBytes: context.log.bytes, bytesFromClient: context.log.bytesFromClient,
                                            cache: context.log.cache, seconds: clock.monotonic - context.log.start,
                                            time: clock.wallSeconds))
    }
}
