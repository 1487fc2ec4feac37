/// One content file as the catalogue hashed it: what ETags, digests and ranges are computed on.
public struct ContentRepresentation: Sendable, Equatable {
    /// Relative to the content folder (or, for a bucket, the key's prefix).
    public var path: String
    public var size: Int64
    /// Lower-case hex SHA-256 of the whole file.
    public var sha256: String
    public var contentType: String
    /// The file's stamp when it was hashed; delivery refuses a file whose stamp has moved.
    public var stamp: FileStamp?
    /// For an object in a bucket, the store's ETag when it was hashed.
    public var objectETag: String?
    /// For an object in a bucket, the CRC-32C computed with the SHA-256.
    public var objectCRC32C: UInt32?
    /// For an object in a bucket, the CRC-32C of each of its `ObjectDigest.blockSize` blocks:
    /// every block streamed (a range too) is checked against its own before a byte of it is sent.
    public var objectBlockCRC32C: [UInt32]?
    /// For an object in a versioned bucket, the version that was hashed: a presigned URL names it,
    /// so a replace after the hash cannot change what the URL serves.
    public var objectVersionID: String?

    public init(
        path: String, size: Int64, sha256: String, contentType: String, stamp: FileStamp? = nil, objectETag: String? = nil,
        objectCRC32C: UInt32? = nil, objectBlockCRC32C: [UInt32]? = nil, objectVersionID: String? = nil
    ) {
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.contentType = contentType
        self.stamp = stamp
        self.objectETag = objectETag
        self.objectCRC32C = objectCRC32C
        self.objectBlockCRC32C = objectBlockCRC32C
        self.objectVersionID = objectVersionID
    }

    /// The strong entity tag: the file's SHA-256, so it changes exactly when the bytes do.
    public var etag: String { "\"\(sha256)\"" }

    /// The `Repr-Digest` field value (RFC 9530) of the whole representation.
    public var reprDigest: String {
        "sha-256=:\(ByteEncoding.base64(Self.bytes(fromHex: sha256))):"
    }

    private static func bytes(fromHex hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var high: UInt8?
        for char in hex.utf8 {
            let nibble: UInt8 =
                switch char {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): char - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): char - UInt8(ascii: "a") + 10
                default: 0
                }
            if let value = high {
                bytes.append(value << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}
