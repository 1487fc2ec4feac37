public import Hummingbird
import NIOCore
import NIOPosix
import _NIOFileSystem

/// Where content bytes come from: a folder of files, confined to it.
///
/// A protocol so that the server and its tests depend on what delivery needs, not on a disk.
public protocol ContentStore: Sendable {
    /// Checks that `representation` is still on disk, inside the store, as it was hashed.
    func prepare(_ representation: ContentRepresentation) async throws -> PreparedContent

    /// Writes the bytes of `range` to `writer` in bounded memory, returning how many went out.
    /// Throws when the file changed under it; `progress` hears each chunk's size once it is written.
    func write(
        _ content: PreparedContent, range: ClosedRange<Int64>, to writer: inout any ResponseBodyWriter,
        progress: @Sendable (Int) -> Void
    ) async throws
}

/// A content file that passed the jail and stamp checks, ready to stream.
public struct PreparedContent: Sendable {
    public let absolutePath: String
    public let representation: ContentRepresentation
}

/// The content folder on local disk, read through NIO's file system on its thread pool.
public struct LocalContentStore: ContentStore {
    /// 256 KiB: NIO reads up to 8 chunks ahead of the socket, so one stream holds at most 2 MiB.
    public static let defaultChunkSize = 256 * 1024

    public let jail: ContentJail
    public let chunkSize: Int
    private let threadPool: NIOThreadPool

    public init(jail: ContentJail, chunkSize: Int = defaultChunkSize, threadPool: NIOThreadPool = .singleton) {
        self.jail = jail
        self.chunkSize = chunkSize
        self.threadPool = threadPool
    }

    public func prepare(_ representation: ContentRepresentation) async throws -> PreparedContent {
        let jail = self.jail
        let path = try await threadPool.runIfActive { () throws -> String in
            let path = try jail.resolve(representation.path)
            guard let stamp = FileStamp.of(path: path), Self.matches(stamp, representation) else {
                throw ContentError.changedSinceHashed(representation.path)
            }
            return path
        }
        return PreparedContent(absolutePath: path, representation: representation)
    }

    public func write(
        _ content: PreparedContent, range: ClosedRange<Int64>, to writer: inout any ResponseBodyWriter,
        progress: @Sendable (Int) -> Void
    ) async throws {
        let fileSystem = FileSystem(threadPool: threadPool)
        let handle = try await fileSystem.openFile(forReadingAt: FilePath(content.absolutePath), options: .init())
        do {
            let info = try await handle.info()
            guard let status = info.platformSpecificStatus, Self.matches(FileStamp(status), content.representation) else {
                throw ContentError.changedSinceHashed(content.representation.path)
            }
            let chunks = handle.readChunks(in: range.lowerBound..<(range.upperBound + 1), chunkLength: .bytes(Int64(chunkSize)))
            for try await chunk in chunks {
                let count = chunk.readableBytes
                try await writer.write(chunk)
                progress(count)
            }
        } catch {
            try? await handle.close()
            throw error
        }
        try await handle.close()
    }

    private static func matches(_ stamp: FileStamp, _ representation: ContentRepresentation) -> Bool {
        guard stamp.size == representation.size else { return false }
        guard let expected = representation.stamp else { return true }
        return stamp == expected
    }
}

