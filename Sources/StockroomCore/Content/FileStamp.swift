#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What identifies one version of a file on disk without reading it: size, modification time, inode.
///
/// The catalogue caches digests by stamp, and delivery refuses to serve a file whose stamp
/// moved since it was hashed (its ETag and digest would lie).
public struct FileStamp: Sendable, Hashable, Codable {
    public var size: Int64
    public var modificationNanoseconds: Int64
    public var inode: UInt64

    public init(size: Int64, modificationNanoseconds: Int64, inode: UInt64) {
        self.size = size
        self.modificationNanoseconds = modificationNanoseconds
        self.inode = inode
    }

    /// The stamp of a file from its `stat`.
    public init(_ status: stat) {
        self.init(
            size: Int64(status.st_size),
            modificationNanoseconds: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec),
            inode: UInt64(status.st_ino)
        )
    }

    /// The stamp of the file at `path` (following symbolic links), or nil when there is none.
    /// Blocking: call from a thread pool, not an event loop.
    public static func of(path: String) -> FileStamp? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return FileStamp(status)
    }
}
