/// Replacing some byte ranges of a document and copying the rest verbatim: how every rewrite and
/// filter in this module produces its output.
struct ByteEdit: Equatable {
    var range: Range<Int>
    var replacement: [UInt8]
}

enum ByteEdits {
    /// `document` with each edit's range replaced. Edits must not overlap (they may touch); their
    /// order does not matter.
    static func apply(_ edits: [ByteEdit], to document: [UInt8]) -> [UInt8] {
        guard !edits.isEmpty else { return document }
        let sorted = edits.sorted { $0.range.lowerBound < $1.range.lowerBound }
        var out: [UInt8] = []
        out.reserveCapacity(document.count)
        var copied = 0
        for edit in sorted {
            precondition(edit.range.lowerBound >= copied, "overlapping edits")
            out.append(contentsOf: document[copied..<edit.range.lowerBound])
            out.append(contentsOf: edit.replacement)
            copied = edit.range.upperBound
        }
        out.append(contentsOf: document[copied...])
        return out
    }

    /// The deletions that remove the entries marked in `remove` from one object or array, whose
    /// entries (in document order, all of them) are `entries`, keeping the commas right.
    ///
    /// A run of removed entries goes with the comma before it when a kept entry precedes it,
    /// otherwise with the comma after it; a container emptied entirely keeps only its brackets
    /// and the whitespace around what was removed.
    static func removals(of entries: [EntrySpan], where remove: (Int) -> Bool) -> [ByteEdit] {
        var edits: [ByteEdit] = []
        var index = 0
        while index < entries.count {
            guard remove(index) else {
                index += 1
                continue
            }
            let first = index
            while index < entries.count, remove(index) { index += 1 }
            let last = index - 1
            if first > 0 {
                // `, removed, removed` after the kept entry before the run.
                edits.append(ByteEdit(range: entries[first - 1].end..<entries[last].end, replacement: []))
            } else if index < entries.count {
                // `removed, removed, ` before the kept entry after the run.
                edits.append(ByteEdit(range: entries[first].start..<entries[index].start, replacement: []))
            } else {
                edits.append(ByteEdit(range: entries[first].start..<entries[last].end, replacement: []))
            }
        }
        return edits
    }
}

/// One entry of an object or array: from the member's key (or the element) to the end of its value.
struct EntrySpan: Equatable {
    var start: Int
    var end: Int

    init(_ value: JSONValue) {
        start = value.entryStart
        end = value.range.upperBound
    }

    init(start: Int, end: Int) {
        self.start = start
        self.end = end
    }
}
