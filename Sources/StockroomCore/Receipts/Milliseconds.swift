import Foundation

/// Milliseconds since 1970 as the App Store sends them (numbers, strings of digits, sometimes
/// fractions), converted with checks so that no outside number can trap the process.
public enum Milliseconds {
    /// The widest instant accepted: year 9999 either side of 1970, far inside `Int64` and `Date`.
    public static let bound: Int64 = 253_402_300_799_999

    /// A whole number of milliseconds from a JSON number; nil when it is not finite or out of bounds.
    public static func checked(_ value: Double) -> Int64? {
        guard value.isFinite else { return nil }
        let whole = value.rounded(.towardZero)
        guard whole >= -Double(bound), whole <= Double(bound) else { return nil }
        return Int64(exactly: whole)
    }

    /// A whole number of milliseconds within bounds; nil otherwise.
    public static func checked(_ value: Int64) -> Int64? {
        (-bound...bound).contains(value) ? value : nil
    }

    /// Digits (an optional sign, optional fraction) as Apple writes them in strings: `"1700000000000"`.
    /// At most 32 characters are looked at; anything else is nil, never a trap.
    public static func parse(_ text: some StringProtocol) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 32 else { return nil }
        if let whole = Int64(trimmed) { return checked(whole) }
        // Only plain decimal fractions: "1e30", "nan", "inf" and hex floats are refused.
        guard
            trimmed.utf8.allSatisfy({
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
            }),
            let value = Double(trimmed)
        else { return nil }
        return checked(value)
    }

    /// The instant `milliseconds` names.
    public static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Milliseconds since 1970 of `date`, clamped to the bounds.
    public static func of(_ date: Date) -> Int64 {
        checked(date.timeIntervalSince1970 * 1000) ?? (date.timeIntervalSince1970 < 0 ? -bound : bound)
    }
}
