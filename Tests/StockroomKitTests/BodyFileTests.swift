import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

/// The partial file: what is appended reaches the disk whole and in order, and is hashed with the
/// bytes kept from before, through the page cache and past it, however the pieces are cut.
@Suite struct BodyFileTests {
    /// Random bytes, read rather than generated: a debug build's loop would hold a test thread
    /// for seconds, and the timing tests beside this one share those threads.
    static func bytes(_ count: Int) -> [UInt8] {
        guard count > 0, let random = FileHandle(forReadingAtPath: "/dev/urandom") else { return [] }
        defer { try? random.close() }
        return [UInt8](random.readData(ofLength: count))
    }

    /// libcrypto's, which `DigestTests` checks against the standard's vectors.
    static func sha256(_ bytes: [UInt8]) -> String {
        var digest = SHA256Digest()
        bytes.withUnsafeBytes { digest.update($0) }
        return DigestTests.hex(digest.finalize())
    }

    /// Two pages a buffer, so that a few KiB go round the ring of four (the app's are 2 MiB).
    static let buffer = 8192

    /// (kept bytes, body, piece size): an empty start and an unaligned one, bodies shorter than a
    /// page, than one buffer, and longer than the whole ring; pieces of 1 byte to 3 buffers.
    static let cases: [(Int, Int, Int)] = [
        (0, 0, 1), (0, 100, 7), (0, 4096, 4096), (1000, 5000, 333), (0, 9 * buffer + 17, 1000),
        (123_457, 3 * buffer, 3 * buffer), (buffer, buffer + 1, 4096), (4095, 20_000, 1), (0, 40 * buffer + 5, 2 * buffer + 3),
    ]

    @Test(arguments: [true, false])
    func everyByteReachesTheFileAndTheDigestCoversTheWholeFile(direct: Bool) async throws {
        let folder = try TemporaryFolder()
        for (index, (kept, count, piece)) in Self.cases.enumerated() {
            let path = folder.path + "/\(index).part"
            let old = Self.bytes(kept)
            // What was there before: the kept prefix, then bytes the new body replaces.
            _ = FileManager.default.createFile(atPath: path, contents: Data(old + Self.bytes(777)))
            let body = Self.bytes(count)
            let reported = ProgressLog()
            let file = try BodyFile(path: path, keeping: Int64(kept), direct: direct, bufferSize: Self.buffer) { reported.append($0) }
            try await Self.offThePool {
                var offset = 0
                while offset < body.count {
                    let end = min(offset + piece, body.count)
                    try body[offset..<end].withUnsafeBytes { try file.append($0) }
                    offset = end
                }
                try file.end()
            }
            let digest = try #require(await file.digest(), "case \(index)")
            let whole = old + body
            #expect(DigestTests.hex(digest.finalize()) == Self.sha256(whole), "case \(index)")
            #expect(file.length == Int64(whole.count), "case \(index)")
            let onDisk = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(onDisk == whole, "case \(index): the file holds exactly the kept bytes and the body")
            #expect(reported.last == (count > 0 ? Int64(whole.count) : nil), "case \(index)")
        }
    }

    @Test func aFailedWriteIsThrownAndTheDigestIsWithheld() async throws {
        // /dev/full refuses every write with ENOSPC, as a full disk does.
        let file = try BodyFile(path: "/dev/full", keeping: 0, direct: false, bufferSize: Self.buffer) { _ in }
        let piece = [UInt8](repeating: 1, count: 1000)
        var thrown: (any Error)?
        do {
            try await Self.offThePool {
                for _ in 0..<(4 * BodyFile.bufferCount * Self.buffer / piece.count) {
                    try piece.withUnsafeBytes { try file.append($0) }
                }
                try file.end()
            }
        } catch {
            thrown = error
        }
        #expect((thrown as? POSIXError)?.code == .ENOSPC, "\(String(describing: thrown))")
        await #expect(throws: POSIXError.self, "the end of the body reports it too") { try await Self.offThePool { try file.end() } }
        #expect(await file.digest() == nil, "a file that was not written whole has no digest")
    }

    /// A full disk mid-body, many times over, with pieces cut every way: `append` throws, `end`
    /// reports it however often it is called, and the digest comes back nil, each within a
    /// deadline. The writer and hash threads race the body's thread here: `end` once handed them
    /// again a buffer they had both handled, and they waited on it forever (the download with it).
    @Test func aFullDiskNeverLeavesTheBodyWaiting() async throws {
        for round in 0..<300 {
            let file = try BodyFile(path: "/dev/full", keeping: 0, direct: false, bufferSize: 4096) { _ in }
            let piece = [UInt8](repeating: 1, count: 500 + round % 11 * 700)
            let ended = await within(.seconds(20)) {
                try? await Self.offThePool {
                    do {
                        for _ in 0..<(4 * BodyFile.bufferCount * 4096 / piece.count + 2) {
                            try piece.withUnsafeBytes { try file.append($0) }
                        }
                    } catch {}
                    for _ in 0..<(1 + round % 2) { _ = try? file.end() }
                }
                return await file.digest() == nil
            }
            guard let ended else {
                Issue.record("round \(round): the body's threads were still waiting after 20 s")
                return
            }
            #expect(ended, "round \(round): a file that was not written whole has no digest")
        }
    }
}

extension BodyFileTests {
    /// Runs `work` on a thread of its own, as the transfer's thread does: `append` and `end` wait
    /// for the disk, and on the shared pool's two threads they held up every other test.
    static func offThePool(_ work: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread {
                do {
                    try work()
                    continuation.resume()
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }
}

/// The progress a `BodyFile` reported, in order.
final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Int64] = []
    func append(_ value: Int64) { lock.withLock { values.append(value) } }
    var last: Int64? { lock.withLock { values.last } }
}
