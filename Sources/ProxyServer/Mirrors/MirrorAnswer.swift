import CachePolicy
import EventLoop
import HTTPWire
import Registries

/// How the responder answers a mirror's request when the answer cannot go out as it comes: an
/// index document is held until whole, rewritten and sent with its own length and validator; a
/// redirect's `Location` is mapped back onto the mirror; a file younger than `min_release_age`
/// is refused. Whatever the upstream sent is stored as it was sent: only what this client gets changes.
extension ClientConnection {
    /// Called with every final head of a mirror's request: true when the mirror holds the answer back.
    func mirrorHolds(_ m: MirrorExchange, _ head: ResponseHead, storedAge: Int64?, cacheStatus: @autoclosure () -> CacheStatusField,
                     sharedWithout: [[UInt8]]?) -> Bool {
        let status = head.status
        if case .ageCheckedFile = m.plan, status == 200 || status == 206,
           let refusal = MirrorRelease.refusal(head, config: m.config, now: worker.clock.wallSeconds) {
            let path = String(decoding: m.match.relativePath, as: UTF8.self)
            worker.logger.notice("\(m.config.name) mirror refused \(path) to \(peer): \(refusal)")
            m.answer = .refusing(status: 403, reason: refusal)
        } else if status == 200, request.method == .get, m.plan.holdsWholeAnswer {
            m.answer = .holding(.init(head: head, storedAge: storedAge, cacheStatus: cacheStatus(), sharedWithout: sharedWithout))
        } else if m.match.rewritesURLs, (300...399).contains(status), head.headers.firstIndex(of: "location") != nil {
            m.answer = .holding(.init(head: head, storedAge: storedAge, cacheStatus: cacheStatus(), sharedWithout: sharedWithout))
        } else {
            return false
        }
        context.answer.framing = .contentLength
        context.answer.started = true
        return true
    }

    /// Body bytes of a held answer: kept (a document) or dropped (a refusal, a redirect's body).
    func mirrorTakes(_ m: MirrorExchange, _ bytes: UnsafeRawBufferPointer) {
        guard case .holding(var held) = m.answer, m.plan.holdsWholeAnswer, held.head.status == 200 else { return }
        if held.body.count + bytes.count > MirrorExchange.maxDocumentBytes {
            worker.logger.warning("\(m.config.name) mirror: a document over \(MirrorExchange.maxDocumentBytes) bytes is not rewritten; refused to \(peer)")
            m.releaseHeld()
            m.answer = .refusing(status: 502, reason: "the registry's document is too large for this mirror to rewrite")
            return
        }
        guard m.reserve(bytes.count) else {
            worker.logger.warning("\(m.config.name) mirror: \(worker.mirrorState.held.limit) bytes of documents are held for rewriting already; 503 to \(peer)")
            m.releaseHeld()
            m.answer = .refusing(status: 503, reason: "too many registry documents are being rewritten at once; try again")
            return
        }
        m.answer = .passing  // the held body is moved, not copied
        held.body.append(contentsOf: bytes)
        m.answer = .holding(held)
    }

    /// The held answer is whole: written now.
    func finishMirrorAnswer(_ m: MirrorExchange) {
        let answer = m.answer
        m.answer = .passing
        defer { m.releaseHeld() }
        switch answer {
        case .passing:
            send(.answered)
        case .refusing(let status, let reason):
            context.answer.log.bytes = 0
            answerError(status, reason)
        case .holding(let held):
            if let (status, reason) = writeMirrorAnswer(m, held) {
                context.answer.log.bytes = 0
                return answerError(status, reason)
            }
            send(.answered)
        }
    }

    /// The held answer broke off before it was whole: the client gets an error, never a part.
    func cutMirrorAnswer(_ m: MirrorExchange) {
        let answer = m.answer
        m.answer = .passing
        m.releaseHeld()
        context.answer.log.bytes = 0
        switch answer {
        case .passing: send(.cut)
        case .refusing(let status, let reason): answerError(status, reason)
        case .holding: answerError(502, "the registry's answer broke off")
        }
    }

    /// Writes the held answer, or says which error to answer instead.
    private func writeMirrorAnswer(_ m: MirrorExchange, _ held: MirrorExchange.Held) -> (Int, String)? {
        var body: [UInt8] = []
        var replace: [(name: StaticString, value: [UInt8])] = []
        var drop: [StaticString] = ["content-length", "transfer-encoding"]
        if held.head.status == 200, case .aptRelease(let suite) = m.plan {
            noteRelease(held.body, of: suite, mirror: m)
            body = held.body
        } else if held.head.status == 200, case .document(let document) = m.plan {
            switch MirrorDocuments.rewrite(held.body, document: document, head: held.head, exchange: m,
                                           now: worker.clock.wallSeconds) {
            case .rewritten(let rewritten):
                body = rewritten.body
                if let note = rewritten.note { worker.logger.info("\(m.config.name) mirror: \(note)") }
                if let type = rewritten.contentType { drop.append("content-type"); replace.append(("Content-Type", type)) }
            case .failed(let reason):
                worker.logger.warning("\(m.config.name) mirror: \(reason) (\(context.upstreamName))")
                return (502, "the registry's index could not be read: \(reason)")
            }
            // The document is this mirror's: so is its validator. The upstream's would let a client
            // keep a rewrite made for another time (an age that has since passed).
            let tag = MirrorDocuments.entityTag(body)
            drop += ["etag", "last-modified", "content-md5", "digest", "repr-digest", "content-digest"]
            replace.append(("ETag", tag))
            if let wanted = m.clientValidators, MirrorDocuments.matches(wanted, tag) {
                return writeMirrorHead(held, status: 304, drop: drop + ["content-type"], add: replace, bodyLength: nil, body: [])
            }
        } else if let location = held.head.headers.firstIndex(of: "location") {
            let value = held.head.headers.withBytes(held.head.headers.fields[location].value) { Array($0) }
            drop.append("location")
            replace.append(("Location", MirrorDocuments.mapLocation(value, exchange: m)))
        }
        return writeMirrorHead(held, status: held.head.status, drop: drop, add: replace, bodyLength: body.count, body: body)
    }

    /// A suite's release file went by: remembered, and the stored indexes it changed are dropped.
    private func noteRelease(_ body: [UInt8], of suite: AptSuiteLocation, mirror m: MirrorExchange) {
        let release: AptRelease
        do throws(AptReleaseError) {
            release = try AptRelease(text: body)
        } catch {
            return worker.logger.warning("\(m.config.name) mirror: \(suite.url) has a release file that does not read: \(error)")
        }
        let changed = worker.mirrorState.aptSuites.record(release, suiteURL: suite.url, now: worker.clock.wallSeconds)
        guard !changed.isEmpty else { return }
        let host = Array(suite.upstream.host.utf8)
        for path in changed {
            let key = Array((suite.path + path).utf8).withUnsafeBytes {
                CacheKey.primary(scheme: suite.upstream.scheme, host: host, port: suite.upstream.port, pathAndQuery: $0)
            }
            _ = worker.cache.invalidate(primaryKey: key)
        }
        worker.logger.info("\(m.config.name) mirror: a new release of \(suite.url); \(changed.count) stored index file(s) of it dropped")
    }

    private func writeMirrorHead(_ held: MirrorExchange.Held, status: Int, drop: [StaticString],
                                 add: [(name: StaticString, value: [UInt8])], bodyLength: Int?, body: [UInt8]) -> (Int, String)? {
        var fields = add
        if let length = bodyLength { fields.append(("Content-Length", Array(String(length).utf8))) }
        var dropped = drop
        // A stored answer's age is the cache's to say; a relayed one keeps the upstream's.
        if let age = held.storedAge {
            dropped.append("age")
            fields.append(("Age", Array(String(age).utf8)))
        }
        guard let head = MirrorDocuments.head(from: held.head, status: status, dropping: dropped, adding: fields) else {
            return (502, "the registry's answer could not be rewritten")
        }
        let keepAlive = answerKeepsAlive(closeDelimited: false)
        noteResponse(status)
        context.answer.log.bytes = body.count
        writer.reset()
        ResponseHeadWriter.write(head, framing: bodyLength == nil ? .none : .contentLength, keepAlive: keepAlive,
                                 clientVersion: request.version, viaName: worker.settings.viaName, upgrade: false,
                                 cacheStatus: held.cacheStatus, sharedWithout: held.sharedWithout, into: &writer)
        writer.withBytes { stream.output.append($0) }
        if !body.isEmpty { body.withUnsafeBytes { stream.output.append($0) } }
        return nil
    }
}
