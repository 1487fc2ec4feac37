import Foundation

/// JSON text written directly into bytes, for the few bodies built on a hot path: strings as JSON
/// writes them (quotes, backslash and control characters escaped, `/` and everything outside ASCII
/// left as they are, as `JSONEncoder` with `.withoutEscapingSlashes` does).
public struct JSONText {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    /// The text written so far.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Appends characters that need no escaping (punctuation, keys, digits).
    public mutating func raw(_ literal: StaticString) {
        literal.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    public mutating func number(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A JSON string: `value` quoted and escaped.
    public mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case UInt8(ascii: "\n"): raw("\\n")
            case UInt8(ascii: "\r"): raw("\\r")
            case UInt8(ascii: "\t"): raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0..<0x20:
                func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10 }
                raw("\\u00")
                bytes.append(hex(byte >> 4))
                bytes.append(hex(byte & 0xF))
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// A time in RFC 3339, UTC, to the second (`2026-11-27T05:00:00Z`), as `Date.ISO8601Format()`
/// writes it, without Foundation's formatter.
public enum RFC3339 {
    public static func utc(_ date: Date) -> String {
        var time = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil, parts.tm_year + 1900 >= 0, parts.tm_year + 1900 <= 9999 else { return date.ISO8601Format() }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let year = String(parts.tm_year + 1900)
        return String(repeating: "0", count: 4 - year.count) + year + "-" + two(parts.tm_mon + 1) + "-" + two(parts.tm_mday) + "T"
            + two(parts.tm_hour) + ":" + two(parts.tm_min) + ":" + two(parts.tm_sec) + "Z"
    }
}
