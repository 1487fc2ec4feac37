import StockroomCore
import Synchronization
public import Hummingbird
import NIOCore
import NIOPosix
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where content bytes come from: a folder of files, confined to it.
///
/// A protocol so that the server and its tests depend on what delivery needs, not on a disk.
public protocol ContentStore: Sendable {
    /// Checks that `representation` is still on disk, inside the store, as it was hashed.
    func prepare(_ representation: ContentRepresentation) async throws -> PreparedContent

    /// Writes the bytes of `range` in bounded memory: through `direct` when the connection has it
    /// (below Hummingbird's writer), else to `writer`. Throws when the content changed under it;
    /// `progress` hears each chunk's size once it is written.
    func write(
        _ content: PreparedContent, range: ClosedRange<Int64>, to writer: inout any ResponseBodyWriter, direct: DirectBody?,
        progress: @escaping @Sendable (Int) -> Void
    ) async throws
}

/// A content file that passed the jail and stamp checks, ready to stream.
public struct PreparedContent: Sendable {
    /// The file's absolute path, or the object's key.
    public let absolutePath: String
    public let representation: ContentRepresentation

    public init(absolutePath: String, representation: ContentRepresentation) {
        self.absolutePath = absolutePath
        self.representation = representation
    }
}

/// The content folder on local disk: sent with `sendfile` on a live connection (the kernel copies
/// the file to the socket, as nginx does), read with `pread` on NIO's thread pool otherwise.
public struct LocalContentStore: ContentStore {
    /// 512 KiB: one download holds two chunks, plus what the channel has not yet written.
    /// Measured on loopback with 16 clients: 256 KiB gave 2.3–3.0 GB/s, 512 KiB 2.8–3.5 GB/s at
    /// 85–100 MB peak RSS, 1 MiB 3.1–3.3 GB/s at up to 131 MB.
    public static let defaultChunkSize = 512 * 1024
    /// The largest `sendfile` region, 4 MiB: a region costs a disk read-ahead on the thread pool
    /// and a task's turn, whatever its size, and at 512 KiB that cost holds 8 clients of 1 GiB to
    /// 0.86-0.89 of nginx, where 4 MiB runs at 0.95-1.06 in the same runs. Regions hold no memory.
    public static let largestRegion = 4 << 20

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
        _ content: PreparedContent, range: ClosedRange<Int64>, to writer: inout any ResponseBodyWriter, direct: DirectBody?,
        progress: @escaping @Sendable (Int) -> Void
    ) async throws {
        let path = content.absolutePath
        let file = try await threadPool.runIfActive { try OpenContentFile(path: path) }
        guard Self.matches(file.stamp, content.representation) else {
            throw ContentError.changedSinceHashed(content.representation.path)
        }
        if let direct {
            try await send(file, content, range: range, through: direct, progress: progress)
            return
        }
        // Two buffers per download, alternating: by the time one comes round again the channel
        // has usually written and released it, so its memory is reused rather than allocated.
        // A range that fits in one chunk needs one buffer of its own size: a small download
        // then costs no large allocation (mapped and unmapped by malloc, ~5% of a receipt
        // download's CPU when it was two chunks each time).
        let total = range.upperBound - range.lowerBound + 1
        let slots =
            total <= Int64(chunkSize)
            ? [ChunkSlot(capacity: Int(total))]
            : [ChunkSlot(capacity: chunkSize), ChunkSlot(capacity: chunkSize)]
        var offset = range.lowerBound
        var turn = 0
        while offset <= range.upperBound {
            let slot = slots[turn % slots.count]
            turn += 1
            let length = Int(min(Int64(chunkSize), range.upperBound - offset + 1))
            let start = offset
            let count = try await threadPool.runIfActive { try slot.read(file, at: start, length: length) }
            guard count > 0 else { throw ContentError.changedSinceHashed(content.representation.path) }  // it shrank
            try await writer.write(slot.buffer)
            progress(count)
            offset += Int64(count)
        }
    }

    /// The range as `sendfile` regions, two queued at a time: no byte passes through user space.
    /// Each region is its own write, so the send-rate watch and `progress` count it once the
    /// socket took all of it. The first regions are small (64 KiB, doubling up to `largestRegion`):
    /// a client that leaves after a few hundred kilobytes has those counted. (The send-rate watch
    /// also reads the bytes the reader acknowledged, so a slow reader is not cut while a large
    /// region drains.)
    ///
    /// `sendfile` runs on the event loop, which must never wait for a disk: each region's pages
    /// are read in on the thread pool first (`readahead`), so it finds them in the page cache.
    /// A file cut short under the download ends it: checked before each region, and every
    /// quarter second while regions wait, since `sendfile` past the end sends nothing and the
    /// event loop would try again as long as the client reads.
    private func send(
        _ file: OpenContentFile, _ content: PreparedContent, range: ClosedRange<Int64>, through direct: DirectBody,
        progress: @Sendable (Int) -> Void
    ) async throws {
        // NIO sends from the download's own descriptor, lent for the download and taken back once
        // no write holds it: a second one per download would eat the connection cap's reserve.
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: file.descriptor)
        let end = range.upperBound + 1
        let cutShort = SharedFlag()
        let finished = SharedFlag()
        var queued: [(written: EventLoopFuture<Void>, count: Int)] = []
        let complete: Bool
        do {
            complete = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while !finished.isSet {
                        try await Task.sleep(for: .milliseconds(250))
                        if !finished.isSet, file.size() < end {
                            cutShort.set()
                            direct.close()
                            return
                        }
                    }
                }
                defer {
                    finished.set()
                    group.cancelAll()
                }
                var offset = range.lowerBound
                var regionSize = min(64 << 10, chunkSize)
                while offset < end {
                    let count = Int(min(Int64(regionSize), end - offset))
                    let start = offset
                    let size = try await threadPool.runIfActive { file.readAhead(at: start, count: count) }
                    guard size >= offset + Int64(count) else {
                        cutShort.set()
                        break
                    }
                    let region = FileRegion(fileHandle: handle, readerIndex: Int(offset), endIndex: Int(offset) + count)
                    queued.append((direct.write(.fileRegion(region)), count))
                    offset += Int64(count)
                    regionSize = min(regionSize * 2, Self.largestRegion)
                    if queued.count == 2 {
                        try await queued[0].written.get()
                        progress(queued.removeFirst().count)
                    }
                }
                while let next = queued.first {
                    try await next.written.get()
                    progress(queued.removeFirst().count)
                }
                return offset == end
            }
        } catch {
            finished.set()
            // A region the socket took before the failure went out, and counts.
            for pending in queued {
                if (try? await pending.written.get()) != nil { progress(pending.count) }
            }
            _ = try? handle.takeDescriptorOwnership()
            throw cutShort.isSet ? ContentError.changedSinceHashed(content.representation.path) : error
        }
        _ = try handle.takeDescriptorOwnership()
        // Every region the socket took counts; a file that shrank before the last was queued
        // did not deliver the range.
        guard complete else { throw ContentError.changedSinceHashed(content.representation.path) }
    }

    private static func matches(_ stamp: FileStamp, _ representation: ContentRepresentation) -> Bool {
        guard stamp.size == representation.size else { return false }
        guard let expected = representation.stamp else { return true }
        return stamp == expected
    }
}

/// An open content file: the descriptor, closed in `deinit`, and its stamp from `fstat`.
final class OpenContentFile: Sendable {
    let descriptor: Int32
    let stamp: FileStamp

    init(path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ContentError.changedSinceHashed(path) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            close(descriptor)
            throw ContentError.changedSinceHashed(path)
        }
        self.descriptor = descriptor
        self.stamp = FileStamp(status)
    }

    deinit { close(descriptor) }

    /// The file's size now (`fstat`), or -1.
    func size() -> Int64 {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? Int64(status.st_size) : -1
    }

    /// Reads `count` bytes at `offset` into the page cache (blocking: the thread pool's work), and
    /// returns the file's size now.
    func readAhead(at offset: Int64, count: Int) -> Int64 {
        PageCache.readAhead(descriptor, offset: offset, count: count)
        return size()
    }
}

/// A reusable read buffer. Used by one download at a time, by the pool thread during a read and
/// by the download's task between reads, never both at once.
final class ChunkSlot: @unchecked Sendable {
    private(set) var buffer: ByteBuffer

    init(capacity: Int) {
        buffer = ByteBufferAllocator().buffer(capacity: capacity)
    }

    /// Reads up to `length` bytes at `offset` into the buffer, replacing what it held. Blocking.
    func read(_ file: OpenContentFile, at offset: Int64, length: Int) throws -> Int {
        buffer.clear()
        return try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { pointer in
            let count = pread(file.descriptor, pointer.baseAddress, length, off_t(offset))
            guard count >= 0 else { throw IOError(errnoCode: errno, reason: "pread") }
            return count
        }
    }
}

/// A flag one task sets and another reads.
final class SharedFlag: Sendable {
    private let value = Atomic(false)

    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}
