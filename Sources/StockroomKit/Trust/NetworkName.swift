import Foundation

/// The grammar a name from the network must match before it touches the file system.
///
/// Product IDs and transaction IDs arrive in restore lists, headers and the catalogue, all of
/// them a stranger's words: a product named `..` or `../../x` must never become a path. A
/// product ID is what App Store Connect accepts (letters, digits, `.`, `-`, `_`; no empty label,
/// so never `.` or `..`); a transaction ID is Apple's, decimal digits.
public enum NetworkName {
    /// The longest product ID accepted (App Store Connect's limit is lower).
    public static let maximumProductIDLength = 255
    /// The longest transaction ID accepted: Apple's are 64-bit numbers, at most 20 digits.
    public static let maximumTransactionIDLength = 32

    /// Whether `text` is a well-formed product ID: 1 to 255 of letters, digits, `.`, `-`, `_`,
    /// starting with a letter or digit, with no empty label (`a..b`) and no trailing dot.
    public static func isProductID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...maximumProductIDLength).contains(bytes.count), let first = bytes.first, isAlphanumeric(first),
            bytes.last != UInt8(ascii: ".")
        else { return false }
        var previous: UInt8 = 0
        for byte in bytes {
            if byte == UInt8(ascii: ".") {
                if previous == UInt8(ascii: ".") { return false }
            } else if !isAlphanumeric(byte) && byte != UInt8(ascii: "-") && byte != UInt8(ascii: "_") {
                return false
            }
            previous = byte
        }
        return true
    }

    /// Whether `text` is a transaction ID: 1 to 32 ASCII decimal digits.
    public static func isTransactionID(_ text: String) -> Bool {
        let bytes = text.utf8
        return (1...maximumTransactionIDLength).contains(bytes.count)
            && bytes.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}
