import Foundation

/// A fresh folder under the system temporary directory, removed when the test is done.
public final class TemporaryFolder: @unchecked Sendable {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "stockroom-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `bytes` at `relative`, creating folders; returns the absolute path.
    @discardableResult
    public func write(_ relative: String, _ bytes: [UInt8]) throws -> String {
        let file = path + "/" + relative
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: file, contents: Data(bytes)) else {
            throw CocoaError(.fileWriteUnknown)
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
    return (0..<count).map { _ in
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}
