/// A duration as operators write it: a whole number and one unit, `s`, `m`, `h` or `d`
/// (`0s`, `90s`, `5m`, `24h`, `7d`); what `--idle-timeout`, `--token-lifetime` and the other
/// duration flags take.
///
/// Parsed without traps: at most 12 digits, checked multiplication, and an upper bound of
/// ten years, so every value stays far from `Int64` overflow wherever it is added to a date.
public enum DurationArgument {
    /// The largest duration accepted: 3650 days.
    public static let maximum: Duration = .seconds(3650 * 86_400)

    /// The duration `text` names; a `DurationArgumentError` saying what is wrong otherwise.
    public static func parse(_ text: String) throws(DurationArgumentError) -> Duration {
        let scalars = Array(text.unicodeScalars)
        guard let unit = scalars.last, (2...13).contains(scalars.count) else { throw DurationArgumentError(text: text) }
        let digits = scalars.dropLast()
        guard digits.allSatisfy({ ("0"..."9").contains($0) }), let count = Int64(String(String.UnicodeScalarView(digits))) else {
            throw DurationArgumentError(text: text)
        }
        let seconds: Int64
        switch unit {
        case "s": seconds = 1
        case "m": seconds = 60
        case "h": seconds = 3600
        case "d": seconds = 86_400
        default: throw DurationArgumentError(text: text)
        }
        let (total, overflow) = count.multipliedReportingOverflow(by: seconds)
        guard !overflow, total <= maximum.components.seconds else { throw DurationArgumentError(text: text, kind: .tooLong) }
        return .seconds(total)
    }

    /// `duration` in the largest unit that divides it evenly (`3600 s` → `1h`), days only from
    /// two (`24h`, `7d`); sub-second parts are dropped. For help texts and logs.
    public static func format(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        for (unit, size) in [("d", Int64(86_400)), ("h", 3600), ("m", 60)] where seconds != 0 && seconds % size == 0 {
            if unit == "d", seconds < 2 * size { continue }
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }
}

/// A duration (or rate) flag or variable that does not parse, or is longer than
/// `DurationArgument.maximum`.
public struct DurationArgumentError: Error, Equatable, CustomStringConvertible {
    /// What was wrong with it.
    public enum Kind: Sendable, Equatable {
        case malformed, tooLong, rate
    }

    /// The text as given.
    public let text: String
    public var kind: Kind = .malformed

    public var description: String {
        switch kind {
        case .malformed: "\"\(text)\" is not a duration: write a whole number and s, m, h or d, such as 0s, 5m, 24h"
        case .tooLong: "\"\(text)\" is longer than \(DurationArgument.format(DurationArgument.maximum))"
        case .rate: "\"\(text)\" is not a rate: write requests/period, such as 30/m, 100/h, 10/30s, or off"
        }
    }
}
