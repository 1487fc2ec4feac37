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

    private struct Reader {
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
                    while index + 1 < bytes.count, !(bytes[index] == UInt8(ascii: "*") && bytes[index + 1] == UInt8(ascii: "/")) { index += 1 }
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

        /// `"…"` with the escapes the format knows: `\"`, `\\`, `\n`, `\t`, `\r`, `\Uxxxx`, octal.
        private mutating func quoted() -> String? {
            index += 1  // opening quote
            var scalars = String.UnicodeScalarView()
            var run: [UInt8] = []
            func flush() -> Bool {
                guard !run.isEmpty else { return true }
                guard let text = String(validating: run, as: UTF8.self) else { return false }
                scalars.append(contentsOf: text.unicodeScalars)
                run.removeAll(keepingCapacity: true)
                return true
            }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard flush() else { return nil }
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    guard flush(), let scalar = escape() else { return nil }
                    scalars.append(scalar)
                default:
                    run.append(byte)
                }
            }
            return nil  // unterminated
        }

        private mutating func escape() -> Unicode.Scalar? {
            guard index < bytes.count else { return nil }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "n"): return "\n"
            case UInt8(ascii: "t"): return "\t"
            case UInt8(ascii: "r"): return "\r"
            case UInt8(ascii: "a"): return "\u{07}"
            case UInt8(ascii: "b"): return "\u{08}"
            case UInt8(ascii: "f"): return "\u{0C}"
            case UInt8(ascii: "v"): return "\u{0B}"
            case UInt8(ascii: "U"), UInt8(ascii: "u"):
                var value: UInt32 = 0
                var digits = 0
                while digits < 4, index < bytes.count, let digit = Self.hexValue(bytes[index]) {
                    value = value << 4 | UInt32(digit)
                    index += 1
                    digits += 1
                }
                guard digits > 0 else { return nil }
                return Unicode.Scalar(value)
            case UInt8(ascii: "0")...UInt8(ascii: "7"):
                var value = UInt32(byte - UInt8(ascii: "0"))
                var digits = 1
                while digits < 3, index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(bytes[index]) {
                    value = value << 3 | UInt32(bytes[index] - UInt8(ascii: "0"))
                    index += 1
                    digits += 1
                }
                return Unicode.Scalar(value)
            default:
                return byte < 0x80 ? Unicode.Scalar(byte) : nil
            }
        }

        /// `<0fbd 7a>`: kept as its hex text; receipts carry none.
        private mutating func data() -> String? {
            index += 1
            var hex: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: ">") { return String(decoding: hex, as: UTF8.self) }
                if byte == 0x20 || byte == 0x0A || byte == 0x09 || byte == 0x0D { continue }
                guard Self.hexValue(byte) != nil else { return nil }
                hex.append(byte)
            }
            return nil
        }

        /// A bare word: letters, digits and `_$+/:.-`.
        private mutating func unquoted() -> String? {
            let start = index
            while index < bytes.count, Self.isBare(bytes[index]) { index += 1 }
            guard index > start else { return nil }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        private static func isBare(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            case UInt8(ascii: "_"), UInt8(ascii: "$"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "-"): true
            default: false
            }
        }

        private static func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
    }
}
