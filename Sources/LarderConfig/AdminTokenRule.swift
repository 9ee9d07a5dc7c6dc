/// What `admin_token` must be when the admin endpoint listens off loopback, where anyone who can
/// reach the port may try it: at least `minimumLength` characters, and not a placeholder copied
/// from an example file (`change-me`). On loopback the token is optional, so any token will do.
public enum AdminTokenRule {
    public static let minimumLength = 16

    /// Words example files and tutorials use where a secret goes; compared without case.
    static let placeholders: Set<String> = [
        "change-me", "changeme", "change_me", "change-this", "changeit", "replace-me", "replaceme",
        "secret", "password", "token", "admin", "example", "your-token-here", "xxxxxxxxxxxxxxxx",
    ]

    /// nil when `token` will do off loopback; otherwise why not (naming the token only when it is a
    /// placeholder: a real one, however short, stays out of messages and logs).
    public static func problem(_ token: String) -> String? {
        let advice = "set LARDER_ADMIN_TOKEN to a random secret of at least \(minimumLength) characters "
            + "(e.g. `openssl rand -hex 24`)"
        if placeholders.contains(token.lowercased()) {
            return "\"\(token)\" is a placeholder, and the admin endpoint listens off loopback: \(advice)"
        }
        if token.count < minimumLength {
            return "is \(token.count) characters, too short for an admin endpoint that listens off loopback: \(advice)"
        }
        return nil
    }
}
