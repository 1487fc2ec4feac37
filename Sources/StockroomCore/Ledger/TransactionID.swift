/// The shape of an App Store transaction ID as Stockroom accepts it in paths and bodies.
public enum TransactionID {
    /// 1 to 64 characters of letters, digits, `.`, `-`, `_` (Apple's are decimal digits).
    public static func isValid(_ text: String) -> Bool {
        let bytes = text.utf8
        guard (1...64).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }
}
