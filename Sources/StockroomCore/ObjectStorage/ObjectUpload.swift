import Foundation

/// Uploads a local file to a bucket, hashing it on the way: one PUT for a file of one part,
/// multipart for a larger one, one part in memory at a time. The digests it returns are of the
/// bytes it read and sent, and the object's size is checked against them afterwards.
public struct ObjectUpload: Sendable {
    /// 16 MiB parts: S3 needs at least 5 MiB (but the last), allows 10,000 parts (156 GiB at this size).
    public static let defaultPartSize = 16 << 20
    public static let largestPartCount = 10_000

    /// What an upload produced.
    public struct Result: Sendable, Equatable {
        public var digest: ObjectDigest
        public var head: S3Client.Head
    }

    public let client: S3Client
    public let partSize: Int

    public init(client: S3Client, partSize: Int = defaultPartSize) {
        self.client = client
        self.partSize = max(5 << 20, partSize)
    }

    /// Uploads `path` to `key`; `progress` hears the bytes sent so far and the total after each
    /// part. A failed multipart upload is aborted, so the store keeps no parts. With `createOnly`,
    /// the write (the PUT, or the multipart completion) is a conditional create: it throws
    /// `ObjectStoreError.exists` rather than replace an object already at `key`.
    public func upload(
        _ path: String, to key: String, contentType: String, createOnly: Bool = false,
        progress: @Sendable (Int64, Int64) -> Void = { _, _ in }
    )
        async throws -> Result
    {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw ObjectUploadError.unreadable(path) }
        defer { try? handle.close() }
        let total = Int64((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0)
        guard (total + Int64(partSize) - 1) / Int64(partSize) <= Int64(Self.largestPartCount) else {
            throw ObjectUploadError.tooLarge(path, bytes: total)
        }
        var hasher: ObjectHasher? = ObjectHasher()
        var sent: Int64 = 0
        var stored: String
        var first = try Self.read(handle, count: partSize)
        hasher?.update(first)
        if first.count < partSize {
            // One part: one PUT.
            stored = try await client.put(key, body: first, contentType: contentType, createOnly: createOnly)
            sent = Int64(first.count)
            progress(sent, total)
        } else {
            let uploadID = try await client.startMultipart(key, contentType: contentType)
            do {
                var tags: [String] = []
                var part = first
                first = []
                while !part.isEmpty {
                    tags.append(try await client.uploadPart(key, uploadID: uploadID, number: tags.count + 1, body: part))
                    sent += Int64(part.count)
                    progress(sent, max(total, sent))
                    part = try Self.read(handle, count: partSize)
                    hasher?.update(part)
                }
                stored = try await client.completeMultipart(key, uploadID: uploadID, parts: tags, createOnly: createOnly)
            } catch {
                await client.abortMultipart(key, uploadID: uploadID)
                throw error
            }
        }
        guard let digest = hasher.take()?.finalize() else { throw ObjectUploadError.unreadable(path) }
        let head = try await client.head(key)
        guard head.size == sent else { throw ObjectUploadError.sizeMismatch(key, sent: sent, stored: head.size) }
        // The digest is kept against the ETag the store gave our own write: another write landing
        // between it and the HEAD (same size or not) would otherwise take our digest.
        let bare = { (tag: String) in tag.trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) }
        guard stored.isEmpty || bare(head.etag) == bare(stored) else { throw ObjectUploadError.replacedMeanwhile(key) }
        return Result(digest: digest, head: head)
    }

    /// Up to `count` bytes, fewer only at the end of the file.
    private static func read(_ handle: FileHandle, count: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        while bytes.count < count, let chunk = try handle.read(upToCount: min(count - bytes.count, 1 << 20)), !chunk.isEmpty {
            bytes.append(contentsOf: chunk)
        }
        return bytes
    }
}

/// Why a file could not be uploaded.
public enum ObjectUploadError: Error, Equatable, CustomStringConvertible {
    case unreadable(String)
    case tooLarge(String, bytes: Int64)
    case sizeMismatch(String, sent: Int64, stored: Int64)
    case replacedMeanwhile(String)

    public var description: String {
        switch self {
        case .unreadable(let path): "\(path) cannot be read"
        case .tooLarge(let path, let bytes): "\(path) is \(bytes) bytes, more than 10,000 parts of the part size"
        case .sizeMismatch(let key, let sent, let stored): "the store holds \(stored) bytes at \"\(key)\" after \(sent) were sent"
        case .replacedMeanwhile(let key): "\"\(key)\" was written again by someone else during the upload"
        }
    }
}
