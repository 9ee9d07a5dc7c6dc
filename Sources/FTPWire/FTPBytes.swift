// Byte classes and small helpers shared by the FTP parsers and builders. Everything works on single
// bytes or byte arrays; FTP's control channel and listings are read as bytes, never as String.

let ftpCR: UInt8 = 0x0D
let ftpLF: UInt8 = 0x0A
let ftpSP: UInt8 = 0x20
let ftpHTAB: UInt8 = 0x09

/// A C0 control byte or DEL: never allowed inside a command argument, since CR or LF would end the
/// command early and let the rest of the argument run as a command of its own.
@inline(__always)
func isControlByte(_ b: UInt8) -> Bool { b < 0x20 || b == 0x7F }

@inline(__always)
func isDecimal(_ b: UInt8) -> Bool { b &- 0x30 < 10 }

/// ASCII lowercase; other bytes unchanged.
@inline(__always)
func lowercased(_ b: UInt8) -> UInt8 { b &- 0x41 < 26 ? b | 0x20 : b }

/// The value of a hex digit, or nil.
@inline(__always)
func hexDigitValue(_ b: UInt8) -> UInt8? {
    if b &- 0x30 < 10 { return b &- 0x30 }
    let l = b | 0x20
    if l &- 0x61 < 6 { return l &- 0x61 + 10 }
    return nil
}

/// Whether `bytes` equals the ASCII `text`, ignoring ASCII case.
func equalsIgnoringCase<C: Collection<UInt8>>(_ bytes: C, _ text: String) -> Bool {
    bytes.count == text.utf8.count && zip(bytes, text.utf8).allSatisfy { lowercased($0) == lowercased($1) }
}

/// A run of ASCII digits as a non-negative number, or nil when empty, not all digits, or above `limit`.
func decimalValue<C: Collection<UInt8>>(_ bytes: C, limit: Int) -> Int? {
    guard !bytes.isEmpty else { return nil }
    var value = 0
    for b in bytes {
        guard isDecimal(b) else { return nil }
        value = value * 10 + Int(b &- 0x30)
        if value > limit { return nil }
    }
    return value
}

/// `bytes` without leading and trailing spaces and tabs.
func trimmedBlanks(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    var start = bytes.startIndex
    var end = bytes.endIndex
    while start < end, bytes[start] == ftpSP || bytes[start] == ftpHTAB { start += 1 }
    while end > start, bytes[end - 1] == ftpSP || bytes[end - 1] == ftpHTAB { end -= 1 }
    return bytes[start..<end]
}

/// Appends `value` (≥ 0) in decimal.
func appendDecimal(_ value: Int, to out: inout [UInt8]) {
    if value >= 10 { appendDecimal(value / 10, to: &out) }
    out.append(UInt8(value % 10) + 0x30)
}

/// Appends `value` (0...99) as two digits.
func appendTwoDigits(_ value: Int, to out: inout [UInt8]) {
    out.append(UInt8(value / 10) + 0x30)
    out.append(UInt8(value % 10) + 0x30)
}
