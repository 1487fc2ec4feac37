/// A check made before Foundation parses any JSON that comes from outside.
///
/// Foundation's parser (6.3) traps while it builds the error for input nested past its limit of
/// 512: a request body of 513 `[` stopped the server with SIGILL, and the catalogue fuzzer found
/// the same. Nothing Stockroom reads nests more than a few levels, so deeper input is refused
/// before Foundation sees it, as malformed.
///
/// StockroomKit compiles this same file (`Sources/StockroomKit/Support/JSONNesting.swift` is a
/// link to it): an app reads the server's answers and catalogue through the same check, and the
/// library still depends on nothing. `package`, so neither module shows it to the outside.
package enum JSONNesting {
    /// Far above any document Stockroom reads (4 levels or so), far below Foundation's 512.
    package static let limit = 32

    /// Whether `bytes` nests arrays and objects at most `limit` deep, counting brackets outside
    /// strings. Linear, with no allocation; malformed input that is shallow passes, and is left
    /// to the parser to refuse.
    package static func isShallow(_ bytes: some Sequence<UInt8>, limit: Int = JSONNesting.limit) -> Bool {
        // Called across modules the generic body runs unspecialised, a witness call per byte;
        // contiguous bytes (Data, ByteBuffer views, arrays) go through the specialised scan.
        if let shallow = bytes.withContiguousStorageIfAvailable({ scan($0, limit: limit) }) {
            return shallow
        }
        return scan(bytes, limit: limit)
    }

    private static func scan(_ bytes: some Sequence<UInt8>, limit: Int) -> Bool {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > limit { return false }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return true
    }
}
