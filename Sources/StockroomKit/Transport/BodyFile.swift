import Foundation

/// A partial file that a body is appended to, hashed as it is written, with progress reported.
///
/// Owned by one transfer; touched only on its session's serial queue, then read by the delivery
/// once the transfer has ended.
final class BodyFile: @unchecked Sendable {
    private let handle: FileHandle
    private(set) var digest: SHA256Digest
    private(set) var length: Int64
    private let progress: @Sendable (Int64) -> Void

    /// Opens `path` to append after its first `keeping` bytes (cut there), whose digest is `prefix`.
    init(path: String, keeping: Int64, prefix: SHA256Digest, progress: @escaping @Sendable (Int64) -> Void) throws {
        if !FileManager.default.fileExists(atPath: path) {
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: path, contents: nil) else { throw CocoaError(.fileWriteUnknown) }
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw CocoaError(.fileWriteNoPermission) }
        try handle.truncate(atOffset: UInt64(keeping))
        try handle.seekToEnd()
        self.handle = handle
        self.digest = prefix
        self.length = keeping
        self.progress = progress
    }

    deinit { try? handle.close() }

    func append(_ data: Data) throws {
        try handle.write(contentsOf: data)
        digest.update(data)
        length += Int64(data.count)
        progress(length)
    }

    func flush() throws {
        try handle.synchronize()
    }
}
