import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh folder under the system temporary directory, removed when the test is done.
public final class TemporaryFolder: @unchecked Sendable {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "stockroom-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `bytes` at `relative`, creating folders; returns the absolute path.
    ///
    /// The bytes go to a hidden name that is then renamed over `relative`, so a server watching
    /// the folder sees the old file or the new one, never a half-written one. Nothing is
    /// fsynced: a test folder needs no durability, and `FileManager.createFile`'s fsync of each
    /// fixture's 8 MiB stalled the threads every test's tasks share for seconds when a full run
    /// started. (A hard link to one shared copy would write less, but each new link changes the
    /// copy's ctime, which every running server's catalogue poll reads as an edit.)
    @discardableResult
    public func write(_ relative: String, _ bytes: [UInt8]) throws -> String {
        let file = path + "/" + relative
        let folder = (file as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let temporary = folder + "/.writing-" + UUID().uuidString
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let failure: Int32? = bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let count = Glibc.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += count
            }
            return nil
        }
        close(descriptor)
        guard failure == nil, rename(temporary, file) == 0 else {
            let code = failure ?? errno
            unlink(temporary)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        return file
    }

    @discardableResult
    public func write(_ relative: String, _ text: String) throws -> String {
        try write(relative, Array(text.utf8))
    }

    public func folder(_ relative: String) throws -> String {
        let folder = path + "/" + relative
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }
}

/// Deterministic pseudo-random bytes, so content tests have non-repeating data.
public func sampleBytes(count: Int, seed: UInt64 = 42) -> [UInt8] {
    var state = seed
    return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        for index in 0..<count {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            buffer[index] = UInt8(truncatingIfNeeded: state >> 33)
        }
        initialized = count
    }
}
