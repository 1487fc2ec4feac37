import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// File operations on the client's own folders that never follow a symbolic link planted at the
/// last component, and never remove a folder.
///
/// The folders themselves are the app's (its configuration); the names in them come from the
/// network, checked by `NetworkName`, so each file sits directly in its folder and only the last
/// component can be a trap.
enum LocalFile {
    /// Opens `path` without following a link there (`O_NOFOLLOW`); `O_NONBLOCK` on a read so a
    /// planted FIFO cannot hold the open.
    static func openFile(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws -> Int32 {
        let descriptor = open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw posixError() }
        return descriptor
    }

    /// The size of the regular file at `path`; nil when there is none, or a link or anything
    /// else stands there.
    static func regularFileSize(_ path: String) -> Int64? {
        var status = stat()
        guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(status.st_size)
    }

    /// Removes the file or link at `path`: never a folder, never what a link points at.
    static func remove(_ path: String) {
        _ = unlink(path)
    }

    /// The current `errno` as an error.
    static func posixError() -> POSIXError {
        POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }

    /// Writes all of `data` at the descriptor's position.
    static func writeAll(_ data: Data, to descriptor: Int32) throws {
        try data.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            var done = 0
            while done < bytes.count {
                let written = write(descriptor, base + done, bytes.count - done)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw posixError() }
                done += written
            }
        }
    }

    /// Reads to the end, or to a byte past `limit`, whichever comes first.
    static func readAll(_ descriptor: Int32, upTo limit: Int) throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while data.count <= limit {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw posixError() }
            if count == 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }
}
