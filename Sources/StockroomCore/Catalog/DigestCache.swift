import Foundation
import Synchronization

/// SHA-256 digests of content files, keyed by path and valid while the file's stamp (size,
/// modification time, inode) is unchanged, so restarts and reloads skip re-hashing; and of
/// objects in a bucket (with their CRC-32C), keyed by `s3://bucket/key` and valid while its size
/// and ETag are.
///
/// Kept in a JSON file written atomically (temp file + rename); a missing or unreadable cache
/// file only means hashing again.
public final class DigestCache: Sendable {
    private struct Entry: Codable, Equatable {
        var stamp: FileStamp?
        /// An object's size and the store's ETag, for an object's entry.
        var object: S3Client.Head?
        var sha256: String
        /// An object's CRC-32C, lower-case hex; an object's entry without one is hashed again.
        var crc32c: String?
    }

    private let file: String?
    private let entries: Mutex<[String: Entry]>
    /// Whether `entries` differs from the cache file.
    private let dirty = Mutex(false)

    /// A cache backed by `file`, or in memory only when `file` is nil.
    public init(file: String?) {
        self.file = file
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
        guard let entry = entries.withLock({ $0[address] }), entry.object == head, let crc = entry.crc32c.flatMap({ UInt32($0, radix: 16) })
        else {
            return nil
        }
        return ObjectDigest(sha256: entry.sha256, crc32c: crc)
    }

    /// Keeps the digests Stockroom computed of the object `address` as it was at `head`.
    public func remember(object address: String, head: S3Client.Head, digest: ObjectDigest) {
        let entry = Entry(stamp: nil, object: head, sha256: digest.sha256, crc32c: CRC32C.hex(digest.crc32c))
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
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try AtomicFile.write(try encoder.encode(snapshot), to: file)
        dirty.withLock { $0 = false }
    }

    /// Writes the cache file, keeping only `paths` (the files the catalogue still lists);
    /// does nothing when no digest was added or dropped since the last write.
    public func save(keeping paths: Set<String>) throws {
        let snapshot = entries.withLock { entries in
            let kept = entries.filter { paths.contains($0.key) }
            if kept.count != entries.count { dirty.withLock { $0 = true } }
            entries = kept
            return entries
        }
        guard let file, dirty.withLock({ $0 }) else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try AtomicFile.write(try encoder.encode(snapshot), to: file)
        dirty.withLock { $0 = false }
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
