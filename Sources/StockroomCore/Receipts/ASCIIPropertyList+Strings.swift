/// The leaves of an ASCII property list: quoted strings with their escapes, `<hex>` data and
/// bare words. Each read stops at the end of the bytes and fails rather than guess.
extension ASCIIPropertyList.Reader {
    /// `"…"` with the escapes the format knows: `\"`, `\\`, `\n`, `\t`, `\r`, `\Uxxxx`, octal.
    mutating func quoted() -> String? {
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

    mutating func escape() -> Unicode.Scalar? {
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
    mutating func data() -> String? {
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
    mutating func unquoted() -> String? {
        let start = index
        while index < bytes.count, Self.isBare(bytes[index]) { index += 1 }
        guard index > start else { return nil }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    static func isBare(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "_"), UInt8(ascii: "$"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: ":"), UInt8(ascii: "."),
            UInt8(ascii: "-"):
            true
        default: false
        }
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
