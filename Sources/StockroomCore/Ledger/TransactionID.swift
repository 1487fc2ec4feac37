/// The shape of an App Store transaction ID as the server accepts it, the one rule for request
/// paths and bodies, the operator's surfaces and the URLs of the App Store Server API: 1 to 64
/// ASCII letters, digits, `-` and `_` (Apple's are decimal digits). No dot, so no ID is a `.` or
/// `..` path segment once it is in a URL. (StockroomKit holds answers to a stricter rule of its
/// own, decimal digits only, because an ID names a file on the device.)
public enum TransactionID {
    public static func isValid(_ text: String) -> Bool {
        let bytes = text.utf8
        guard (1...64).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }

    /// What a request is told when an ID is not one.
    public static let rule = "1–64 letters, digits, \"-\" or \"_\""
}
