import Glibc
import HTTPWire
import Locking

/// A forward proxy to warm through: where it listens and, when it asks for them, the credentials.
public struct WarmProxy: Sendable, Equatable {
    public let host: String
    public let port: UInt16
    /// A `Proxy-Authorization` value sent with every request, if any.
    public let authorization: String?

    public init(host: String, port: UInt16, authorization: String? = nil) {
        self.host = host; self.port = port; self.authorization = authorization
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The sockets a warm job has open, so cancelling it can wake every blocked read at once. A
/// socket is closed only under the lock that cancelling shuts sockets down under, so a number
/// the process has already reused is never touched.
final class OpenSockets: Sendable {
    private struct State {
        var open: Set<Int32> = []
        var cancelled = false
    }
    private let state = Locked(State())

    /// Registers `fd`; false (and `fd` closed) once cancelled.
    func add(_ fd: Int32) -> Bool {
        state.withLock { s in
            if s.cancelled {
                Glibc.close(fd)
                return false
            }
            s.open.insert(fd)
            return true
        }
    }

    func close(_ fd: Int32) {
        state.withLock { s in
            if s.open.remove(fd) != nil { Glibc.close(fd) }
        }
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    func cancelAll() {
        state.withLock { s in
            s.cancelled = true
            for fd in s.open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }
}

/// One keep-alive connection to the proxy, used by one thread: asks for a URL, reads the whole
/// answer (so the proxy stores it) and throws the body away, keeping only its length and, for an
/// error, its first line. Blocking sockets with a timeout on every send and receive.
final class WarmConnection {
    let proxy: WarmProxy
    /// Longest silence from the proxy, seconds.
    let timeout: Double
    let cacheName: String?
    private let sockets: OpenSockets
    private var fd: Int32 = -1
    /// Bytes received and not consumed yet.
    private var input: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: 64 * 1_024)
    /// A head larger than this is refused (Larder's own response head limit is 64 KiB).
    static let maxHeadBytes = 128 * 1_024

    init(proxy: WarmProxy, timeout: Double, cacheName: String?, sockets: OpenSockets) {
        self.proxy = proxy; self.timeout = timeout; self.cacheName = cacheName; self.sockets = sockets
    }

    deinit { disconnect() }

    private struct Failure: Error {
        let reason: String
        /// Nothing of an answer arrived on a reused connection: the proxy may have closed it as idle.
        var retryable = false
    }

    /// Fetches `url` through the proxy; the outcome and the body bytes read.
    func fetch(_ url: WarmURL) -> (outcome: WarmOutcome, bytes: Int) {
        var attempt = 0
        while true {
            attempt += 1
            let reused = fd >= 0
            do throws(Failure) {
                return try exchange(url, reused: reused)
            } catch {
                disconnect()
                if sockets.isCancelled { return (.failed("cancelled"), 0) }
                if error.retryable && reused && attempt == 1 { continue }
                return (.failed(error.reason), 0)
            }
        }
    }

    private func exchange(_ url: WarmURL, reused: Bool) throws(Failure) -> (outcome: WarmOutcome, bytes: Int) {
        if fd < 0 { try connect() }
        var request = "GET \(url.text) HTTP/1.1\r\nHost: \(url.host)\r\nAccept: */*\r\nUser-Agent: larder-warm\r\n"
        if let auth = proxy.authorization { request += "Proxy-Authorization: \(auth)\r\n" }
        request += "\r\n"
        try send(Array(request.utf8), retryable: reused)
        var head = ResponseHead()
        repeat {
            head = try readHead(retryable: reused && input.isEmpty)
        } while head.isInformational
        let errorBody = head.status >= 400
        var firstBytes: [UInt8] = []
        let bytes = try readBody(head.framing) { chunk in
            if errorBody, firstBytes.count < 200 { firstBytes.append(contentsOf: chunk.prefix(200 - firstBytes.count)) }
        }
        if !head.keepAlive || head.framing == .untilClose { disconnect() }
        let reason = String(decoding: head.headers.withBytes(head.reason) { Array($0) }, as: UTF8.self)
        let errorText = String(decoding: firstBytes.prefix { $0 != 0x0A && $0 != 0x0D }.map { $0 >= 0x20 && $0 < 0x7F ? $0 : 0x3F },
                               as: UTF8.self)
        let outcome = WarmOutcome.classify(status: head.status, reason: reason, cacheStatus: head.headers.value(of: "cache-status"),
                                           cacheName: cacheName, errorText: errorText)
        return (outcome, bytes)
    }

    private func connect() throws(Failure) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var found: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(proxy.host, String(proxy.port), &hints, &found)
        guard rc == 0, let first = found else {
            throw Failure(reason: "cannot resolve the proxy \(proxy.description): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(found) }
        var lastError: Int32 = 0
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let a = entry {
            entry = a.pointee.ai_next
            let s = socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            if s < 0 { lastError = errno; continue }
            guard sockets.add(s) else { throw Failure(reason: "cancelled") }
            var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
            setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            var one: Int32 = 1
            setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(s, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 {
                fd = s
                input.removeAll(keepingCapacity: true)
                return
            }
            lastError = errno
            sockets.close(s)
        }
        throw Failure(reason: "cannot connect to the proxy \(proxy.description): \(String(cString: strerror(lastError)))")
    }

    private func disconnect() {
        if fd >= 0 { sockets.close(fd) }
        fd = -1
        input.removeAll(keepingCapacity: true)
    }

    private func send(_ bytes: [UInt8], retryable: Bool) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw Failure(reason: "sending to the proxy: \(String(cString: strerror(errno)))", retryable: retryable)
            }
            offset += n
        }
    }

    /// Reads more into `input`; false at the end of the stream.
    private func receive() throws(Failure) -> Bool {
        while true {
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                input.append(contentsOf: scratch[0..<n])
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                throw Failure(reason: "no answer from the proxy for \(WarmFormat.duration(timeout))")
            }
            throw Failure(reason: "reading from the proxy: \(String(cString: strerror(errno)))")
        }
    }

    private func readHead(retryable: Bool) throws(Failure) -> ResponseHead {
        var head = ResponseHead()
        while true {
            let result = input.withUnsafeBytes { raw -> Result<Int?, HTTPWireError> in
                do throws(HTTPWireError) {
                    return .success(try ResponseParser.parse(raw, into: &head, requestMethod: .get,
                                                             limits: HeadLimits(maxHeadBytes: Self.maxHeadBytes, maxHeaderCount: 500)))
                } catch {
                    return .failure(error)
                }
            }
            let parsed: Int?
            switch result {
            case .success(let p): parsed = p
            case .failure(let error): throw Failure(reason: "invalid answer from the proxy: \(error.reason)")
            }
            if let length = parsed {
                input.removeFirst(length)
                return head
            }
            let empty = input.isEmpty
            guard try receive() else {
                throw Failure(reason: empty ? "the proxy closed the connection without answering"
                                  : "the proxy closed the connection in the middle of the head", retryable: retryable && empty)
            }
        }
    }

    /// Reads the body as `framing` says, passing each piece to `sample`; returns its length.
    private func readBody(_ framing: BodyFraming, sample: (ArraySlice<UInt8>) -> Void) throws(Failure) -> Int {
        var total = 0
        switch framing {
        case .none:
            return 0
        case .contentLength(let length):
            while total < length {
                if input.isEmpty {
                    guard try receive() else { throw Failure(reason: "the answer was cut short after \(total) of \(length) bytes") }
                }
                let take = min(input.count, length - total)
                sample(input[0..<take])
                input.removeFirst(take)
                total += take
            }
            return total
        case .untilClose:
            while true {
                if !input.isEmpty {
                    sample(input[...])
                    total += input.count
                    input.removeAll(keepingCapacity: true)
                }
                guard try receive() else { return total }
            }
        case .chunked:
            var decoder = ChunkedDecoder()
            while true {
                let result = input.withUnsafeBytes { raw -> Result<ChunkedDecoder.Step, HTTPWireError> in
                    do throws(HTTPWireError) {
                        return .success(try decoder.step(raw))
                    } catch {
                        return .failure(error)
                    }
                }
                let step: ChunkedDecoder.Step
                switch result {
                case .success(let s): step = s
                case .failure(let error): throw Failure(reason: "invalid chunked body from the proxy: \(error.reason)")
                }
                switch step {
                case .needMore:
                    guard try receive() else { throw Failure(reason: "the answer was cut short after \(total) bytes") }
                case .framing(let consumed):
                    input.removeFirst(consumed)
                case .data(let count):
                    sample(input[0..<count])
                    input.removeFirst(count)
                    total += count
                case .done(let consumed):
                    input.removeFirst(consumed)
                    return total
                }
            }
        }
    }
}
