import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`, for the tests that run `stockroom`, nginx,
/// openssl or a python flood beside the test process.
///
/// Not Foundation's `Process`: on Linux its `run()` copies 256 bytes out of each
/// `/proc/self/fd` entry, reading past short records; when the last one ends at an unmapped
/// page the whole test process dies (swift-corelibs-foundation#5472, not fixed in 6.3). Seen
/// here as SIGSEGV in `Process.run()` while parallel tests held many sockets. Serialising the
/// launches did not help: the over-read needs only the descriptor table's shape.
///
/// The child gets only standard input (`/dev/null`), output and error: every other descriptor
/// is closed in it, so a test's sockets never stay open in a server it started. Exit is polled
/// (`waitpid` with `WNOHANG`), so no thread the in-process servers share ever blocks on it.
public final class ChildProcess: Sendable {
    /// Where the child's standard output and error go.
    public enum Output: Sendable {
        case discard
        /// Both streams to this file, created or emptied first.
        case file(String)
        /// Each stream to its own file, created or emptied first.
        case files(output: String, error: String)
    }

    public let pid: pid_t
    private let status = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments` (not including argv[0]); `environment` replaces the
    /// test process's when given; `directory` is the working directory.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
        output: Output = .discard
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        switch output {
        case .discard, .file:
            let path = if case .file(let path) = output { path } else { "/dev/null" }
            posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        case .files(let outputPath, let errorPath):
            posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        guard let closeFrom = Self.addCloseFrom, closeFrom(&actions, 3) == 0 else {
            throw POSIXError(.ENOSYS)
        }
        if let directory {
            guard let changeDirectory = Self.addChangeDirectory, changeDirectory(&actions, directory) == 0 else {
                throw POSIXError(.ENOSYS)
            }
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { variables.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, variables)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        self.pid = pid
    }

    /// Whether the child still runs (reaping it once it has exited).
    public var isRunning: Bool { exitStatus == nil }

    /// The exit code once the child has exited, or the signal's number when a signal ended it
    /// (as Foundation's `terminationStatus`); nil while it runs.
    public var exitStatus: Int32? {
        status.withLock { status in
            if status == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid {
                    status = raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
                }
            }
            return status
        }
    }

    /// Sends `signal` (SIGTERM by default) unless the child has already exited.
    public func terminate(_ signal: Int32 = SIGTERM) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits for the exit, polling; nil when the child still runs after `limit`.
    @discardableResult
    public func exit(within limit: Duration = .seconds(60)) async -> Int32? {
        let deadline = ContinuousClock.now + limit
        while true {
            if let code = exitStatus { return code }
            guard ContinuousClock.now < deadline else { return nil }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Runs `executable` to its end (at most `limit`, then SIGKILL); its exit status and what it
    /// printed on standard output and error.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, limit: Duration = .seconds(60)
    ) async throws -> (status: Int32, output: String) {
        let file = NSTemporaryDirectory() + "stockroom-child-" + UUID().uuidString
        defer { unlink(file) }
        let child = try ChildProcess(executable, arguments, environment: environment, output: .file(file))
        guard let status = await child.exit(within: limit) else {
            child.terminate(SIGKILL)
            await child.exit()
            throw POSIXError(.ETIMEDOUT)
        }
        return (status, (try? String(contentsOfFile: file, encoding: .utf8)) ?? "")
    }

    /// Waits for the exit, blocking the calling thread: only for a `deinit`, which cannot await.
    public func reap(within limit: Duration) {
        let deadline = ContinuousClock.now + limit
        while isRunning && ContinuousClock.now < deadline { usleep(10_000) }
    }

    deinit {
        // A child nobody waited for is killed and reaped, never left as a zombie or a stray.
        if isRunning {
            kill(pid, SIGKILL)
            var raw: Int32 = 0
            waitpid(pid, &raw, 0)
        }
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    private typealias AddChangeDirectory =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

    // glibc has both (2.34 and 2.29), but its headers show them only to _GNU_SOURCE C code.
    private static let addCloseFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: AddCloseFrom.self)
    }
    private static let addChangeDirectory = dlsym(nil, "posix_spawn_file_actions_addchdir_np").map {
        unsafeBitCast($0, to: AddChangeDirectory.self)
    }
}
