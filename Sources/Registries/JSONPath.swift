/// The keys and indexes from a document's root to one value, read in place from the document.
public struct JSONPath {
    /// One open container: its kind, how many entries it has seen, and (objects) the current key.
    struct Frame {
        var isObject: Bool
        var index = 0
        var key: Range<Int> = 0..<0
        var keyHasEscapes = false

        init(isObject: Bool) { self.isObject = isObject }
    }

    public enum Step: Sendable, Equatable {
        case key(String)
        case index(Int)
    }

    let bytes: [UInt8]
    let frames: [Frame]

    public var count: Int { frames.count }

    public subscript(_ depth: Int) -> Step {
        let frame = frames[depth]
        return frame.isObject ? .key(key(at: depth) ?? "") : .index(frame.index)
    }

    /// The member name at `depth`, decoded; nil for an array level (or a key that is not Unicode).
    public func key(at depth: Int) -> String? {
        let frame = frames[depth]
        guard frame.isObject else { return nil }
        return JSONString.decode(bytes[frame.key], hasEscapes: frame.keyHasEscapes)
    }

    /// The array index at `depth`; nil for an object level.
    public func index(at depth: Int) -> Int? {
        frames[depth].isObject ? nil : frames[depth].index
    }

    /// Whether the path is exactly as long as `pattern` and every step matches.
    public func matches(_ pattern: JSONPathPattern) -> Bool {
        guard pattern.steps.count == frames.count else { return false }
        for (depth, step) in pattern.steps.enumerated() where !matches(step, at: depth) { return false }
        return true
    }

    /// Whether the path starts with `pattern`'s steps (and may go deeper).
    public func hasPrefix(_ pattern: JSONPathPattern) -> Bool {
        guard pattern.steps.count <= frames.count else { return false }
        for (depth, step) in pattern.steps.enumerated() where !matches(step, at: depth) { return false }
        return true
    }

    private func matches(_ step: JSONPathPattern.Step, at depth: Int) -> Bool {
        let frame = frames[depth]
        switch step {
        case .anyIndex: return !frame.isObject
        case .anyKey: return frame.isObject
        case .key(let name):
            guard frame.isObject else { return false }
            // Registry keys are plain ASCII; a key spelled with escapes is decoded to compare.
            if frame.keyHasEscapes { return key(at: depth) == name }
            return bytes[frame.key].elementsEqual(name.utf8)
        }
    }
}

/// A path with wildcards, written like `versions.*.dist.tarball` or `files[].url`: `name` is one
/// member, `*` any member, `[]` any element.
public struct JSONPathPattern: Sendable, Equatable, CustomStringConvertible {
    public enum Step: Sendable, Equatable {
        case key(String)
        case anyKey
        case anyIndex
    }

    public var steps: [Step]

    public init(_ steps: [Step]) { self.steps = steps }

    /// Parses the notation above; member names cannot contain `.`, `[` or `*` (none of ours do).
    public init(_ notation: String) {
        var steps: [Step] = []
        for part in notation.split(separator: ".", omittingEmptySubsequences: true) {
            var name = Substring(part)
            var indexes = 0
            while name.hasSuffix("[]") {
                name = name.dropLast(2)
                indexes += 1
            }
            if name == "*" {
                steps.append(.anyKey)
            } else if !name.isEmpty {
                steps.append(.key(String(name)))
            }
            steps.append(contentsOf: repeatElement(.anyIndex, count: indexes))
        }
        self.steps = steps
    }

    public var description: String {
        var text = ""
        for step in steps {
            switch step {
            case .key(let name): text += (text.isEmpty ? "" : ".") + name
            case .anyKey: text += (text.isEmpty ? "" : ".") + "*"
            case .anyIndex: text += "[]"
            }
        }
        return text
    }
}
