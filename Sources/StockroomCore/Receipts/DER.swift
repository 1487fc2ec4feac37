/// A small DER reader for the receipt payload: every length is checked against the bytes left,
/// so garbage can only fail, never read out of bounds.
struct DERReader {
    /// One tag-length-value: the tag byte and the value's bytes.
    struct Element {
        var tag: UInt8
        var value: ArraySlice<UInt8>
    }

    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { bytes.isEmpty }

    /// The next element; nil when the bytes are not well-formed DER (high tags, indefinite or
    /// overlong lengths, a length past the end).
    mutating func next() -> Element? {
        guard let tag = bytes.first, tag & 0x1F != 0x1F else { return nil }
        var index = bytes.index(after: bytes.startIndex)
        guard index < bytes.endIndex else { return nil }
        let first = bytes[index]
        index += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard (1...4).contains(count), bytes.endIndex - index >= count else { return nil }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard length <= bytes.endIndex - index else { return nil }
        let value = bytes[index..<(index + length)]
        bytes = bytes[(index + length)...]
        return Element(tag: tag, value: value)
    }

    /// A non-negative INTEGER's value, when it fits in 63 bits.
    static func integer(_ value: ArraySlice<UInt8>) -> Int64? {
        guard !value.isEmpty, value.count <= 8, value.first! & 0x80 == 0 else { return nil }
        return value.reduce(0) { $0 << 8 | Int64($1) }
    }
}

/// DER encoding of the few types the simulator's receipts use.
enum DERWriter {
    static func element(_ tag: UInt8, _ value: [UInt8]) -> [UInt8] {
        var out = [tag]
        if value.count < 0x80 {
            out.append(UInt8(value.count))
        } else {
            var length = value.count
            var digits: [UInt8] = []
            while length > 0 {
                digits.insert(UInt8(length & 0xFF), at: 0)
                length >>= 8
            }
            out.append(0x80 | UInt8(digits.count))
            out += digits
        }
        return out + value
    }

    static func integer(_ value: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        var remaining = value
        repeat {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        } while remaining > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return element(0x02, bytes)
    }

    static func utf8(_ text: String) -> [UInt8] { element(0x0C, Array(text.utf8)) }
    static func ia5(_ text: String) -> [UInt8] { element(0x16, Array(text.utf8)) }
    static func octets(_ bytes: [UInt8]) -> [UInt8] { element(0x04, bytes) }
    static func sequence(_ parts: [[UInt8]]) -> [UInt8] { element(0x30, parts.flatMap { $0 }) }
    static func set(_ parts: [[UInt8]]) -> [UInt8] { element(0x31, parts.flatMap { $0 }) }

    /// A receipt attribute: SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }.
    static func attribute(_ type: Int64, _ value: [UInt8]) -> [UInt8] {
        sequence([integer(type), integer(1), octets(value)])
    }
}
