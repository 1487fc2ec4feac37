/// Hex and base64 encodings used in ETags, digests and tokens.
public enum ByteEncoding {
    private static let hexDigits = Array("0123456789abcdef".utf8)
    private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Lower-case hexadecimal.
    public static func hex(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Standard base64 with padding (RFC 4648 §4).
    public static func base64(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        var out = [UInt8]()
        out.reserveCapacity((input.count + 2) / 3 * 4)
        var index = 0
        while index < input.count {
            let remaining = input.count - index
            let b0 = input[index]
            let b1 = remaining > 1 ? input[index + 1] : 0
            let b2 = remaining > 2 ? input[index + 2] : 0
            out.append(base64Alphabet[Int(b0 >> 2)])
            out.append(base64Alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(remaining > 1 ? base64Alphabet[Int((b1 & 0x0f) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(remaining > 2 ? base64Alphabet[Int(b2 & 0x3f)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Base64url without padding (RFC 4648 §5), as JOSE and our tokens use.
    public static func base64URL(_ bytes: some Collection<UInt8>) -> String {
        var text = base64(bytes)
        while text.hasSuffix("=") { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// Decodes standard base64 or base64url, with or without padding; nil on any other character.
    ///
    /// Whitespace and line breaks are skipped, as receipts pasted from logs often carry them.
    public static func decodeBase64(_ text: some StringProtocol) -> [UInt8]? {
        if let decoded = text.utf8.withContiguousStorageIfAvailable({ decodeBase64(bytes: $0) }) { return decoded }
        return Array(text.utf8).withUnsafeBufferPointer { decodeBase64(bytes: $0) }
    }

    /// The same over bytes in place (a part of a JWS).
    public static func decodeBase64(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        decodeBase64(bytes: bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// One pass over the bytes, six bits at a time: a 1 MiB receipt costs no more than copying it.
    private static func decodeBase64(bytes input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var valid = true
        let out = base64Values.withUnsafeBufferPointer { values in
            [UInt8](unsafeUninitializedCapacity: input.count / 4 * 3 + 3) { out, count in
                var accumulator: UInt32 = 0
                var digits = 0
                var padding = 0
                for char in input {
                    let value = values[Int(char)]
                    if value < 64 {
                        guard padding == 0 else { valid = false; break }  // data after padding
                        accumulator = accumulator << 6 | UInt32(value)
                        digits += 1
                        if digits & 3 == 0 {
                            out[count] = UInt8(truncatingIfNeeded: accumulator >> 16)
                            out[count + 1] = UInt8(truncatingIfNeeded: accumulator >> 8)
                            out[count + 2] = UInt8(truncatingIfNeeded: accumulator)
                            count += 3
                            accumulator = 0
                        }
                    } else if value == Self.paddingValue {
                        padding += 1
                    } else if value != Self.whitespaceValue {
                        valid = false
                        break
                    }
                }
                let rest = digits & 3
                guard valid, padding <= 2, rest != 1, padding == 0 || (digits + padding) % 4 == 0 else {
                    valid = false
                    return
                }
                if rest == 2 {
                    out[count] = UInt8(truncatingIfNeeded: accumulator >> 4)
                    count += 1
                } else if rest == 3 {
                    out[count] = UInt8(truncatingIfNeeded: accumulator >> 10)
                    out[count + 1] = UInt8(truncatingIfNeeded: accumulator >> 2)
                    count += 2
                }
            }
        }
        return valid ? out : nil
    }

    private static let paddingValue: UInt8 = 0xFE
    private static let whitespaceValue: UInt8 = 0xFD

    /// Each byte's six-bit value in base64 or base64url; `=` and ASCII whitespace are marked,
    /// anything else is 0xFF.
    private static let base64Values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, char) in base64Alphabet.enumerated() { table[Int(char)] = UInt8(index) }
        table[Int(UInt8(ascii: "-"))] = 62
        table[Int(UInt8(ascii: "_"))] = 63
        table[Int(UInt8(ascii: "="))] = paddingValue
        for char in [UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t")] { table[Int(char)] = whitespaceValue }
        return table
    }()
}
