/// The `X-Accel-Redirect` value that names a content file to nginx: the internal prefix, then
/// the file's path inside the content folder, percent-encoded.
///
/// nginx decodes the value once (`ngx_http_parse_unsafe_uri`) and splits it at a raw `?`, so
/// every byte outside the unreserved set and `/` is encoded: `?`, `%`, `#`, spaces and non-ASCII
/// bytes reach the file system as they are. The path comes from the catalogue, already jailed.
public enum AccelRedirect {
    /// `prefix` + the encoded `relativePath`; nil for a path nginx cannot be given (empty,
    /// absolute, a NUL byte, or a `.` or `..` segment, which the jail never hands out).
    public static func target(prefix: String, relativePath: String) -> String? {
        let bytes = Array(relativePath.utf8)
        guard !bytes.isEmpty, bytes.count <= 4096, bytes.first != UInt8(ascii: "/"), !bytes.contains(0) else { return nil }
        let segments = relativePath.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else { return nil }
        var encoded = prefix
        encoded.reserveCapacity(prefix.utf8.count + bytes.count * 3)
        for byte in bytes {
            if isKept(byte) {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                encoded += "%" + String(hexDigits[Int(byte >> 4)]) + String(hexDigits[Int(byte & 0x0f)])
            }
        }
        return encoded
    }

    /// The path of `absolutePath` inside the folder `root` (both symlink-free), or nil when it
    /// is not inside.
    public static func relativePath(of absolutePath: String, inside root: String) -> String? {
        let folder = Array((root.hasSuffix("/") ? root : root + "/").utf8)
        let path = Array(absolutePath.utf8)
        guard path.count > folder.count, path.starts(with: folder) else { return nil }
        return String(decoding: path[folder.count...], as: UTF8.self)
    }

    private static let hexDigits: [Character] = Array("0123456789ABCDEF")

    /// RFC 3986's unreserved characters, and `/` between segments.
    private static func isKept(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
            true
        default: false
        }
    }
}
