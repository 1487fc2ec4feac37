import Foundation

/// Text made safe for HTML: every page builds its markup from these, never from raw strings.
enum HTML {
    /// `text` with `& < > " '` escaped, for element content and quoted attribute values alike.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// A query string of `pairs` (empty values left out), percent-encoded, escaped for an attribute.
    static func query(_ pairs: [(String, String?)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let items = pairs.compactMap { name, value -> String? in
            guard let value, !value.isEmpty else { return nil }
            return name + "=" + (value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
        }
        return items.isEmpty ? "" : "?" + escape(items.joined(separator: "&"))
    }

    /// A byte count in the units people read (B, KiB, MiB, GiB).
    static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f", value) + " " + units[unit]
    }

    /// A time as operators read it: UTC, to the second.
    static func time(_ date: Date?) -> String {
        guard let date else { return "—" }
        return date.ISO8601Format().replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }
}
