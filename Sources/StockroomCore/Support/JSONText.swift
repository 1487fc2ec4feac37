import Foundation

/// JSON text written directly, for the few bodies built on a hot path: a string as JSON writes it
/// (quotes, backslash and control characters escaped, `/` left as it is, as `JSONEncoder` with
/// `.withoutEscapingSlashes` does).
public enum JSONText {
    public static func string(_ value: String) -> String {
        var text = "\""
        text.reserveCapacity(value.utf8.count + 2)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case "\u{08}": text += "\\b"
            case "\u{0C}": text += "\\f"
            case let control where control.value < 0x20:
                let hex = String(control.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
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
