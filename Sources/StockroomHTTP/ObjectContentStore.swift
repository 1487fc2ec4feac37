import Foundation
import StockroomCore
public import Hummingbird
import Logging
import NIOCore

/// Content kept in a bucket, streamed through Stockroom (`--content-delivery stream`): for buckets
/// that must stay private to the server.
///
/// The object is read in one GET per response (the range asked, widened to whole blocks), with
/// `If-Match` on the ETag the catalogue hashed. On a live connection the store transfer's thread
/// writes it below Hummingbird's writer (`DirectStream`, 7 MiB at most per download with the block
/// being checked); without one, through a pipe to Hummingbird's writer (`ChunkPipe`). Either way
/// memory stays bounded whatever the object's size, and the slowest side sets the pace (the
/// store's transfer waits for the client).
///
/// Every byte is checked before it is sent, in ranges too: the store is asked for whole 1 MiB
/// blocks, and each block's CRC-32C must be the one computed when the object was hashed
/// (`BlockGate`); a block that fails ends the response with `ContentError.changedSinceHashed`,
/// and not a byte of it is sent. A transfer the store breaks off is asked for again from the start
/// of the block it stopped in, `attempts` times in a row at most; an object replaced under the
/// catalogue is refused (412), never sent with the old digest. One GET per response, not one per
/// chunk: a store's first byte costs milliseconds (4 ms on SeaweedFS on loopback, tens on S3),
/// which per 1 MiB chunk held a stream to 119 MB/s.
public struct ObjectContentStore: ContentStore {
    public let client: S3Client
    public let attempts: Int
    private let heads: ObjectHeads
    private let logger: Logger

    public init(client: S3Client, attempts: Int = 3, logger: Logger = Logger(label: "stockroom.content")) {
        self.client = client
        self.attempts = attempts
        self.heads = ObjectHeads(client: client)
        self.logger = logger
    }

    /// Checks with a HEAD (shared by concurrent downloads, `ObjectHeads`) that the object is still
    /// the one hashed.
    public func prepare(_ representation: ContentRepresentation) async throws -> PreparedContent {
        let key = representation.path
        let head: S3Client.Head
        do {
            head = try await heads.head(key)
        } catch {
            throw failure(error, key: key, operation: "head")
        }
        // An object the catalogue has not hashed (no ETag, no block CRC-32C to check its bytes
        // against) is never streamed.
        guard head.size == representation.size, let etag = representation.objectETag, head.etag == etag,
            representation.objectBlockCRC32C?.count == ObjectDigest.blockCount(size: representation.size)
        else {
            heads.forget(key)
            StockroomMetrics.objectStoreError(operation: "head", .changed(key: key))
            logger.warning(
                "an object changed since the catalogue hashed it; the next poll hashes it again", metadata: ["key": .string(key)])
            throw ContentError.changedSinceHashed(key)
        }
        return PreparedContent(absolutePath: key, representation: representation)
    }

    public func write(
        _ content: PreparedContent, range: ClosedRange<Int64>, to writer: inout any ResponseBodyWriter, direct: DirectBody?,
        progress: @escaping @Sendable (Int) -> Void
    ) async throws {
        let key = content.absolutePath
        let etag = content.representation.objectETag
        let client = self.client
        // Each block against the CRC-32C computed with the published SHA-256, before a byte of it
        // is sent (SHA-256 here held a stream to half the speed of a plain copy on two cores; the
        // client checks the SHA-256 of a whole body itself, and cannot check a range's).
        let blocks = Blocks(size: content.representation.size, expected: content.representation.objectBlockCRC32C ?? [])
        if let direct {
            try await write(key, etag: etag, range: range, blocks: blocks, through: DirectStream(direct: direct, progress: progress))
            return
        }
        var offset = range.lowerBound
        var withheld: ByteBuffer?
        var failures = 0
        while offset <= range.upperBound {
            // One GET for the rest of the range; the pipe holds at most a megabyte of it, so the
            // store's transfer waits for the slowest reader.
            let pipe = ChunkPipe()
            let gate = blocks.gate(offset...range.upperBound) { pipe.put($0) }
            let transfer = Task { () -> Result<Int64, ObjectStoreError> in
                defer { pipe.finish() }
                do throws(ObjectStoreError) {
                    return .success(try await client.stream(key, range: gate.storeRange, ifMatch: etag) { gate.put($0) })
                } catch {
                    return .failure(error)
                }
            }
            let before = offset
            do {
                while let piece = await pipe.next() {
                    // The transfer stops at the range's end; this is the second lock on that door.
                    guard offset + Int64(piece.readableBytes) <= range.upperBound + 1 else {
                        throw failure(.badAnswer("more bytes than the range asked"), key: key, operation: "read")
                    }
                    if let previous = withheld.take() {
                        let count = previous.readableBytes
                        try await writer.write(previous)
                        progress(count)
                        pipe.recycle(consume previous)
                    }
                    withheld = piece
                    offset += Int64(piece.readableBytes)
                }
            } catch {
                pipe.close()  // the client went away: the store's transfer stops too
                _ = await transfer.value
                throw error
            }
            let outcome = await transfer.value
            try refuseUnless(gate, key: key)
            if case .failure(let error) = outcome, !error.isTransient || failures + 1 >= attempts {
                throw failure(error, key: key, operation: "read")
            }
            if offset <= range.upperBound {
                // The store broke off (or failed for a moment): ask for the rest, a few times in a
                // row at most.
                failures = offset > before ? 0 : failures + 1
                guard failures < attempts else {
                    throw failure(.unavailable("the store broke off \(attempts) times without a byte"), key: key, operation: "read")
                }
                logger.notice("an object read broke off; asking for the rest", metadata: ["key": .string(key), "offset": "\(offset)"])
                try await Task.sleep(for: .milliseconds(100 * (failures + 1)))
            }
        }
        if let last = withheld {
            try await writer.write(last)
            progress(last.readableBytes)
        }
    }

    /// On a live connection: the store transfer's thread writes each piece straight to the channel
    /// (`DirectStream`), so no task stands between the two threads that touch the bytes.
    private func write(_ key: String, etag: String?, range: ClosedRange<Int64>, blocks: Blocks, through stream: DirectStream)
        async throws
    {
        do {
            let client = self.client
            var offset = range.lowerBound
            var failures = 0
            while offset <= range.upperBound {
                let before = offset
                // A transfer abandoned by its deadline may still have a thread in `put`: each
                // transfer has its own number, and an earlier one's bytes are refused.
                let transfer = stream.beginTransfer()
                let gate = blocks.gate(offset...range.upperBound) { stream.put($0, transfer: transfer) }
                let outcome: Result<Int64, ObjectStoreError>
                do throws(ObjectStoreError) {
                    outcome = .success(try await client.stream(key, range: gate.storeRange, ifMatch: etag) { gate.put($0) })
                } catch {
                    outcome = .failure(error)
                }
                if let gone = stream.failure { throw gone }  // the client went away
                try refuseUnless(gate, key: key)
                offset = range.lowerBound + stream.accepted
                if case .failure(let error) = outcome, !error.isTransient || failures + 1 >= attempts {
                    throw failure(error, key: key, operation: "read")
                }
                if offset <= range.upperBound {
                    failures = offset > before ? 0 : failures + 1
                    guard failures < attempts else {
                        throw failure(.unavailable("the store broke off \(attempts) times without a byte"), key: key, operation: "read")
                    }
                    logger.notice("an object read broke off; asking for the rest", metadata: ["key": .string(key), "offset": "\(offset)"])
                    try await Task.sleep(for: .milliseconds(100 * (failures + 1)))
                }
            }
            _ = stream.beginTransfer()  // none after the last
            try await stream.settle()
            try await stream.sendRest()
        } catch {
            // The response fails, and with it the connection: close it now, so the pieces it
            // holds fail at once, and every piece it confirmed is counted before the record.
            stream.abandon()
            try? await stream.settle()
            throw error
        }
    }

    /// Throws (and says so) when a block's CRC-32C was not the one computed with the digest.
    private func refuseUnless(_ gate: BlockGate, key: String) throws {
        guard let block = gate.failedBlock else { return }
        heads.forget(key)
        StockroomMetrics.objectStoreError(operation: "read", .badAnswer("checksum"))
        logger.error(
            """
            the object store sent bytes whose CRC-32C is not the one computed with the published SHA-256; none of them was sent and \
            the response was cut
            """,
            metadata: ["key": .string(key), "block": "\(block)"])
        throw ContentError.changedSinceHashed(key)
    }

    /// An object's size and block CRC-32C, which make the gate of each transfer.
    private struct Blocks {
        let size: Int64
        let expected: [UInt32]

        func gate(_ wanted: ClosedRange<Int64>, downstream: @escaping (UnsafeRawBufferPointer) -> Bool) -> BlockGate {
            BlockGate(size: size, expected: expected, wanted: wanted, downstream: downstream)
        }
    }

    private func failure(_ error: ObjectStoreError, key: String, operation: String) -> ContentError {
        // A read that failed makes the remembered good HEAD suspect; a HEAD's own failure stays
        // remembered for a moment, so that a flood is not one HEAD each.
        if operation != "head" { heads.forget(key) }
        StockroomMetrics.objectStoreError(operation: operation, error)
        if case .changed = error {
            logger.warning(
                "an object changed since the catalogue hashed it; the next poll hashes it again", metadata: ["key": .string(key)])
            return .changedSinceHashed(key)
        }
        logger.error(
            "the object store could not give an object",
            metadata: ["key": .string(key), "operation": .string(operation), "error": "\(error)"])
        return .unavailable(key: key, reason: error.description)
    }
}

/// Between a store transfer's thread and a response's writer: pieces of 1 MiB, at most two
/// waiting; the transfer's thread waits (its `put` blocks) while they are full.
///
/// libcurl hands the transfer 16 KiB at a time. Those are copied into the piece being filled by the
/// transfer's thread alone, outside the lock, which is taken once per piece, not once per 16 KiB.
/// A piece is also the unit of every hand-off between threads (the transfer's, a task's, the event
/// loop's), so larger pieces are fewer wake-ups: 256 KiB cost 22,000 context switches a GiB, 512 KiB
/// 6,300 and 0.65 CPU-seconds, 1 MiB 2,900-3,800 and 0.57.
/// Pieces the writer has sent come back to be filled again, but only once the channel has let go
/// of them: filling a buffer the channel still holds copies it into fresh memory, and a fresh
/// piece is mapped by malloc, faulted in a page at a time and unmapped, which cost a fifth of a
/// stream's CPU.
final class ChunkPipe: @unchecked Sendable {
    static let pieceSize = 1 << 20
    static let capacity = 2
    /// Sent pieces kept for filling again: the ones in the channel's hands and the ones free.
    static let spares = 6

    private let condition = NSCondition()
    // Under the lock:
    private var pieces: [ByteBuffer] = []
    private var spare: [ByteBuffer] = []
    private var finished = false
    private var closed = false
    private var reader: CheckedContinuation<ByteBuffer?, Never>?
    // The transfer's thread alone (and `finish`, which runs after its last `put`):
    private var filling: ByteBuffer?

    /// The transfer's side: false once the reader has gone.
    func put(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var rest = bytes
        while !rest.isEmpty {
            var piece: ByteBuffer
            if let partial = filling.take() {
                piece = partial
            } else if let empty = takeSpare() {
                piece = empty
            } else {
                piece = ByteBufferAllocator().buffer(capacity: Self.pieceSize)
            }
            let count = min(Self.pieceSize - piece.readableBytes, rest.count)
            piece.writeBytes(UnsafeRawBufferPointer(rebasing: rest[..<count]))
            rest = UnsafeRawBufferPointer(rebasing: rest[count...])
            if piece.readableBytes < Self.pieceSize {
                filling = piece
            } else if !hand(piece) {
                return false
            }
        }
        return true
    }

    /// The transfer ended (whole, cut, or refused).
    func finish() {
        let last = filling.take()
        condition.lock()
        if let last, last.readableBytes > 0 { pieces.append(last) }
        finished = true
        let handOff = takeForReader()
        condition.unlock()
        if let handOff { handOff.reader.resume(returning: handOff.piece) }
    }

    /// The reader's side: the next piece, or nil once the transfer ended and all were read.
    func next() async -> ByteBuffer? {
        await withCheckedContinuation { continuation in
            condition.lock()
            if !pieces.isEmpty {
                let piece = pieces.removeFirst()
                condition.signal()
                condition.unlock()
                continuation.resume(returning: piece)
            } else if finished {
                condition.unlock()
                continuation.resume(returning: nil)
            } else {
                reader = continuation
                condition.unlock()
            }
        }
    }

    /// A piece the writer has sent, to be filled again once the channel has let go of it.
    func recycle(_ piece: consuming ByteBuffer) {
        condition.lock()
        if spare.count < Self.spares { spare.append(piece) }
        condition.unlock()
    }

    /// The reader has gone: the transfer's next `put` returns false.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// A full piece for the reader; waits while four are waiting.
    private func hand(_ piece: ByteBuffer) -> Bool {
        condition.lock()
        while pieces.count >= Self.capacity && !closed { condition.wait() }
        guard !closed else {
            condition.unlock()
            return false
        }
        pieces.append(piece)
        let handOff = takeForReader()
        condition.unlock()
        if let handOff { handOff.reader.resume(returning: handOff.piece) }
        return true
    }

    /// The oldest sent piece the channel no longer holds, emptied; nil when each is still held.
    private func takeSpare() -> ByteBuffer? {
        condition.lock()
        defer { condition.unlock() }
        for index in spare.indices {
            // Cleared only where this list holds the last reference: clearing a shared buffer
            // allocates.
            if spare[index].modifyIfUniquelyOwned({ $0.clear() }) != nil { return spare.remove(at: index) }
        }
        return nil
    }

    /// A waiting reader and what to give it, under the lock.
    private func takeForReader() -> (reader: CheckedContinuation<ByteBuffer?, Never>, piece: ByteBuffer?)? {
        guard let waiting = reader else { return nil }
        if !pieces.isEmpty {
            reader = nil
            let piece = pieces.removeFirst()
            condition.signal()
            return (waiting, piece)
        }
        if finished {
            reader = nil
            return (waiting, nil)
        }
        return nil
    }
}

/// Stream mode on a live connection (`DirectBody`): the store transfer's thread copies libcurl's
/// bytes into 1 MiB pieces and writes each full piece straight to the channel, waiting while
/// two are unconfirmed; the event loop confirms a piece once the socket took it, and the piece is
/// then filled again (no fresh memory, no page faults). The last piece is withheld until the
/// transfer ended. At most four pieces (4 MiB) in use per download, two
/// with the channel, the one withheld, the one filling, and two confirmed ones kept for filling:
/// 6 MiB, the gate's block being checked (`BlockGate`, 1 MiB), and libcurl's own 1 MiB buffer.
final class DirectStream: @unchecked Sendable {
    private let direct: DirectBody
    private let progress: @Sendable (Int) -> Void

    /// Everything below is under it; `put` holds it but while it waits. The confirmations run on
    /// the event loop, never on the thread that registered them (NIO hops), so writing a piece
    /// under it cannot deadlock.
    private let condition = NSCondition()
    private var transfer = 0
    private var unconfirmed = 0
    private var writeFailure: (any Error)?
    /// Pieces written and not yet confirmed, oldest first (the channel confirms in order).
    private var sent: [ByteBuffer] = []
    private var spare: [ByteBuffer] = []
    private var drained: CheckedContinuation<Void, Never>?
    private var filling: ByteBuffer?
    /// Full pieces checked and not yet written, in order: the last is withheld until the end. A
    /// transfer refused midway leaves its pieces here for the next.
    private var unsent: [ByteBuffer] = []
    private var acceptedBytes: Int64 = 0

    init(direct: DirectBody, progress: @escaping @Sendable (Int) -> Void) {
        self.direct = direct
        self.progress = progress
    }

    /// Why the channel refused a piece (the client went away), once it did.
    var failure: (any Error)? { condition.withLock { writeFailure } }

    /// Bytes the transfers handed on, all of them.
    var accepted: Int64 { condition.withLock { acceptedBytes } }

    /// Numbers a new transfer; `put` refuses any other's bytes from now on.
    func beginTransfer() -> Int {
        condition.lock()
        defer { condition.unlock() }
        transfer += 1
        condition.broadcast()
        return transfer
    }

    /// The transfer's side: false once a write failed, or for a transfer no longer current.
    func put(_ bytes: UnsafeRawBufferPointer, transfer current: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        var rest = bytes
        while !rest.isEmpty {
            guard current == transfer, writeFailure == nil else { return false }
            var piece = filling.take() ?? takeSpare() ?? ByteBufferAllocator().buffer(capacity: ChunkPipe.pieceSize)
            let count = min(ChunkPipe.pieceSize - piece.readableBytes, rest.count)
            piece.writeBytes(UnsafeRawBufferPointer(rebasing: rest[..<count]))
            rest = UnsafeRawBufferPointer(rebasing: rest[count...])
            acceptedBytes += Int64(count)
            if piece.readableBytes < ChunkPipe.pieceSize {
                filling = piece
                continue
            }
            unsent.append(piece)
            while unsent.count > 1 {
                guard send(unsent[0], transfer: current) else { return false }
                unsent.removeFirst()
            }
        }
        return true
    }

    /// Closes the connection (a failed response): what it holds fails at once.
    func abandon() {
        direct.close()
    }

    /// Waits until every piece written is confirmed; throws the channel's refusal.
    func settle() async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if unconfirmed == 0 {
                condition.unlock()
                continuation.resume()
            } else {
                drained = continuation
                condition.unlock()
            }
        }
        if let failure { throw failure }
    }

    /// The withheld piece and the last one, once checked.
    func sendRest() async throws {
        let rest = condition.withLock {
            defer { unsent = [] }
            return (unsent + [filling.take()].compactMap { $0 }).filter { $0.readableBytes > 0 }
        }
        let written = rest.map { (direct.write(.byteBuffer($0)), $0.readableBytes) }
        for (future, count) in written {
            try await future.get()
            progress(count)
        }
    }

    /// Writes `piece`, first waiting while two are unconfirmed; false once a write failed or the
    /// transfer is no longer current. Called with the lock held.
    private func send(_ piece: ByteBuffer, transfer current: Int) -> Bool {
        while unconfirmed >= 2 && writeFailure == nil && current == transfer { condition.wait() }
        guard writeFailure == nil, current == transfer else { return false }
        unconfirmed += 1
        sent.append(piece)
        let count = piece.readableBytes
        let written = direct.write(.byteBuffer(piece))
        // The callback holds no piece: a confirmed one is moved from `sent` to `spare`, so that
        // `spare` holds its last reference.
        written.whenComplete { [self] result in
            condition.lock()
            unconfirmed -= 1
            switch result {
            case .success:
                if spare.count < 2 { spare.append(sent.removeFirst()) } else { sent.removeFirst() }
            case .failure(let error):
                sent.removeFirst()
                if writeFailure == nil { writeFailure = error }
            }
            let waiter = unconfirmed == 0 ? drained.take() : nil
            condition.broadcast()
            condition.unlock()
            if case .success = result { progress(count) }
            waiter?.resume()
        }
        return true
    }

    /// A confirmed piece no one else holds, emptied. Called with the lock held.
    private func takeSpare() -> ByteBuffer? {
        for index in spare.indices where spare[index].modifyIfUniquelyOwned({ $0.clear() }) != nil {
            return spare.remove(at: index)
        }
        return nil
    }
}
