import StockroomCore
public import Hummingbird
import Logging
import NIOCore

/// Content kept in a bucket, streamed through Stockroom (`--content-delivery stream`): for buckets
/// that must stay private to the server.
///
/// The object is read in ranged GETs of `chunkSize`, each with `If-Match` on the ETag the catalogue
/// hashed, one after another as the client takes them: memory stays at one chunk per download
/// whatever the object's size, and the slowest side sets the pace. A chunk cut off by the store
/// is asked for again (from where it stopped) up to `attempts` times; an object replaced under
/// the catalogue is refused (412), never sent with the old digest.
public struct ObjectContentStore: ContentStore {
    /// 1 MiB: one request per MiB costs about 2% on loopback against a store, and 64 downloads
    /// hold 64 MiB.
    public static let defaultChunkSize = 1 << 20

    public let client: S3Client
    public let chunkSize: Int
    public let attempts: Int
    private let heads: ObjectHeads
    private let logger: Logger

    public init(client: S3Client, chunkSize: Int = defaultChunkSize, attempts: Int = 3, logger: Logger = Logger(label: "stockroom.content")) {
        self.client = client
        self.chunkSize = chunkSize
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
        // A whole body is hashed on the way, and its last chunk withheld unless the digest is the
        // one published: a store that sends other bytes never completes a download.
        var hasher: SHA256? = range.lowerBound == 0 && range.upperBound == content.representation.size - 1 ? SHA256() : nil
        var offset = range.lowerBound
        while offset <= range.upperBound {
            let end = min(range.upperBound, offset + Int64(chunkSize) - 1)
            let bytes = try await read(key, range: offset...end, etag: etag)
            hasher?.update(bytes)
            if end == range.upperBound, let whole = hasher.take() {
                let digest = ByteEncoding.hex(whole.finalize())
                guard digest == content.representation.sha256 else {
                    StockroomMetrics.objectStoreError(operation: "read", .badAnswer("digest"))
                    logger.error(
                        "the object store sent bytes whose SHA-256 is not the published one; the download was cut before its end",
                        metadata: ["key": .string(key)])
                    throw ContentError.changedSinceHashed(key)
                }
            }
            try await writer.write(ByteBuffer(bytes: bytes))
            progress(bytes.count)
            offset += Int64(bytes.count)
        }
    }

    /// One chunk, asked for again when the store broke off or failed for a moment.
    private func read(_ key: String, range: ClosedRange<Int64>, etag: String?) async throws -> [UInt8] {
        var attempt = 1
        while true {
            do {
                return try await client.read(key, range: range, ifMatch: etag)
            } catch let error where error.isTransient && attempt < attempts {
                logger.notice("an object read failed; asking again", metadata: ["key": .string(key), "attempt": "\(attempt)", "error": "\(error)"])
                attempt += 1
                try await Task.sleep(for: .milliseconds(100 * attempt))
            } catch {
                throw failure(error, key: key, operation: "read")
            }
        }
    }

    private func failure(_ error: ObjectStoreError, key: String, operation: String) -> ContentError {
        heads.forget(key)
        StockroomMetrics.objectStoreError(operation: operation, error)
        if case .changed = error {
            logger.warning("an object changed since the catalogue hashed it; the next poll hashes it again", metadata: ["key": .string(key)])
            return .changedSinceHashed(key)
        }
        logger.error("the object store could not give an object", metadata: ["key": .string(key), "operation": .string(operation), "error": "\(error)"])
        return .unavailable(key: key, reason: error.description)
    }
}
