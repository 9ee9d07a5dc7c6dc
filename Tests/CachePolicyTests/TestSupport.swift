import Testing
import HTTPWire
import CachePolicy

// Inputs are raw heads written as Swift strings with explicit "\r\n", parsed by HTTPWire's own
// parsers; the clock is a number stepped by hand.

/// The fixed "now" most rows start from: Tue, 14 Nov 2023 22:13:20 GMT.
let t0: Int64 = 1_700_000_000

/// Dates around `t0`, spelled out so tests never depend on `HTTPDate.format`.
enum Dates {
    static let t0 = "Tue, 14 Nov 2023 22:13:20 GMT"
    static let minus5 = "Tue, 14 Nov 2023 22:13:15 GMT"
    static let minus30 = "Tue, 14 Nov 2023 22:12:50 GMT"
    static let minus60 = "Tue, 14 Nov 2023 22:12:20 GMT"
    static let minus1000 = "Tue, 14 Nov 2023 21:56:40 GMT"
    static let minus10Days = "Sat, 04 Nov 2023 22:13:20 GMT"
    static let minus30Days = "Sun, 15 Oct 2023 22:13:20 GMT"
    static let plus30 = "Tue, 14 Nov 2023 22:13:50 GMT"
    static let plus60 = "Tue, 14 Nov 2023 22:14:20 GMT"
    static let plus100 = "Tue, 14 Nov 2023 22:15:00 GMT"
    static let plus1000 = "Tue, 14 Nov 2023 22:30:00 GMT"
    static let plus3600 = "Tue, 14 Nov 2023 23:13:20 GMT"
    static let plus1Day = "Wed, 15 Nov 2023 22:13:20 GMT"
}

func wire(_ text: String) -> [UInt8] { Array(text.utf8) }

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// Bytes shown with control bytes escaped, for comparing keys.
func escaped(_ bytes: [UInt8]) -> String {
    bytes.map { $0 < 0x20 ? "\\\($0)" : String(UnicodeScalar($0)) }.joined()
}

/// Parses a raw request head; a head that does not parse fails the test that uses it.
func parseRequest(_ raw: String, sourceLocation: SourceLocation = #_sourceLocation) -> RequestHead {
    var head = RequestHead()
    let bytes = wire(raw)
    let result: Result<Int?, HTTPWireError> = bytes.withUnsafeBytes { buffer in
        do throws(HTTPWireError) {
            return .success(try RequestParser.parse(buffer, into: &head, limits: HeadLimits()))
        } catch {
            return .failure(error)
        }
    }
    #expect(result == .success(bytes.count), "request head did not parse: \(raw.debugDescription)",
            sourceLocation: sourceLocation)
    return head
}

/// Parses a raw response head (answer to `method`).
func parseResponse(_ raw: String, method: HTTPMethod = .get, sourceLocation: SourceLocation = #_sourceLocation) -> ResponseHead {
    var head = ResponseHead()
    let bytes = wire(raw)
    let result: Result<Int?, HTTPWireError> = bytes.withUnsafeBytes { buffer in
        do throws(HTTPWireError) {
            return .success(try ResponseParser.parse(buffer, into: &head, requestMethod: method, limits: HeadLimits()))
        } catch {
            return .failure(error)
        }
    }
    #expect(result == .success(bytes.count), "response head did not parse: \(raw.debugDescription)",
            sourceLocation: sourceLocation)
    return head
}

/// A request head from its method, target and field lines (Host is added).
func request(_ fields: [String] = [], method: String = "GET", target: String = "/") -> RequestHead {
    parseRequest("\(method) \(target) HTTP/1.1\r\nHost: example.com\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n")
}

/// A response head from its status and field lines.
func response(_ fields: [String] = [], status: Int = 200, method: HTTPMethod = .get) -> ResponseHead {
    parseResponse("HTTP/1.1 \(status) Reason\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n", method: method)
}

/// Entry facts of a response that arrived at `responseTime` for a request sent at `requestTime`.
func entry(_ fields: [String], status: Int = 200, requestTime: Int64 = t0, responseTime: Int64 = t0,
           bodyLength: Int? = nil, settings: PolicySettings = PolicySettings(),
           override: FreshnessOverride? = nil) -> EntryFacts {
    EntryFacts.make(response: response(fields, status: status), requestTime: requestTime, responseTime: responseTime,
                    bodyLength: bodyLength, settings: settings, override: override)
}

/// Runs `body` with the bytes of `text`.
func withBytes<R>(_ text: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
    wire(text).withUnsafeBytes(body)
}
