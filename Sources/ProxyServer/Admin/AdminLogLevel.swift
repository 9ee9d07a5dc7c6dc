import HTTPWire
import Logging

/// The level of an admin request's log line. Dashboards, Prometheus and health checks read the
/// endpoint every few seconds: their answered reads are debug, so they do not bury what matters
/// at info. What changes something (a purge, a reload, a warm job), what is refused, and what
/// fails stays visible.
enum AdminLogLevel {
    static func of(method: HTTPMethod, path: String, status: Int) -> Logger.Level {
        let read = method == .get || method == .head
        // "Not ready" is a probe's expected answer while starting or draining, polled like the rest.
        if read, path == "/readyz", status == 503 { return .debug }
        if status >= 500 { return .error }
        if read, status < 400 { return .debug }
        return .info
    }
}
