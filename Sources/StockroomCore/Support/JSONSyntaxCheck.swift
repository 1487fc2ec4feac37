/// Finds where a JSON text first breaks the grammar (RFC 8259), as line and column, so that
/// an operator editing `products.json` by hand is told exactly where to look.
///
/// Foundation's decoder says only "not valid JSON"; this runs when decoding has failed.
public struct JSONSyntaxError: Error, Equatable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var reason: String

    public var description: String { "line \(line), column \(column): \(reason)" }

    /// The first syntax error in `bytes`, or nil when they are one valid JSON value.
    public static func find(in bytes: [UInt8]) -> JSONSyntaxError? {
        var scanner = Scanner(bytes: bytes)
        do throws(JSONSyntaxError) {
            scanner.skipWhitespace()
            try scanner.value(depth: 0)
            scanner.skipWhitespace()
            if scanner.index < bytes.count { throw scanner.error("unexpected text after the JSON value") }
            return nil
        } catch {
            return error
        }
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        func error(_ reason: String) -> JSONSyntaxError {
            var line = 1
            var column = 1
            for byte in bytes[..<min(index, bytes.count)] {
                if byte == UInt8(ascii: "\n") {
                    line += 1
                    column = 1
                } else if byte & 0xC0 != 0x80 {  // count characters, not UTF-8 continuation bytes
                    column += 1
                }
            }
            return JSONSyntaxError(line: line, column: column, reason: reason)
        }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(JSONSyntaxError) {
            guard current == byte else { throw error(current == nil ? "unexpected end of file, expected \(what)" : "expected \(what)") }
            index += 1
        }

        mutating func value(depth: Int) throws(JSONSyntaxError) {
            guard depth < 512 else { throw error("nesting is too deep") }
            guard let byte = current else { throw error("unexpected end of file, expected a value") }
            switch byte {
            case UInt8(ascii: "{"): try object(depth: depth)
            case UInt8(ascii: "["): try array(depth: depth)
            case UInt8(ascii: "\""): try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            default: throw error("expected a value")
            }
        }

        mutating func object(depth: Int) throws(JSONSyntaxError) {
            index += 1
            skipWhitespace()
            if current == UInt8(ascii: "}") { index += 1; return }
            while true {
                skipWhitespace()
                guard current == UInt8(ascii: "\"") else {
                    throw error(current == nil ? "unexpected end of file in an object" : "expected a quoted key")
                }
                try string()
                skipWhitespace()
                try expect(UInt8(ascii: ":"), "\":\" after the key")
                skipWhitespace()
                try value(depth: depth + 1)
                skipWhitespace()
                if current == UInt8(ascii: ",") { index += 1; continue }
                try expect(UInt8(ascii: "}"), "\",\" or \"}\"")
                return
            }
        }

        mutating func array(depth: Int) throws(JSONSyntaxError) {
            index += 1
            skipWhitespace()
            if current == UInt8(ascii: "]") { index += 1; return }
            while true {
                skipWhitespace()
                try value(depth: depth + 1)
                skipWhitespace()
                if current == UInt8(ascii: ",") { index += 1; continue }
                try expect(UInt8(ascii: "]"), "\",\" or \"]\"")
                return
            }
        }

        mutating func string() throws(JSONSyntaxError) {
            index += 1
            while let byte = current {
                switch byte {
                case UInt8(ascii: "\""): index += 1; return
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escaped = current else { break }
                    if escaped == UInt8(ascii: "u") {
                        for _ in 0..<4 {
                            index += 1
                            guard let hex = current, hex.isHexDigit else { throw error("bad \\u escape") }
                        }
                    } else if !Array("\"\\/bfnrt".utf8).contains(escaped) {
                        throw error("bad escape in a string")
                    }
                    index += 1
                case 0..<0x20: throw error("control character in a string")
                default: index += 1
                }
            }
            throw error("unexpected end of file in a string")
        }

        mutating func literal(_ word: String) throws(JSONSyntaxError) {
            for expected in word.utf8 {
                guard current == expected else { throw error("expected \(word)") }
                index += 1
            }
        }

        mutating func number() throws(JSONSyntaxError) {
            if current == UInt8(ascii: "-") { index += 1 }
            guard let first = current, first.isDigit else { throw error("expected a digit") }
            index += 1
            if first != UInt8(ascii: "0") { while current?.isDigit == true { index += 1 } }
            if current == UInt8(ascii: ".") {
                index += 1
                guard current?.isDigit == true else { throw error("expected a digit after \".\"") }
                while current?.isDigit == true { index += 1 }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard current?.isDigit == true else { throw error("expected a digit in the exponent") }
                while current?.isDigit == true { index += 1 }
            }
        }
    }
}

extension UInt8 {
    fileprivate var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    fileprivate var isHexDigit: Bool {
        isDigit || (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "f")) || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F"))
    }
}
