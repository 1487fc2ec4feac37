/// A reader of the old-style ASCII property lists (OpenStep format) that iOS 6 transaction
/// receipts are written in: `{ "key" = "value"; "nested" = { … }; "list" = ( a, b ); }`.
///
/// Bounded and never trapping: input length, nesting depth and entry count are limited, every
/// index is checked, and garbage can only fail. Values stay strings; nothing is trusted.
enum ASCIIPropertyList: Sendable, Equatable {
    case string(String)
    case dictionary([String: ASCIIPropertyList])
    case array([ASCIIPropertyList])

    /// The largest list read (a transaction receipt is a few kilobytes).
    static let maximumLength = 256 * 1024
    /// The deepest nesting read.
    static let maximumDepth = 8
    /// The most entries in all dictionaries and arrays together.
    static let maximumEntries = 4096

    /// The list `bytes` hold, which must be one value with nothing but whitespace after it.
    static func parse(_ bytes: [UInt8]) -> ASCIIPropertyList? {
        guard !bytes.isEmpty, bytes.count <= maximumLength else { return nil }
        var reader = Reader(bytes: bytes)
        guard let value = reader.value(depth: 0) else { return nil }
        reader.skipWhitespace()
        return reader.isAtEnd ? value : nil
    }

    /// The string under `key` when this is a dictionary.
    subscript(key: String) -> String? {
        guard case .dictionary(let entries) = self, case .string(let text)? = entries[key] else { return nil }
        return text
    }

    /// A cursor over the bytes; every read checks `index` against the end.
    struct Reader {
        let bytes: [UInt8]
        var index = 0
        var entries = 0

        var isAtEnd: Bool { index >= bytes.count }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C: index += 1
                case UInt8(ascii: "/") where index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "/"):
                    while index < bytes.count, bytes[index] != 0x0A { index += 1 }
                case UInt8(ascii: "/") where index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "*"):
                    index += 2
                    while index + 1 < bytes.count, !(bytes[index] == UInt8(ascii: "*") && bytes[index + 1] == UInt8(ascii: "/")) {
                        index += 1
                    }
                    index = index + 1 < bytes.count ? index + 2 : bytes.count  // an unterminated comment ends the input
                default: return
                }
            }
        }

        mutating func value(depth: Int) -> ASCIIPropertyList? {
            guard depth <= ASCIIPropertyList.maximumDepth else { return nil }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"): return dictionary(depth: depth)
            case UInt8(ascii: "("): return array(depth: depth)
            case UInt8(ascii: "\""): return quoted().map(ASCIIPropertyList.string)
            case UInt8(ascii: "<"): return data().map(ASCIIPropertyList.string)
            default: return unquoted().map(ASCIIPropertyList.string)
            }
        }

        private mutating func countEntry() -> Bool {
            entries += 1
            return entries <= ASCIIPropertyList.maximumEntries
        }

        private mutating func dictionary(depth: Int) -> ASCIIPropertyList? {
            index += 1  // {
            var result: [String: ASCIIPropertyList] = [:]
            while true {
                skipWhitespace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .dictionary(result)
                }
                guard countEntry(), case .string(let key)? = keyValue() else { return nil }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "=") else { return nil }
                index += 1
                guard let entry = value(depth: depth + 1) else { return nil }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ";") else { return nil }
                index += 1
                result[key] = entry
            }
        }

        private mutating func keyValue() -> ASCIIPropertyList? {
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") { return quoted().map(ASCIIPropertyList.string) }
            return unquoted().map(ASCIIPropertyList.string)
        }

        private mutating func array(depth: Int) -> ASCIIPropertyList? {
            index += 1  // (
            var result: [ASCIIPropertyList] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: ")") {
                index += 1
                return .array(result)
            }
            while true {
                guard countEntry(), let element = value(depth: depth + 1) else { return nil }
                result.append(element)
                skipWhitespace()
                guard index < bytes.count else { return nil }
                switch bytes[index] {
                case UInt8(ascii: ","):
                    index += 1
                    skipWhitespace()
                    // A trailing comma before ")" is allowed.
                    if index < bytes.count, bytes[index] == UInt8(ascii: ")") {
                        index += 1
                        return .array(result)
                    }
                case UInt8(ascii: ")"):
                    index += 1
                    return .array(result)
                default: return nil
                }
            }
        }
    }
}
