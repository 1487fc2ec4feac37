import Foundation

/// Apple's verifyReceipt date strings (`2026-11-22 05:43:23 Etc/GMT`) read back.
enum AppleDateText {
    static func milliseconds(_ text: String) -> Int64? {
        guard text.utf8.count <= 40, text.hasSuffix(" Etc/GMT") else { return nil }
        let iso = text.dropLast(" Etc/GMT".count).replacingOccurrences(of: " ", with: "T") + "Z"
        guard let date = ReceiptDate.parse(iso) else { return nil }
        return Milliseconds.checked(date.timeIntervalSince1970 * 1000)
    }
}

/// The shape a lenient number usually comes in, tried first: a failed try costs a whole
/// `DecodingError`. The App Store Server API and JWS payloads write numbers; verifyReceipt
/// writes strings.
enum NumberShape {
    case number, string
}

extension KeyedDecodingContainer {
    /// An integer sent as a JSON number or a string of digits.
    func decodeLenientInteger(_ key: Key, default fallback: Int64, usually shape: NumberShape = .number) throws -> Int64 {
        guard contains(key), (try? decodeNil(forKey: key)) == false else { return fallback }
        if shape == .number, let number = try? decode(Int64.self, forKey: key) { return number }
        guard let text = try? decode(String.self, forKey: key) else { return try decode(Int64.self, forKey: key) }
        guard text.utf8.count <= 32, let number = Int64(text.trimmingCharacters(in: .whitespaces)) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not an integer")
        }
        return number
    }

    /// Milliseconds since 1970 as a number (fractions allowed) or a string, range-checked;
    /// nil when absent, null or empty; a decoding error for anything else (never a trap).
    func decodeMilliseconds(_ key: Key, usually shape: NumberShape = .number) throws -> Int64? {
        guard contains(key), (try? decodeNil(forKey: key)) == false else { return nil }
        if shape == .number, let number = try? decode(Double.self, forKey: key) { return try checkedMilliseconds(number, key) }
        guard let text = try? decode(String.self, forKey: key) else {
            return try checkedMilliseconds(decode(Double.self, forKey: key), key)
        }
        if text.isEmpty { return nil }
        guard let milliseconds = Milliseconds.parse(text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not milliseconds")
        }
        return milliseconds
    }

    private func checkedMilliseconds(_ number: Double, _ key: Key) throws -> Int64 {
        guard let milliseconds = Milliseconds.checked(number) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "milliseconds out of range")
        }
        return milliseconds
    }

    /// A string, or a number written as one.
    func decodeLenientString(_ key: Key) throws -> String {
        if let text = try? decode(String.self, forKey: key) { return text }
        return String(try decode(Int64.self, forKey: key))
    }

    /// true, "true", 1 or "1"; anything else (or absent) is false.
    func decodeLenientBool(_ key: Key) -> Bool {
        guard contains(key) else { return false }
        if let flag = try? decode(Bool.self, forKey: key) { return flag }
        if let number = try? decode(Int.self, forKey: key) { return number != 0 }
        if let text = try? decode(String.self, forKey: key) { return text == "true" || text == "1" }
        return false
    }
}
