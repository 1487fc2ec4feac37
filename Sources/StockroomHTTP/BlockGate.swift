import StockroomCore

/// Between one store transfer and a response: holds each block of the object (1 MiB,
/// `ObjectDigest.blockSize`) until its CRC-32C is the one computed when the object was hashed,
/// then hands on only the part of it the response asked for. A block that fails never reaches
/// the response, not a byte of it; the gate then refuses the rest (`put` answers false) and says
/// which block failed.
///
/// The store is asked for whole blocks (`storeRange`): a range that starts or ends inside a block
/// reads all of it. The block being filled is the gate's only memory: one block per download,
/// reused, filled by the transfer's one thread. A transfer that breaks off mid-block leaves that
/// block unsent; the next transfer (a new gate) reads it again from its start.
final class BlockGate: @unchecked Sendable {
    private let size: Int64
    private let expected: [UInt32]
    private let wanted: ClosedRange<Int64>
    private let downstream: (UnsafeRawBufferPointer) -> Bool
    private let buffer: UnsafeMutableRawBufferPointer
    /// The block being filled, and how much of it has arrived.
    private var block: Int
    private var fill = 0
    /// The block whose CRC-32C was not the one expected, once one was not.
    private(set) var failedBlock: Int?

    /// The whole blocks the store is asked for.
    let storeRange: ClosedRange<Int64>

    /// A gate for the bytes `wanted` of an object of `size` bytes whose blocks have the
    /// CRC-32C `expected`; `downstream` takes what passed (and answers false to stop).
    init(size: Int64, expected: [UInt32], wanted: ClosedRange<Int64>, downstream: @escaping (UnsafeRawBufferPointer) -> Bool) {
        let blockSize = Int64(ObjectDigest.blockSize)
        self.size = size
        self.expected = expected
        self.wanted = wanted
        self.downstream = downstream
        self.block = Int(wanted.lowerBound / blockSize)
        let last = wanted.upperBound / blockSize
        self.storeRange = Int64(block) * blockSize...min((last + 1) * blockSize, size) - 1
        self.buffer = .allocate(byteCount: ObjectDigest.blockSize, alignment: 64)
    }

    deinit { buffer.deallocate() }

    /// The transfer's side: keeps `bytes`, releasing each block as it completes and passes.
    /// False once a block failed or the response stopped taking bytes.
    func put(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard failedBlock == nil else { return false }
        var rest = bytes
        while !rest.isEmpty {
            let length = blockLength(block)
            let count = min(length - fill, rest.count)
            UnsafeMutableRawBufferPointer(rebasing: buffer[fill..<fill + count]).copyMemory(
                from: UnsafeRawBufferPointer(rebasing: rest[..<count]))
            fill += count
            rest = UnsafeRawBufferPointer(rebasing: rest[count...])
            if fill == length, !release() { return false }
        }
        return true
    }

    /// Checks the full block and hands on its wanted part.
    private func release() -> Bool {
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<fill])
        var crc = CRC32C()
        crc.update(bytes)
        guard block < expected.count, crc.value == expected[block] else {
            failedBlock = block
            return false
        }
        let start = Int64(block) * Int64(ObjectDigest.blockSize)
        let low = Int(max(wanted.lowerBound, start) - start)
        let high = Int(min(wanted.upperBound, start + Int64(fill) - 1) - start)
        block += 1
        fill = 0
        guard low <= high else { return true }
        return downstream(UnsafeRawBufferPointer(rebasing: bytes[low...high]))
    }

    private func blockLength(_ index: Int) -> Int {
        Int(min(Int64(ObjectDigest.blockSize), size - Int64(index) * Int64(ObjectDigest.blockSize)))
    }
}
