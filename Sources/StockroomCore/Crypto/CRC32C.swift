import CCRC32C

/// CRC-32C (Castagnoli, the checksum of iSCSI, ext4 and S3's own integrity checks): a check of
/// bytes against accidents on the way, never a proof against someone who chooses them.
///
/// Streaming an object, Stockroom checks each whole body against the CRC-32C it computed beside
/// the SHA-256 it publishes: SHA-256 runs at 1.8 GB/s here, the `crc32` instruction at about
/// twenty, so the check costs a stream little of its speed. The SHA-256 stays what clients
/// verify (`Repr-Digest`).
public struct CRC32C: Sendable, Equatable {
    /// The checksum of the bytes so far.
    public private(set) var value: UInt32 = 0

    public init() {}

    /// Feeds more bytes.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        if Self.hardware {
            value = stockroom_crc32c_update(value, base, bytes.count, Self.block, Self.shift1, Self.shift2)
        } else {
            value = Self.software(value, bytes)
        }
    }

    /// The checksum of `bytes` in one call.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc = CRC32C()
        bytes.withUnsafeBytes { crc.update($0) }
        return crc.value
    }

    /// Eight lower-case hex digits, as kept in the digest cache.
    public var hex: String { Self.hex(value) }

    public static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// Bytes per interleaved block: three run at once, and joining them costs two carry-less
    /// multiplications done bit by bit, so blocks are large beside that.
    static let block = 8 << 10
    static let hardware = stockroom_crc32c_hardware() != 0
    private static let shift1 = stockroom_crc32c_zeros(UInt64(block))
    private static let shift2 = stockroom_crc32c_zeros(UInt64(2 * block))

    /// A byte at a time through a table: machines without the instruction, and the reference the
    /// tests compare the instruction's result with.
    static func software(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var register = ~crc
        for byte in bytes {
            register = table[Int((register ^ UInt32(byte)) & 0xff)] ^ (register >> 8)
        }
        return ~register
    }

    private static let table: [UInt32] = (0..<256).map { index in
        var entry = UInt32(index)
        for _ in 0..<8 { entry = entry & 1 == 1 ? (entry >> 1) ^ 0x82f6_3b78 : entry >> 1 }
        return entry
    }
}
