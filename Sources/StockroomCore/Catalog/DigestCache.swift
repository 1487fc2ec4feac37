import Foundation
import Logging
import Synchronization

/// SHA-256 digests of content files, keyed by path and valid while the file's stamp (size,
/// modification time, inode) is unchanged, so restarts and reloads skip re-hashing; and of
/// objects in a bucket (with their CRC-32C), keyed by `s3://bucket/key` and valid while its size
/// and ETag are.
///
/// Kept in a JSON file written atomically (temp file + rename), its folder made when missing (a
/// first start on PostgreSQL has no `.stockroom` yet); a missing or unreadable cache file only
/// means hashing again, and a file that cannot be written is logged at error and counted
/// (`stockroom_digest_cache_write_failures_total`): every restart would hash (for a bucket,
/// download) everything again.
public final class DigestCache: Sendable {
    private struct Entry: Codable, Equatable {
        var stamp: FileStamp?
        /// An object's size and the store's ETag, for an object's entry.
        var object: S3Client.Head?
        var sha256: String
        /// An object's CRC-32C, lower-case hex; an object's entry without one is hashed again.
        var crc32c: String?
        /// The CRC-32C of each of an object's `ObjectDigest.blockSize` blocks, eight lower-case
        /// hex digits each; an object's entry without them (written before ranges were checked)
        /// is hashed again.
        var blocks: String?
    }

    private let file: String?
    private let logger: Logger
    private let entries: Mutex<[String: Entry]>
    /// Whether `entries` differs from the cache file.
    private let dirty = Mutex(false)

    /// A cache backed by `file`, or in memory only when `file` is nil.
    public init(file: String?, logger: Logger = Logger(label: "stockroom.catalog")) {
        self.file = file
        self.logger = logger
        var loaded: [String: Entry] = [:]
        if let file, let data = FileManager.default.contents(atPath: file),
            let decoded = try? JSONDecoder().decode([String: Entry].self, from: data)
        {
            loaded = decoded
        }
        self.entries = Mutex(loaded)
    }

    /// The digest of the file at `absolutePath`, from the cache when its stamp still matches,
    /// else computed by reading the file in 1 MiB chunks. Blocking: call off the event loop.
    public func digest(ofFileAt absolutePath: String, stamp: FileStamp) throws -> String {
        if let entry = entries.withLock({ $0[absolutePath] }), entry.stamp == stamp {
            return entry.sha256
        }
        let digest = try Self.hashFile(at: absolutePath)
        entries.withLock { $0[absolutePath] = Entry(stamp: stamp, object: nil, sha256: digest) }
        dirty.withLock { $0 = true }
        return digest
    }

    /// The digests Stockroom computed of the object `address` (`s3://bucket/key`) when it had `head`.
    public func digest(ofObject address: String, head: S3Client.Head) -> ObjectDigest? {
        guard let entry = entries.withLock({ $0[address] }), entry.object == head,
            let crc = entry.crc32c.flatMap({ UInt32($0, radix: 16) }),
            let blocks = entry.blocks.flatMap(Self.blocks(fromHex:)), blocks.count == ObjectDigest.blockCount(size: head.size)
        else {
            return nil
        }
        return ObjectDigest(sha256: entry.sha256, crc32c: crc, blocks: blocks)
    }

    /// Keeps the digests Stockroom computed of the object `address` as it was at `head`.
    public func remember(object address: String, head: S3Client.Head, digest: ObjectDigest) {
        let entry = Entry(
            stamp: nil, object: head, sha256: digest.sha256, crc32c: CRC32C.hex(digest.crc32c),
            blocks: digest.blocks.map(CRC32C.hex).joined())
        let changed = entries.withLock { entries in
            defer { entries[address] = entry }
            return entries[address] != entry
        }
        if changed { dirty.withLock { $0 = true } }
    }

    /// Writes the cache file with every digest it holds (a command that added one and must not
    /// drop the others: `content push`).
    public func saveAll() throws {
        let snapshot = entries.withLock { $0 }
        guard let file, dirty.withLock({ $0 }) else { return }
        try Self.write(snapshot, to: file)
        dirty.withLock { $0 = false }
    }

    /// Writes the cache file, keeping only `paths` (the files the catalogue still lists);
    /// does nothing when no digest was added or dropped since the last write. A failure is logged
    /// at error and counted, and the next load tries again.
    public func save(keeping paths: Set<String>) {
        let snapshot = entries.withLock { entries in
            let kept = entries.filter { paths.contains($0.key) }
            if kept.count != entries.count { dirty.withLock { $0 = true } }
            entries = kept
            return entries
        }
        guard let file, dirty.withLock({ $0 }) else { return }
        do {
            try Self.write(snapshot, to: file)
            dirty.withLock { $0 = false }
        } catch {
            StockroomMetrics.digestCacheWriteFailed()
            logger.error(
                "the digest cache could not be written: every restart hashes the content again (for a bucket, downloads it)",
                metadata: ["file": .string(file), "error": "\(error)"])
        }
    }

    private static func write(_ snapshot: [String: Entry], to file: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let folder = URL(fileURLWithPath: file).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try AtomicFile.write(try encoder.encode(snapshot), to: file)
    }

    private static func blocks(fromHex text: String) -> [UInt32]? {
        let digits = Array(text.utf8)
        guard digits.count % 8 == 0 else { return nil }
        var blocks: [UInt32] = []
        blocks.reserveCapacity(digits.count / 8)
        for start in stride(from: 0, to: digits.count, by: 8) {
            guard let value = UInt32(String(decoding: digits[start..<start + 8], as: UTF8.self), radix: 16) else { return nil }
            blocks.append(value)
        }
        return blocks
    }

    /// Lower-case hex SHA-256 of a file, read in bounded memory.
    public static func hashFile(at path: String) throws -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path])
        }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            chunk.withUnsafeBytes { hasher.update($0) }
        }
        return ByteEncoding.hex(hasher.finalize())
    }
}
