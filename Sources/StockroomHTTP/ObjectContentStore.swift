import Foundation
import StockroomCore
public import Hummingbird
import Logging
import NIOCore

/// Content kept in a bucket, streamed through Stockroom (`--content-delivery stream`): for buckets
/// that must stay private to the server.
///
/// The object is read in one GET per response (the range asked), with `If-Match` on the ETag the
/// catalogue hashed, through a pipe that holds at most a megabyte: memory stays bounded whatever the
/// object's size, and the slowest side sets the pace (the store's transfer waits for the client).
/// A transfer the store breaks off is asked for again from where it stopped, `attempts` times in a
/// row at most; an object replaced under the catalogue is refused (412), never sent with the old
/// digest. One GET per response, not one per chunk: a store's first byte costs milliseconds (4 ms
/// on SeaweedFS on loopback, tens on S3), which per 1 MiB chunk held a stream to 119 MB/s.
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
        guard head.size == representation.size, representation.objectETag == nil || head.etag == representation.objectETag else {
            heads.forget(key)
            StockroomMetrics.objectStoreError(operation: "head", .changed(key: key))
            logger.warning("an object changed since the catalogue hashed it; the next poll hashes it again", metadata: ["key": .string(key)])
            throw ContentError.changedSinceHashed(key)
        }
        return PreparedContent(absolutePath: key, representation: representation)
    }

    public func write(
        _ content: PreparedContent, range: ClosedRange<Int64>, to writer: inout any ResponseBodyWriter, progress: @Sendable (Int) -> Void
    ) async throws {
        let key = content.absolutePath
        let etag = content.representation.objectETag
        let client = self.client
        // A whole body is hashed on the way, and its last piece withheld until the digest is the
        // one published: a store that sends other bytes never completes a download.
        let hasher: PieceHasher? = range.lowerBound == 0 && range.upperBound == content.representation.size - 1 ? PieceHasher() : nil
        var offset = range.lowerBound
        var withheld: ByteBuffer?
        var failures = 0
        while offset <= range.upperBound {
            // One GET for the rest of the range; the pipe holds at most a megabyte of it, so the
            // store's transfer waits for the slowest reader.
            let pipe = ChunkPipe()
            let rest = offset...range.upperBound
            let transfer = Task { () -> Result<Int64, ObjectStoreError> in
                defer { pipe.finish() }
                do throws(ObjectStoreError) {
                    return .success(try await client.stream(key, range: rest, ifMatch: etag) { pipe.put($0) })
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
                    hasher?.update(piece)
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
        if let hasher, hasher.finish() != content.representation.sha256 {
            StockroomMetrics.objectStoreError(operation: "read", .badAnswer("digest"))
            logger.error(
                "the object store sent bytes whose SHA-256 is not the published one; the download was cut before its end", metadata: ["key": .string(key)])
            throw ContentError.changedSinceHashed(key)
        }
        if let last = withheld {
            try await writer.write(last)
            progress(last.readableBytes)
        }
    }

    private func failure(_ error: ObjectStoreError, key: String, operation: String) -> ContentError {
        // A read that failed makes the remembered good HEAD suspect; a HEAD's own failure stays
        // remembered for a moment, so that a flood is not one HEAD each.
        if operation != "head" { heads.forget(key) }
        StockroomMetrics.objectStoreError(operation: operation, error)
        if case .changed = error {
            logger.warning("an object changed since the catalogue hashed it; the next poll hashes it again", metadata: ["key": .string(key)])
            return .changedSinceHashed(key)
        }
        logger.error("the object store could not give an object", metadata: ["key": .string(key), "operation": .string(operation), "error": "\(error)"])
        return .unavailable(key: key, reason: error.description)
    }
}

/// Between a store transfer's thread and a response's writer: pieces of 256 KiB, at most four
/// waiting; the transfer's thread waits (its `put` blocks) while they are full.
final class ChunkPipe: @unchecked Sendable {
    static let pieceSize = 256 << 10
    static let capacity = 4

    private let condition = NSCondition()
    private var pieces: [ByteBuffer] = []
    private var filling: ByteBuffer?
    /// Pieces the writer is done with, filled again: a fresh 256 KiB allocation is mapped and
    /// unmapped by malloc, and its page faults were a tenth of a stream's CPU.
    private var spare: [ByteBuffer] = []
    private var finished = false
    private var closed = false
    private var reader: CheckedContinuation<ByteBuffer?, Never>?

    /// The transfer's side: false once the reader has gone.
    func put(_ bytes: UnsafeRawBufferPointer) -> Bool {
        condition.lock()
        while pieces.count >= Self.capacity && !closed { condition.wait() }
        guard !closed else {
            condition.unlock()
            return false
        }
        var piece: ByteBuffer
        if let partial = filling {
            piece = partial
        } else if let reused = spare.popLast() {
            // Cleared here, where the list held the last reference: clearing a buffer someone
            // else still holds allocates a new one.
            piece = reused
            piece.clear()
        } else {
            piece = ByteBufferAllocator().buffer(capacity: Self.pieceSize)
        }
        filling = nil
        piece.writeBytes(bytes)
        if piece.readableBytes >= Self.pieceSize {
            pieces.append(piece)
        } else {
            filling = piece
        }
        let handOff = takeForReader()
        condition.unlock()
        if let handOff { handOff.reader.resume(returning: handOff.piece) }
        return true
    }

    /// The transfer ended (whole, cut, or refused).
    func finish() {
        condition.lock()
        if let piece = filling {
            pieces.append(piece)
            filling = nil
        }
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

    /// A piece the writer has sent, to be filled again (if the channel still holds it, filling it
    /// copies, as a new one would).
    func recycle(_ piece: consuming ByteBuffer) {
        condition.lock()
        if spare.count < Self.capacity { spare.append(piece) }
        condition.unlock()
    }

    /// The reader has gone: the transfer's next `put` returns false.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
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

/// SHA-256 over the pieces of a streamed body, fed by one task at a time.
final class PieceHasher: @unchecked Sendable {
    private var hasher: SHA256? = SHA256()

    func update(_ piece: ByteBuffer) {
        piece.withUnsafeReadableBytes { hasher?.update($0) }
    }

    func finish() -> String {
        guard let whole = hasher.take() else { return "" }
        return ByteEncoding.hex(whole.finalize())
    }
}
