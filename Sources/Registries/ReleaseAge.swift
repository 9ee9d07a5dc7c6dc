import CachePolicy
import HTTPWire

/// `min_release_age` at one instant: releases published after `cutoff` are too new to serve.
///
/// A mirror that holds back new releases for a few days lets the registry's own checks (malware
/// reports, yanks, unpublishes) catch a bad release before any client installs it. The time is
/// passed in (whole seconds since the epoch); nothing here reads a clock.
public struct ReleaseAge: Sendable, Equatable {
    /// The configured minimum age, in seconds.
    public var minimumAge: Int64
    public var now: Int64

    public init(minimumAge: Int64, now: Int64) {
        self.minimumAge = minimumAge
        self.now = now
    }

    /// The latest publication time still old enough.
    public var cutoff: Int64 { now - minimumAge }

    /// Whether something published at `published` is at least `minimumAge` old.
    public func isOldEnough(published: Int64) -> Bool { published <= cutoff }

    /// Whether a package file may be served, from its response's `Last-Modified` (an HTTP-date,
    /// RFC 9110 §8.8.2): registries' file hosts send the upload time there, and the file never
    /// changes after it.
    public func verdict(lastModified header: String?) -> FileAgeVerdict {
        guard let header, let published = HTTPDate.parse(header, now: now) else { return .undated }
        return verdict(published: published)
    }

    /// As `verdict(lastModified:)`, from a time already read.
    public func verdict(published: Int64) -> FileAgeVerdict {
        guard !isOldEnough(published: published) else { return .allowed }
        let age = max(0, now - published)
        return .refused(reason: "published \(DurationText.describe(age)) ago; this mirror serves files at least "
            + "\(DurationText.describe(minimumAge)) old (min_release_age)")
    }
}

extension HTTPDate {
    static func parse(_ text: String, now: Int64) -> Int64? {
        var text = text
        return text.withUTF8 { parse(UnsafeRawBufferPointer($0), now: now) }
    }
}

/// Whether a package file may be served under `min_release_age`.
public enum FileAgeVerdict: Sendable, Equatable {
    case allowed
    /// Too new; the reason is meant for the client (and the log).
    case refused(reason: String)
    /// No usable `Last-Modified`: the age is unknown, and the caller's configuration decides.
    case undated
}

/// Durations as people read them: the two largest non-zero units, rounded down
/// (`2 days`, `6 days 23 hours`, `45 minutes`, `0 seconds`).
enum DurationText {
    private static let units: [(seconds: Int64, name: String)] = [(86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second")]

    static func describe(_ seconds: Int64) -> String {
        var rest = max(0, seconds)
        var parts: [String] = []
        for unit in units where parts.count < 2 {
            let count = rest / unit.seconds
            rest -= count * unit.seconds
            if count > 0 {
                parts.append("\(count) \(unit.name)\(count == 1 ? "" : "s")")
            } else if !parts.isEmpty {
                break  // `2 days 5 minutes` would read as more precise than it is
            }
        }
        return parts.isEmpty ? "0 seconds" : parts.joined(separator: " ")
    }
}
