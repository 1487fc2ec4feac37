import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A partial file that a body is appended to, with progress reported.
///
/// Each piece is copied into one of a few page-aligned buffers (4 × 2 MiB). A writer thread
/// writes each full buffer to the file while a hasher thread hashes it (SHA-256), so a piece is
/// copied once in memory and hashed where it lies. When every buffer is waiting, `append`
/// waits, and libcurl reads no more from the socket: memory stays at the buffers whatever the
/// file's size.
///
/// On Linux the writer opens the file with `O_DIRECT` where the file system allows: the bytes go
/// to the disk past the page cache. Writing 1 GiB through the page cache cost more than the
/// network (the kernel's copy, and pages a virtual machine had to take back from its host, swung
/// one run from 1.3 s to 4.6 s), and left 1 GiB of dirty pages for the final `fsync`. Elsewhere,
/// and for the unaligned first and last pieces, it writes through the page cache.
final class BodyFile: @unchecked Sendable {
    static let defaultBufferSize = 2 << 20
    static let bufferCount = 4
    private static let alignment = 4096

    /// Each buffer's size, a multiple of the page.
    let bufferSize: Int
    private let file: Int32
    private let direct: Int32?
    private let keeping: Int64
    /// The most bytes the file may hold: the body's `Content-Length` on top of what was kept.
    private let limit: Int64
    private let progress: @Sendable (Int64) -> Void
    private let condition = NSCondition()
    private let buffers: [UnsafeMutableRawPointer]
    // Guarded by `condition`:
    private var slots: [Slot]
    private var filling = 0
    /// Where the next slot to fill starts in the file.
    private var nextOffset: Int64
    private var accepted: Int64
    private var ended = false
    private var writing = true
    private var writeError: (any Error)?
    private var hashed = false
    private var result: SHA256Digest?
    private var waiters: [CheckedContinuation<SHA256Digest?, Never>] = []

    /// One buffer: filled by `append`, then written and hashed.
    private struct Slot {
        var offset: Int64 = 0
        var count = 0
        var capacity = 0
        var full = false
        var written = false
        var hashed = false
    }

    /// Opens `path` to append after its first `keeping` bytes (cut there); those are hashed too,
    /// from the first byte. `limit` bounds the whole file: an `append` past it throws.
    /// `direct: false` keeps every write in the page cache; `bufferSize` (whole pages) is
    /// smaller in the tests, so that a few KiB go round the ring.
    ///
    /// A symbolic link at `path` is never followed: a new file replaces it (`keeping` 0), and
    /// a resume refuses it.
    init(
        path: String, keeping: Int64, limit: Int64 = .max, direct: Bool = true, bufferSize: Int = BodyFile.defaultBufferSize,
        progress: @escaping @Sendable (Int64) -> Void
    ) throws {
        precondition(bufferSize > 0 && bufferSize % Self.alignment == 0, "whole pages")
        self.bufferSize = bufferSize
        try FileManager.default.createDirectory(
            at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        let file: Int32
        do {
            file = try LocalFile.openFile(path, O_RDWR | (keeping == 0 ? O_CREAT : 0), mode: 0o600)
        } catch let error as POSIXError where error.code == .ELOOP && keeping == 0 {
            // A link planted where the partial file goes: the link goes, never what it points at.
            LocalFile.remove(path)
            file = try LocalFile.openFile(path, O_RDWR | O_CREAT | O_EXCL, mode: 0o600)
        }
        var status = stat()
        guard fstat(file, &status) == 0 else {
            close(file)
            throw LocalFile.posixError()
        }
        // Readable after the first unlock: a download resumed in the background on a locked device
        // must still write it.
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            try? FileManager.default.setAttributes(
                [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: path)
        #endif
        guard Int64(status.st_size) == keeping || ftruncate(file, off_t(keeping)) == 0 else {
            close(file)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        self.file = file
        self.direct = direct ? Self.openDirect(path, sameAs: status) : nil
        self.keeping = keeping
        self.limit = limit
        self.accepted = keeping
        self.nextOffset = keeping
        self.progress = progress
        buffers = (0..<Self.bufferCount).map { _ in UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: Self.alignment) }
        slots = Array(repeating: Slot(), count: Self.bufferCount)
        slots[0] = Self.slot(at: keeping, bufferSize: bufferSize)
        let writer = Thread { [self] in write() }
        writer.name = "StockroomKit.BodyFile.write"
        writer.start()
        let hasher = Thread { [self] in hash() }
        hasher.name = "StockroomKit.BodyFile.hash"
        hasher.start()
    }

    deinit {
        if let direct { close(direct) }
        close(file)
        for buffer in buffers { buffer.deallocate() }
    }

    /// Bytes in the file so far, and in the buffers on their way to it.
    var length: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return accepted
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard let source = bytes.baseAddress else { return }
        guard Int64(bytes.count) <= limit - length else { throw POSIXError(.EFBIG) }
        var done = 0
        while done < bytes.count {
            condition.lock()
            if let writeError {
                condition.unlock()
                throw writeError
            }
            let index = filling
            let slot = slots[index]
            condition.unlock()
            // The slot being filled is this thread's alone until it is marked full.
            let take = min(slot.capacity - slot.count, bytes.count - done)
            buffers[index].advanced(by: slot.count).copyMemory(from: source.advanced(by: done), byteCount: take)
            done += take
            condition.lock()
            slots[index].count += take
            accepted += Int64(take)
            if slots[index].count == slots[index].capacity { submitFilling(waitForNext: true) }
            condition.unlock()
        }
        progress(length)
    }

    /// The body ended (whole or not): what the buffers hold is written and the file flushed to
    /// disk; the hash catches up on its own (`digest()`).
    /// Calling it again only reports the same outcome.
    func end() throws {
        condition.lock()
        // Only a slot being filled goes to the threads: after a write error the ring may point at
        // one they have handled already, and handing it over again left both waiting on it forever.
        let slot = slots[filling]
        if !ended, slot.count > 0, !slot.full, !slot.written, !slot.hashed { submitFilling(waitForNext: false) }
        ended = true
        condition.broadcast()
        while writing { condition.wait() }
        let failure = writeError
        condition.unlock()
        if let failure { throw failure }
        guard fsync(file) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
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

    // MARK: The buffers' ring (under `condition`)

    /// A slot that starts at `offset`, sized so that it ends on a page boundary: every later
    /// write is then aligned, as `O_DIRECT` requires.
    private static func slot(at offset: Int64, bufferSize: Int) -> Slot {
        Slot(offset: offset, capacity: bufferSize - Int(offset % Int64(alignment)))
    }

    private func submitFilling(waitForNext: Bool) {
        slots[filling].full = true
        nextOffset = slots[filling].offset + Int64(slots[filling].count)
        condition.broadcast()
        filling = (filling + 1) % slots.count
        guard waitForNext else { return }
        // A write error frees no slot: `append` throws it at its next turn.
        while slots[filling].full && writeError == nil { condition.wait() }
        if !slots[filling].full { slots[filling] = Self.slot(at: nextOffset, bufferSize: bufferSize) }
    }

    /// Waits for the next full slot that `step` has not handled; nil once the body ended and
    /// every slot was handled.
    private func next(_ index: Int, handled: (Slot) -> Bool) -> Slot? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let slot = slots[index]
            if slot.full && !handled(slot) { return slot }
            if ended && !slot.full { return nil }
            condition.wait()
        }
    }

    /// Marks a slot written or hashed; the second of the two frees it.
    private func finish(_ index: Int, mark: (inout Slot) -> Void) {
        condition.lock()
        mark(&slots[index])
        if slots[index].written && slots[index].hashed {
            slots[index].full = false  // `submitFilling` sizes it again when its turn to be filled comes
        }
        condition.broadcast()
        condition.unlock()
    }

    // MARK: The threads

    private func write() {
        var index = 0
        while let slot = next(index, handled: \.written) {
            let aligned = slot.offset % Int64(Self.alignment) == 0 && slot.count % Self.alignment == 0
            let target = aligned ? (direct ?? file) : file
            let failure = Self.write(buffers[index], count: slot.count, at: slot.offset, to: target)
            finish(index) { slot in
                slot.written = true
                if let failure, writeError == nil { writeError = failure }
            }
            index = (index + 1) % slots.count
        }
        condition.lock()
        writing = false
        condition.broadcast()
        condition.unlock()
    }

    private func hash() {
        var digest = SHA256Digest()
        var readable = hashPrefix(into: &digest)
        var index = 0
        while let slot = next(index, handled: \.hashed) {
            if readable { digest.update(UnsafeRawBufferPointer(start: buffers[index], count: slot.count)) }
            finish(index) { slot in
                slot.hashed = true
                if writeError != nil { readable = false }
            }
            index = (index + 1) % slots.count
        }
        condition.lock()
        result = readable && writeError == nil ? digest : nil
        hashed = true
        let waiting = waiters
        waiters = []
        let value = result
        condition.unlock()
        for waiter in waiting { waiter.resume(returning: value) }
    }

    /// Hashes the bytes kept from before (a resume), read back from the file; false when it fails.
    private func hashPrefix(into digest: inout SHA256Digest) -> Bool {
        guard keeping > 0 else { return true }
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: Self.alignment)
        defer { chunk.deallocate() }
        var offset: Int64 = 0
        while offset < keeping {
            let count = pread(file, chunk, Int(min(keeping - offset, 1 << 20)), off_t(offset))
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            digest.update(UnsafeRawBufferPointer(start: chunk, count: count))
            offset += Int64(count)
        }
        return true
    }

    private static func write(_ buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64, to descriptor: Int32) -> (any Error)? {
        var done = 0
        while done < count {
            let written = pwrite(descriptor, buffer.advanced(by: done), count - done, off_t(offset + Int64(done)))
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            done += written
        }
        return nil
    }

    /// A second descriptor that writes past the page cache, where the platform and file system
    /// have it (Linux's `O_DIRECT`; tmpfs, for one, may refuse it).
    /// It must open the same file as the first (`opened`), not whatever was put at `path` since.
    private static func openDirect(_ path: String, sameAs opened: stat) -> Int32? {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
            #if arch(x86_64)
                let flag: Int32 = 0o40000
            #else
                let flag: Int32 = 0o200000
            #endif
            guard let descriptor = try? LocalFile.openFile(path, O_WRONLY | flag) else { return nil }
            var status = stat()
            guard fstat(descriptor, &status) == 0, status.st_dev == opened.st_dev, status.st_ino == opened.st_ino else {
                close(descriptor)
                return nil
            }
            return descriptor
        #else
            return nil
        #endif
    }
}
