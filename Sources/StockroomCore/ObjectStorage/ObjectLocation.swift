/// Where content lives in an object store: `s3://BUCKET/PREFIX`, as `--content` and `--catalog`
/// name it. The prefix is empty or ends with `/`; a catalogue's `file` names a key under it.
public struct ObjectLocation: Sendable, Hashable, CustomStringConvertible {
    public let bucket: String
    public let prefix: String

    public init(bucket: String, prefix: String) throws(ObjectLocationError) {
        guard Self.isValidBucket(bucket) else { throw .bucket(bucket) }
        var prefix = prefix
        while prefix.hasPrefix("/") { prefix.removeFirst() }
        if !prefix.isEmpty, !prefix.hasSuffix("/") { prefix += "/" }
        guard prefix.isEmpty || ObjectKey.isValid(String(prefix.dropLast())) else { throw .prefix(prefix) }
        self.bucket = bucket
        self.prefix = prefix
    }

    /// `s3://BUCKET` or `s3://BUCKET/PREFIX`; nil when `text` is not an `s3://` address at all.
    public init?(parsing text: String) throws(ObjectLocationError) {
        guard text.hasPrefix("s3://") else { return nil }
        let rest = text.dropFirst(5)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        try self.init(bucket: String(rest[..<slash]), prefix: slash == rest.endIndex ? "" : String(rest[rest.index(after: slash)...]))
    }

    /// The key of `file` (a catalogue entry's `file`, checked by `ObjectKey.isValid`) under the prefix.
    public func key(_ file: String) -> String { prefix + file }

    public var description: String { "s3://\(bucket)/\(prefix)" }

    /// S3's rules for a bucket name: 3–63 lower-case letters, digits, `-` and `.`, beginning and
    /// ending with a letter or digit, no `..`.
    public static func isValidBucket(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (3...63).contains(bytes.count), !name.contains("..") else { return false }
        let isAlphanumeric = { (byte: UInt8) in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        guard isAlphanumeric(bytes.first!), isAlphanumeric(bytes.last!) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }
}

/// The rules for an object key Stockroom reads or writes: 1–512 bytes of letters, digits and
/// `- _ . / + = , @ ~ !`, segments split by `/`, none empty, `.` or `..`. Narrower than S3's own
/// (any UTF-8), so that a key is the same text on every store, in a URL, a log and a signature.
public enum ObjectKey {
    public static func isValid(_ key: String) -> Bool {
        let bytes = Array(key.utf8)
        guard (1...512).contains(bytes.count) else { return false }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                continue
            case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "/"), UInt8(ascii: "+"), UInt8(ascii: "="),
                UInt8(ascii: ","), UInt8(ascii: "@"), UInt8(ascii: "~"), UInt8(ascii: "!"):
                continue
            default:
                return false
            }
        }
        return key.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
    }
}

/// Why an `s3://` address was refused.
public enum ObjectLocationError: Error, Equatable, CustomStringConvertible {
    case bucket(String)
    case prefix(String)

    public var description: String {
        switch self {
        case .bucket(let name):
            """
            the bucket \"\(name)\" is not a valid S3 bucket name (3–63 lower-case letters, digits, - and ., starting and ending with \
            a letter or digit)
            """
        case .prefix(let prefix):
            "the prefix \"\(prefix)\" is not a valid key prefix (letters, digits and - _ . / + = , @ ~ !, no empty, . or .. segment)"
        }
    }
}
