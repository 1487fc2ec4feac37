/// What Stockroom computed of an object's bytes, kept against its ETag and size: the SHA-256 the
/// catalogue and `Repr-Digest` publish, and the CRC-32C a streamed body is checked against.
public struct ObjectDigest: Sendable, Equatable {
    /// Lower-case hex.
    public var sha256: String
    public var crc32c: UInt32

    public init(sha256: String, crc32c: UInt32) {
        self.sha256 = sha256
        self.crc32c = crc32c
    }
}

/// Both digests of one stream of bytes, fed together.
public struct ObjectHasher: ~Copyable {
    private var sha256 = SHA256()
    private var crc32c = CRC32C()

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        sha256.update(bytes)
        crc32c.update(bytes)
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public consuming func finalize() -> ObjectDigest {
        ObjectDigest(sha256: ByteEncoding.hex(sha256.finalize()), crc32c: crc32c.value)
    }
}
