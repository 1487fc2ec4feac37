import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A partial file that a body is appended to, with progress reported; a thread of its own hashes
/// (SHA-256) what was written, reading the file behind the writer.
///
/// URLSession on Linux queues every chunk for its delegate without waiting, so the delegate only
/// writes: were it to hash as well, a hash slower than the network would pile the body up in
/// memory. Written on its session's serial queue; `digest()` is awaited once the transfer ended.
final class BodyFile: @unchecked Sendable {
    private let handle: FileHandle
    private let progress: @Sendable (Int64) -> Void
    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var written: Int64
    /// Where the writeback started last (Linux): the writer's thread only.
    private var flushedTo: Int64
    private var ended = false
    private var result: SHA256Digest?
    private var hashed = false
    private var waiters: [CheckedContinuation<SHA256Digest?, Never>] = []

    /// Opens `path` to append after its first `keeping` bytes (cut there); those are hashed too,
    /// by the same thread, from the first byte.
    init(path: String, keeping: Int64, progress: @escaping @Sendable (Int64) -> Void) throws {
        if !FileManager.default.fileExists(atPath: path) {
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            // Readable after the first unlock: a download resumed in the background on a locked device
            // must still write it.
            #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            let attributes: [FileAttributeKey: Any] = [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication]
            #else
            let attributes: [FileAttributeKey: Any] = [:]
            #endif
            guard FileManager.default.createFile(atPath: path, contents: nil, attributes: attributes) else { throw CocoaError(.fileWriteUnknown) }
        }
        guard let handle = FileHandle(forWritingAtPath: path), let reader = FileHandle(forReadingAtPath: path) else {
            throw CocoaError(.fileWriteNoPermission)
        }
        try handle.truncate(atOffset: UInt64(keeping))
        try handle.seekToEnd()
        self.handle = handle
        self.written = keeping
        self.flushedTo = keeping
        self.progress = progress
        let thread = Thread { [self] in hash(reader) }
        thread.name = "StockroomKit.BodyFile.hash"
        thread.start()
    }

    deinit { try? handle.close() }

    /// Bytes in the file so far.
    var length: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return written
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        try handle.write(contentsOf: bytes)
        condition.lock()
        written += Int64(bytes.count)
        let now = written
        condition.signal()
        condition.unlock()
        progress(now)
        startWriteback(upTo: now)
    }

    /// Starts writing what the last 8 MiB added to disk, without waiting for it: the final
    /// `fsync` then finds little left to write (on Linux, 1 GiB of dirty pages took 0.7–0.9 s to
    /// flush at the end, most of a fast download's time).
    private func startWriteback(upTo end: Int64) {
        #if os(Linux)
        guard end - flushedTo >= (8 << 20), let syncFileRange = Self.syncFileRange else { return }
        _ = syncFileRange(handle.fileDescriptor, flushedTo, end - flushedTo, 2)  // SYNC_FILE_RANGE_WRITE
        flushedTo = end
        #endif
    }

    #if os(Linux)
    /// glibc's `sync_file_range`, which Swift's Glibc module does not export.
    private static let syncFileRange: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32)? = {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sync_file_range").map {
            unsafeBitCast($0, to: (@convention(c) (Int32, Int64, Int64, UInt32) -> Int32).self)
        }
    }()
    #endif

    /// The body ended (whole or not): the file is flushed to disk, and the hash catches up.
    func end() throws {
        defer {
            condition.lock()
            ended = true
            condition.signal()
            condition.unlock()
        }
        try handle.synchronize()
    }

    /// The SHA-256 of the whole file once the hash reached its end; nil when it could not be read.
    func digest() async -> SHA256Digest? {
        await withCheckedContinuation { continuation in
            condition.lock()
            if hashed {
                let value = result
                condition.unlock()
                continuation.resume(returning: value)
            } else {
                waiters.append(continuation)
                condition.unlock()
            }
        }
    }

    /// Reads the file behind the writer, a MiB at a time, until the body ended and all is hashed.
    private func hash(_ reader: FileHandle) {
        var digest = SHA256Digest()
        var offset: Int64 = 0
        var failed = false
        while true {
            condition.lock()
            while written - offset < (1 << 20) && !ended { condition.wait() }
            let target = written
            let done = ended
            condition.unlock()
            if offset < target {
                guard let chunk = try? reader.read(upToCount: Int(min(target - offset, 1 << 20))), !chunk.isEmpty else {
                    failed = true
                    break
                }
                digest.update(chunk)
                offset += Int64(chunk.count)
                continue
            }
            if done { break }
        }
        try? reader.close()
        condition.lock()
        result = failed ? nil : digest
        hashed = true
        let waiting = waiters
        waiters = []
        let value = result
        condition.unlock()
        for waiter in waiting { waiter.resume(returning: value) }
    }
}
