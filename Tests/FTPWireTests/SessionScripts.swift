import Testing
import FTPWire

/// One event of a script and the actions the session must answer it with, each written as
/// `describe(_:)` writes it.
struct ScriptStep: Sendable {
    var event: FTPEvent
    var actions: [String]
}

/// A whole exchange, played against a fresh session.
struct SessionScript: Sendable, CustomTestStringConvertible {
    var name: String
    var request: FTPRequest
    var controlIPv4: UInt32? = controlAddress
    var listingLimits = FTPListingLimits()
    var steps: [ScriptStep]
    var testDescription: String { name }
}

/// An action as a line of a script: commands as sent (without CRLF), answers as
/// `answer <status> {<fields>} <body>`. Content-Type and Content-Length of text bodies are left
/// out (`checkInvariants` checks them); a text body is written out, an HTML body as `html`.
func describe(_ action: FTPAction) -> String {
    switch action {
    case .send(let line): return "send " + text(Array(line.dropLast(2)))
    case .openData(let port): return "openData \(port)"
    case .closeData: return "closeData"
    case .streamData: return "streamData"
    case .collectListing: return "collectListing"
    case .done(let reusable): return reusable ? "done reusable" : "done not reusable"
    case .close: return "close"
    case .answer(let answer):
        let isText = answer.value(of: "Content-Type") == "text/plain; charset=utf-8"
        let fields = answer.fields.filter { field in
            !(isText && (field.name == "Content-Type" || field.name == "Content-Length"))
                && !(answer.value(of: "Content-Type") == "text/html; charset=utf-8" && field.name == "Content-Length")
        }
        let fieldText = fields.map { "\($0.name): \($0.value)" }.joined(separator: ", ")
        let body: String
        switch answer.body {
        case .none: body = "none"
        case .stream(let length): body = "stream(\(length.map(String.init) ?? "?"))"
        case .bytes(let bytes): body = isText ? text(bytes).debugDescription : "html"
        }
        return "answer \(answer.status.code) {\(fieldText)} \(body)"
    }
}

/// Checks every script must pass whatever its steps: one answer at most, `done`/`close` last
/// and final, text and HTML bodies with a matching Content-Length, HEAD answers without a body.
func checkInvariants(_ all: [[FTPAction]], request: FTPRequest, script: String) {
    let flat = all.flatMap { $0 }
    let answers = flat.compactMap { action -> FTPAnswer? in
        if case .answer(let answer) = action { return answer }
        return nil
    }
    #expect(answers.count <= 1, "\(script): more than one answer")
    for answer in answers {
        if answer.status.code != 304 { #expect(answer.value(of: "Content-Type") != nil, "\(script): no Content-Type") }
        if case .bytes(let body) = answer.body {
            #expect(answer.value(of: "Content-Length") == "\(body.count)", "\(script): Content-Length")
        }
        if request.method == .head { #expect(answer.body == .none, "\(script): HEAD with a body") }
    }
    if let end = flat.firstIndex(where: { $0 == .close || $0 == .done(reusable: true) || $0 == .done(reusable: false) }) {
        #expect(end == flat.count - 1, "\(script): actions after the end")
    }
}

/// Short ways to write script steps.
enum Script {
    static func reply(_ code: Int, _ text: String, _ actions: [String]) -> ScriptStep {
        ScriptStep(event: .reply(FTPReply(code, text)), actions: actions)
    }

    static func event(_ event: FTPEvent, _ actions: [String]) -> ScriptStep {
        ScriptStep(event: event, actions: actions)
    }

    /// Greeting, anonymous USER and PASS, TYPE I: a fresh connection up to its first own command.
    static func anonymousLogin(then first: String) -> [ScriptStep] {
        [
            event(.connected, []),
            reply(220, "FTP server ready", ["send USER anonymous"]),
            reply(331, "Please specify the password.", ["send PASS larder@"]),
            reply(230, "Login successful.", ["send TYPE I"]),
            reply(200, "Switching to Binary mode.", [first]),
        ]
    }

    static func get(_ target: String, range: FTPByteRange? = nil, reused: Bool = false,
                    login: FTPCredentials = .anonymous, ifModifiedSince: Int64? = nil) -> FTPRequest {
        var request = FTPRequest(method: .get, url: url(target), credentials: login, range: range,
                                 isReusedConnection: reused, now: listingNow)
        request.ifModifiedSince = ifModifiedSince
        return request
    }

    static func head(_ target: String, reused: Bool = false, ifModifiedSince: Int64? = nil) -> FTPRequest {
        var request = FTPRequest(method: .head, url: url(target), credentials: .anonymous, isReusedConnection: reused)
        request.ifModifiedSince = ifModifiedSince
        return request
    }
}
