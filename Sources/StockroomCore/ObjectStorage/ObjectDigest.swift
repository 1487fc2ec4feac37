/// What Stockroom computed of an object's bytes, kept against its ETag and size: the SHA-256 the
/// catalogue and `Repr-Digest` publish, the CRC-32C of the whole object, and the CRC-32C of each
/// of its blocks, which every byte streamed from the store (a range too) is checked against
/// before it is sent.
public struct ObjectDigest: Sendable, Equatable {
    /// The size of the blocks `blocks` checks: 1 MiB. A range that starts or ends inside a block
    /// reads the whole block from the store (at most 2 MiB more than asked), the gate holds one
    /// block per download, and the list costs 4 bytes a MiB (40 KiB for a 10 GiB object). It is
    /// also the stream's piece size (`ChunkPipe.pieceSize`): a smaller block would cost more
    /// requests' worth of over-read nowhere, a larger one (4 MiB) up to 8 MiB of over-read per
    /// range and 4 MiB more memory per download.
    public static let blockSize = 1 << 20

    /// Lower-case hex.
    public var sha256: String
    public var crc32c: UInt32
    /// The CRC-32C of each `blockSize` block, in order; the last may be shorter.
    public var blocks: [UInt32]

    public init(sha256: String, crc32c: UInt32, blocks: [UInt32]) {
        self.sha256 = sha256
        self.crc32c = crc32c
        self.blocks = blocks
    }

    /// How many blocks an object of `size` bytes has.
    public static func blockCount(size: Int64) -> Int {
        Int((size + Int64(blockSize) - 1) / Int64(blockSize))
    }
}

/// Every digest of one stream of bytes, fed together.
public struct ObjectHasher: ~Copyable {
    private var sha256 = SHA256()
    private var crc32c = CRC32C()
    private var block = CRC32C()
    private var blockFill = 0
    private var blocks: [UInt32] = []

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        sha256.update(bytes)
        crc32c.update(bytes)
        var rest = bytes
        while !rest.isEmpty {
            let count = min(ObjectDigest.blockSize - blockFill, rest.count)
            block.update(UnsafeRawBufferPointer(rebasing: rest[..<count]))
            blockFill += count
            rest = UnsafeRawBufferPointer(rebasing: rest[count...])
            if blockFill == ObjectDigest.blockSize {
                blocks.append(block.value)
                block = CRC32C()
                blockFill = 0
            }
        }
    }

    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public consuming func finalize() -> ObjectDigest {
        if blockFill > 0 { blocks.append(block.value) }
        return ObjectDigest(sha256: ByteEncoding.hex(sha256.finalize()), crc32c: crc32c.value, blocks: blocks)
    }
}
