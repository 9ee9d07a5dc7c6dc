import CachePolicy
import CacheStore
import HTTPWire

/// `PURGE <absolute URL>` on the proxy port, as Squid and Varnish users expect: removes every
/// stored variant of the URL. Only from `purge_allowed_from` addresses.
enum Purge {
    static func isPurge(_ request: RequestHead) -> Bool {
        request.method == .other
            && request.headers.withBytes(request.methodRange) { $0.count == 5 && equalsIgnoringCase($0, 0, 5, "PURGE") }
    }

    /// The first time through, the removal is queued and the request waits (`checkPending`) for
    /// the writer to commit it, with the worker serving everyone else meanwhile; routed again
    /// once it is known (`RequestContext.purge`), the answer says what happened.
    static func handle(_ target: RequestTarget, on c: ClientConnection) {
        let worker = c.worker
        if let purge = c.context.purge, let result = purge.result {
            return answer(result, url: purge.url, variants: purge.variants, on: c)
        }
        c.noteLookup(.lookupPass)
        let from = c.peerAddress
        guard worker.settings.purgeAllowedFrom.contains(where: { $0.contains(from) }) else {
            worker.logger.notice("403 PURGE from \(c.peer): not in purge_allowed_from")
            return c.answerError(403, "PURGE is not allowed from \(c.peer.host)")
        }
        guard target.form == .absolute else {
            return c.answerError(400, "PURGE needs an absolute URL, e.g. PURGE http://example.com/path HTTP/1.1")
        }
        let request = c.request
        let key = request.headers.withBytes(request.target) { raw in
            let path = UnsafeRawBufferPointer(rebasing: raw[target.pathRange(targetLength: raw.count)])
            return CacheKey.primary(scheme: target.scheme, host: Array(target.hostString.utf8), port: target.port,
                                    pathAndQuery: path)
        }
        let url = String(decoding: key, as: UTF8.self)
        let variants = worker.cacheReader.variants(primaryKey: key).count
        c.context.purge = RequestContext.PendingPurge(url: url, variants: variants)
        let outcome = worker.cache.invalidate(primaryKey: key)
        worker.inFlight.forget(key)
        _ = RemovalWait(outcome, loop: worker.loop) { [weak c] result in
            guard let c, c.context.purge != nil else { return }
            c.context.purge?.result = result
            c.checkFinished(nil)
        }
        c.send(.checkPending)
    }

    /// Never "purged" for a removal that did not happen.
    private static func answer(_ result: RemovalOutcome.Result, url: String, variants: Int, on c: ClientConnection) {
        let worker = c.worker
        switch result {
        case .committed:
            break
        case .failed:
            worker.logger.error("PURGE \(url) from \(c.peer) failed: the cache could not remove it")
            return c.answerError(500, "the cache could not remove \(url); see the log")
        case .timedOut:
            worker.logger.error("PURGE \(url) from \(c.peer): removal not confirmed within \(Cache.purgeConfirmSeconds) s")
            return c.answerError(503, "the cache did not confirm removing \(url) in time; it may still happen")
        }
        worker.logger.info("PURGE \(url) from \(c.peer): \(variants) variant(s)")
        // Squid's convention: 404 when nothing was stored, so scripts can tell.
        if variants == 0 {
            c.answerError(404, "\(url) was not in the cache")
        } else {
            c.answerError(200, "purged \(url) (\(variants) variant\(variants == 1 ? "" : "s"))")
        }
    }
}
