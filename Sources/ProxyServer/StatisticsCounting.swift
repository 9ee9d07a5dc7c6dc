import HTTPWire
import SessionClient
import Statistics

extension TopHosts {
    /// A request to `origin` (host and port).
    @inline(__always)
    func count(_ origin: OriginKey) { count(origin.host, port: origin.port) }
}

/// How the proxy's events map onto the statistics table's counters.
extension Count {
    static func request(_ method: HTTPMethod) -> Count {
        switch method {
        case .get: return .requestGET
        case .head: return .requestHEAD
        case .post: return .requestPOST
        case .put: return .requestPUT
        case .delete: return .requestDELETE
        case .patch: return .requestPATCH
        case .options: return .requestOPTIONS
        case .connect: return .requestCONNECT
        case .trace, .other: return .requestOther
        }
    }

    static func originError(_ error: SessionError) -> Count {
        switch error {
        case .dnsFailure, .dnsTimeout, .dnsBusy: return .originErrorDNS
        case .connectionRefused: return .originErrorRefused
        case .connectFailed, .cancelled, .parentRefused: return .originErrorConnect
        case .connectTimeout, .requestTimeout, .resourceTimeout: return .originErrorTimeout
        case .tlsFailure: return .originErrorTLS
        case .invalidResponse, .responseHeadTooLarge, .parentSentEarlyBytes: return .originErrorInvalidResponse
        case .prematureClose: return .originErrorPrematureClose
        case .destinationDenied: return .deniedDestination
        case .offline: return .offlineRefusals
        }
    }
}
