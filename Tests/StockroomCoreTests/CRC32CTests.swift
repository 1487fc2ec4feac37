import Testing

@testable import StockroomCore

@Suite struct CRC32CTests {
    /// RFC 3720 (iSCSI), appendix B.4, and the usual check value of "123456789".
    @Test func publishedCheckValues() {
        #expect(CRC32C.checksum(Array(repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum(Array(repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum(Array(0..<32)) == 0x46DD_794E)
        #expect(CRC32C.checksum(Array((0..<32).reversed())) == 0x113F_DB5C)
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        var crc = CRC32C()
        Array("123456789".utf8).withUnsafeBytes { crc.update($0) }
        #expect(crc.hex == "e3069283")
    }

    /// The instruction's three interleaved blocks, joined, give the table's answer: every length
    /// around the block sizes, from every alignment, fed whole or in uneven pieces.
    @Test func theInstructionAgreesWithTheTable() throws {
        try #require(CRC32C.hardware, "this machine has no crc32 instruction; the table alone runs")
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<(7 * CRC32C.block + 100)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let lengths = [
            0, 1, 7, 8, 9, 63, 3 * CRC32C.block - 1, 3 * CRC32C.block, 3 * CRC32C.block + 1, 6 * CRC32C.block + 13, 7 * CRC32C.block,
        ]
        bytes.withUnsafeBytes { all in
            for start in 0..<9 {
                for length in lengths where start + length <= all.count {
                    let slice = UnsafeRawBufferPointer(rebasing: all[start..<(start + length)])
                    var whole = CRC32C()
                    whole.update(slice)
                    #expect(whole.value == CRC32C.software(0, slice), "start \(start), length \(length)")
                    var pieces = CRC32C()
                    var offset = 0
                    for step in [5, CRC32C.block * 3 + 3, 16 << 10, 1] where offset < length {
                        let end = min(length, offset + step)
                        pieces.update(UnsafeRawBufferPointer(rebasing: slice[offset..<end]))
                        offset = end
                    }
                    pieces.update(UnsafeRawBufferPointer(rebasing: slice[offset..<length]))
                    #expect(pieces.value == whole.value, "start \(start), length \(length), in pieces")
                }
            }
        }
    }

    @Test func oneFlippedBitChangesTheChecksum() {
        var bytes = Array(repeating: UInt8(0x5A), count: 100_000)
        let clean = CRC32C.checksum(bytes)
        for index in [0, 4_095, 50_000, 99_999] {
            bytes[index] ^= 0x10
            #expect(CRC32C.checksum(bytes) != clean)
            bytes[index] ^= 0x10
        }
    }
}
